//! NATS JetStream, driven by the Go program in `tests/load/nats` (nats.go).
//!
//! TODO(helper): implement.
