//! The peers a user would otherwise pick, run on the same machine, in the
//! same run, with the same payload sizes and the same durability (every
//! acknowledged event is on disk):
//! - [`nats`]: NATS JetStream (file storage, fsync on every write), driven
//!   by a Go program with the nats.go client;
//! - [`sqlite`]: SQLite in WAL mode with `synchronous=FULL` (rusqlite,
//!   bundled), the embedded-store peer;
//! - [`postgres`]: raw PostgreSQL appends (`COPY … BINARY`, fsync on), the
//!   peer of our server on `--store-url`;
//! - [`fsync`]: a raw write + fdatasync loop, the disk's physical limit.

pub mod fsync;
pub mod nats;
pub mod postgres;
pub mod sqlite;

use serde::Serialize;

use crate::stats::Rate;

/// A replay of one stream, cold then warm.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Replay {
    /// First read, on a new connection after the OS page cache was dropped
    /// (when `cold_dropped_os_cache`; otherwise on a new connection only).
    pub cold: Rate,
    /// The same read again on the same connection.
    pub warm: Rate,
    /// Whether the OS page cache was dropped before the cold read (needs
    /// root; see [`crate::os::drop_page_cache`]).
    pub cold_dropped_os_cache: bool,
}

/// Session `i`'s id: 36 characters, the length of the UUIDs our server and
/// t3code use.
fn session_id(i: usize) -> String {
    format!("{i:08x}-0000-4000-8000-{:012x}", i)
}

/// Writes row `seq` of a session into `buf`: the seq (little-endian) first,
/// as much of it as fits, then filler.
fn stamp(buf: &mut [u8], seq: u64) {
    let n = buf.len().min(8);
    buf[..n].copy_from_slice(&seq.to_le_bytes()[..n]);
}

/// The seq a payload written by [`stamp`] carries (the bytes that fit).
fn stamped(payload: &[u8]) -> u64 {
    let mut le = [0u8; 8];
    let n = payload.len().min(8);
    le[..n].copy_from_slice(&payload[..n]);
    u64::from_le_bytes(le)
}
