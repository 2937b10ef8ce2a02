# Dockerfile instructions `docker import --change` applies to the bootstrapped file system,
# so the base behaves like python:3.11-slim for our Dockerfiles:
# `python3` and `python3 -m pip` work as root, UTF-8 locale.
ENV LANG=C.UTF-8
ENV PIP_BREAK_SYSTEM_PACKAGES=1
ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
CMD ["python3"]
