//! agent-harness client: a reconnecting session client, over the protocol
//! crate.
//!
//! # Layout
//! - [`session`]: a reconnecting subscription that keeps the derived state of
//!   one session as a stream of snapshots (the Rust side of `useSession`).
//! - [`pb`], [`proto`], [`derive`], [`partial`], [`vocab`]: the protocol
//!   crate's modules, re-exported so a client needs one dependency.

pub mod session;

#[cfg(feature = "server")]
pub use agent_harness_protocol::codec;
pub use agent_harness_protocol::{derive, live, partial, pb, pbjson_types, proto, vocab};
