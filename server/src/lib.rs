//! agent-harness server: runs Claude Code CLI sessions behind a gRPC API,
//! with one durable, append-only event log per session.
//!
//! # Layout
//! - [`adapter`]: the `ProcessAdapter` trait and its implementations.
//! - [`store`]: durable storage (the `Store` trait; memory and redb).
//! - [`log`]: every session's event log: group commit, Subscribe, History.

pub mod adapter;
pub mod auth;
pub mod config;
pub mod error;
pub mod log;
pub mod manager;
pub mod normalize;
pub mod recovery;
pub mod rpc;
pub mod server;
pub mod store;
pub mod supervise;
pub mod validate;
pub use server::{ServeOptions, run, serve_on};
