//! Support shared by every test binary of the server (each group's
//! `main.rs` includes it with `#[path = "../support/mod.rs"]`).
//!
//! - [`common`]: paths, the pinned CLI version, an in-process server, the
//!   fake Messages API wiring, event-kind helpers;
//! - [`server`]: a gRPC test server and a client with subscribe helpers;
//! - [`log`]: building events for the log and store suites;
//! - [`postgres`]: a real PostgreSQL per test binary, a fresh database per test;
//! - [`probe`]: a store that counts, fails, holds or slows its commits;
//! - [`cassette`]: the recorded scenarios and their checked replay;
//! - [`expected`]: what each committed recording yields
//!   (`cassettes/expected.json`);
//! - [`cli`]: the real CLI driven through an adapter;
//! - [`cli_grpc`]: the real CLI driven through the gRPC API;
//! - [`scripted`]: an in-process stand-in for the CLI (test code: it is not
//!   in the server crate);
//! - [`server_process`]: the real server binary as a child process, killed
//!   hard on demand, and the processes it started found by their marker.
#![allow(dead_code)]

pub mod cassette;
pub mod cli;
pub mod cli_grpc;
pub mod common;
pub mod expected;
pub mod log;
pub mod postgres;
pub mod probe;
pub mod scripted;
pub mod server;
pub mod server_process;
