"""The Host API: gRPC servicer, authentication, and typed error codes."""
