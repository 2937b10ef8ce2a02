#!/bin/bash
# Import a tarball made by bootstrap.sh as an image, with the settings of changes.dockerfile.
#
#   images/base/import.sh ROOTFS.tar TAG
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
changes=()
while IFS= read -r line; do
    changes+=(--change "$line")
done < <(grep -v -e '^[[:space:]]*#' -e '^[[:space:]]*$' "$here/changes.dockerfile")
docker import "${changes[@]}" --change "LABEL org.evopolicygym.managed=true org.evopolicygym.image=base" "$1" "$2"
