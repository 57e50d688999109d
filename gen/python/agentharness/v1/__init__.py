"""Package agentharness.v1: events_pb2, session_service_pb2, session_service_pb2_grpc."""
