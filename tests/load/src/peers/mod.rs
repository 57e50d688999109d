//! The peers a user would otherwise pick, run on the same machine, in the
//! same run, with the same payload sizes and the same durability (every
//! acknowledged event is on disk):
//! - [`nats`]: NATS JetStream (file storage, fsync on every write), driven
//!   by a Go program with the nats.go client;
//! - [`sqlite`]: SQLite in WAL mode with `synchronous=FULL` (rusqlite,
//!   bundled), the embedded-store peer;
//! - [`fsync`]: a raw write + fdatasync loop, the disk's physical limit.

pub mod fsync;
pub mod nats;
pub mod sqlite;
