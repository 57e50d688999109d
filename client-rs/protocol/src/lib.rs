//! agent-harness protocol: what the server and every client share.
//!
//! # Layout
//! - [`proto`]: the generated protobuf types (with proto3-JSON serde) and the
//!   tonic client for `agentharness.v1.SessionService` (server traits behind
//!   the `server` feature).
//! - [`derive`]: pure functions over a slice of events — status, process
//!   alive, usage, activity, background tasks, permissions and the classify
//!   helpers. The only implementation in the project; the server and the
//!   session client call it, the conformance vectors check it.
//! - [`partial`]: live typing, the partial assistant message folded from
//!   a stream's `delta`s and the events that supersede them.
//! - [`live`]: the activity this instant, the derived one refined by the
//!   partial message ("Writing" while answer text streams).
//! - `codec` (feature `server`): the generated server's codec, which answers
//!   a request that cannot be decoded INVALID_ARGUMENT.
//! - [`vocab`]: the values of the wire's string fields clients match on
//!   (`run_error.kind`, `run_start.trigger`, stop and end sources,
//!   `permission_resolved.by`).

pub mod proto {
    //! Generated protobuf types for `agentharness.v1`.
    #![allow(missing_docs, clippy::all)]
    /// `agentharness.v1` messages, enums, client and (feature `server`) server.
    pub mod v1 {
        include!(concat!(env!("OUT_DIR"), "/agentharness.v1.rs"));
        include!(concat!(env!("OUT_DIR"), "/agentharness.v1.serde.rs"));
        #[cfg(feature = "server")]
        include!(concat!(env!("OUT_DIR"), "/server/agentharness.v1.rs"));
    }
    /// The encoded `FileDescriptorSet` of the API and its imports, for
    /// server reflection.
    pub const FILE_DESCRIPTOR_SET: &[u8] =
        include_bytes!(concat!(env!("OUT_DIR"), "/agentharness_descriptor.bin"));
}

#[cfg(feature = "server")]
pub mod codec;
pub mod derive;
pub mod live;
pub mod partial;
pub mod vocab;
pub use pbjson_types;
pub use proto::v1 as pb;
