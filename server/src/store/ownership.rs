//! Which node may append to a session, when several nodes share a store.
//!
//! A node joins the store with a lease judged by the database's clock and a
//! new epoch ([`super::Store::join_node`]); it claims a session before
//! writing to it ([`super::Store::claim_session`]), which succeeds when the
//! session has no owner or its owner's lease has expired. From its join on,
//! every commit of the store is fenced: it lands only while the node's
//! lease is live under the epoch it joined with, and only for sessions it
//! owns under that epoch whose head is still the one it last committed;
//! otherwise the store answers [`super::StoreError::Fenced`] naming the
//! sessions refused, and nothing of them is written.
//!
//! A store only this process writes (redb, the memory store) never joins:
//! its trait defaults own every session and fence nothing.

/// The outcome of [`super::Store::claim_session`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Claim {
    /// This node owned the session already (or the store is not shared).
    Owned,
    /// This node owns the session from now on; `previous` is the node
    /// whose lease had expired, `None` when the session had no owner.
    Claimed {
        /// The node that owned it before.
        previous: Option<String>,
    },
    /// Another node owns the session and its lease is live.
    Elsewhere {
        /// That node's id.
        node_id: String,
        /// Where it is reached ("" when it gave none).
        address: String,
    },
}

/// A node's place in a shared store after [`super::Store::join_node`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Joined {
    /// The epoch this join took: one more than the node's previous one.
    pub epoch: u64,
}
