//! The event log and its store: append, subscribe, history, handover, the store contract.
//!
//! One test binary per concern (build and link once); each module below
//! was its own binary before.

#[path = "../support/mod.rs"]
mod support;

mod append;
mod checked;
mod delete;
mod fencing;
mod handover;
mod history;
mod index;
mod memory;
mod postgres_store;
mod store_contract;
mod subscribe;
mod tail;
mod typing;
