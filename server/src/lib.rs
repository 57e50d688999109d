//! agent-harness server: runs Claude Code CLI sessions behind a gRPC API,
//! with one durable, append-only event log per session.
//!
//! # Layout
//! - [`config`]: the clap command line (`serve`, `record`), every flag with its env var.
//! - [`server`]: one port for gRPC, grpc-web (+CORS), reflection, health and auth; `run`.
//! - [`access`]: who may reach the services: allowed browser origins (CORS) and the
//!   Host check against DNS rebinding.
//! - [`body_limit`]: request messages over `--max-request-bytes` get RESOURCE_EXHAUSTED.
//! - [`metrics`]: the recorders (fixed-bucket histograms and counters on atomics) the
//!   log fills, and the Prometheus text format.
//! - [`scrape`]: `GET /metrics` on the same port: reads the manager, the service, the
//!   log and the accept loop when scraped.
//! - [`plain`]: the plain HTTP answers on the gRPC port (`/metrics`, `/healthz`, the
//!   console), one layer shape for all.
//! - [`health`]: whether the node serves: the gRPC health service and `GET /healthz`
//!   for balancers, from one switch.
//! - [`web`]: the built-in web console at `/` on the same port: embedded files, strict
//!   security headers.
//! - [`record`]: `agent-harness record`, a cassette of the real CLI.
//! - [`listen`]: accepting connections: TCP_NODELAY, TLS with ALPN h2 and http/1.1.
//! - [`connections`]: the accept loop and each connection served by hyper: the cap on
//!   connections, header and idle timeouts, HTTP/2 pings, accept backoff.
//! - [`node`]: this node's id (`--node-id`), named by every answer's
//!   `x-agent-harness-node` header.
//! - [`deadline`]: a gRPC client's `grpc-timeout`, honoured as tonic's own server did.
//! - [`routing`]: the `x-session-id` header a balancer routes by, checked against the
//!   request's session.
//! - [`rpc`]: the `SessionService` handlers: validate, call the manager, map errors
//!   (the one `From<Error> for Status`).
//! - [`wire`]: Subscribe and History on the wire: each event's bytes, encoded once at
//!   its commit, written out as they are (a codec of our own); the other RPCs go to
//!   the generated server.
//! - [`launch`]: the launch policy: which args, env and cwd a client may give the CLI.
//! - [`start_limit`]: `--max-sessions-per-minute`, per peer address.
//! - [`validate`], [`auth`], [`error`]: request checks, bearer tokens, the one domain
//!   error enum.
//! - [`manager`]: sessions and runs: one authority per session (its slot), the run
//!   task owning a process, the stop ladder, permissions, idle timeout, and a cached
//!   derive fold per session.
//! - [`adapter`]: the `ProcessAdapter` trait; the agent router; the claude
//!   adapters (interactive, one-shot, their shared options and stream-json
//!   lines), cassettes, and the Codex adapter (`codex app-server`).
//! - [`decoder`]: the `Decoder` trait: one run's stdout lines to events, built
//!   by the adapter that spawned the process.
//! - [`normalize`]: one CLI stream-json line to zero or more events (claude's
//!   decoder).
//! - [`nesting`]: how deep the JSON inside an event may nest (deeper containers
//!   are kept as marked JSON text), so every stored event decodes again.
//! - [`partial`]: live typing: the message being written, from the CLI's
//!   `stream_event` lines to the Subscribe streams that ask (never stored).
//! - [`process`]: what is known of an agent process (signals, stdout lines, exit,
//!   errors), shared by the supervisor and the adapters.
//! - [`supervise`]: process groups, the cleaned environment, signals, reaping.
//! - [`tasks`]: every task the server spawns, owned by one set that shutdown waits for.
//! - [`log`]: every session's event log: group commit, Subscribe, History.
//! - [`store`]: durable storage (the `Store` trait; memory and redb).
//! - [`recovery`]: start-up recovery of runs a previous server left live.
//! - [`token`]: `agent-harness token`, a new bearer token file.
//! - [`doctor`]: `agent-harness doctor`, whether this machine can serve with
//!   `serve`'s flags, each check with what to fix.
//! - [`manual`]: `agent-harness completions` and `man`, from the clap definitions.
//! - [`export`]: `agent-harness export ID`, a session's log as JSON lines of whole
//!   events, read from the store.
//! - [`cli_client`]: the terminal client (`ls`, `start`, `send`, `tail`, `stop`,
//!   `approve`, `deny`, ...): a client of the API through the client crate.
//! - [`private_files`]: the data dir (0700), the store (0600), secret files
//!   refused when others can read them.
//! - [`secrets`]: the key that seals a run's env values before they reach the store.
//!
//! # Layers
//! Imports point one way, down: [`store`] ← [`log`] ← [`manager`] ← [`rpc`] ←
//! [`server`] (`a ← b`: b imports a). The adapters, [`normalize`] (above
//! [`decoder`]), [`supervise`] and
//! [`partial`] sit below the manager; [`error`] converts the lower layers' errors
//! (store, log, adapter) into the one enum the manager and the handlers use; the
//! [`metrics`] recorders sit below the log and import nothing, and [`scrape`]
//! reads them. Each subsystem owns its options and their defaults; [`config`] names
//! those defaults as flags, and [`server`] maps the flags into each subsystem's
//! options (no subsystem reads [`config`]).
//! `tests/module_graph.rs` fails on an import circle.

pub mod access;
pub mod adapter;
pub mod auth;
pub mod body_limit;
pub mod cli_client;
pub mod cluster;
pub mod config;
pub mod connections;
pub mod deadline;
pub mod decoder;
pub mod doctor;
pub mod duration;
pub mod error;
pub mod export;
pub mod health;
pub mod launch;
pub mod listen;
pub mod listing;
pub mod log;
pub mod manager;
pub mod manual;
pub mod metrics;
pub mod nesting;
pub mod node;
pub mod normalize;
pub mod partial;
pub mod plain;
pub mod private_files;
pub mod process;
pub mod record;
pub mod recovery;
pub mod routing;
pub mod rpc;
pub mod scrape;
pub mod secrets;
pub mod server;
pub mod start_limit;
pub mod store;
pub mod supervise;
pub mod tasks;
pub mod token;
pub mod validate;
pub mod web;
pub mod wire;
pub use server::{ServeOptions, run, serve_on};
