//! agent-harness server: runs Claude Code CLI sessions behind a gRPC API,
//! with one durable, append-only event log per session.
//!
//! # Layout
//! - [`adapter`]: the `ProcessAdapter` trait and its implementations.

pub mod adapter;
