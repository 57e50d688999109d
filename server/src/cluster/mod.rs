//! What a node does to keep its place among the nodes sharing a store
//! ([`crate::node::Node`]): renew its lease, fencing itself when it cannot
//! ([`lease`]), and take over the sessions of dead nodes ([`reaper`]).
//! Tasks above the manager, which they drive; the node's state sits below
//! it, in [`crate::node`].

pub mod lease;
pub mod reaper;
