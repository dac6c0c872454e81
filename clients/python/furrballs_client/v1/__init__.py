"""Generated protobuf and gRPC stubs of furrballs.v1 (see ../../generate.sh)."""
