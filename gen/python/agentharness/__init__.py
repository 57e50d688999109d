"""Generated agent-harness protobuf and gRPC modules (see buf.gen.yaml)."""
