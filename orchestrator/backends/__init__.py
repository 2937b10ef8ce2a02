"""Container backends. Docker (docker-py) is the only one today and the only docker-py user."""
