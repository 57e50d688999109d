//! SQLite, WAL mode, `synchronous=FULL`: the embedded-store peer.
//!
//! TODO(helper): implement.

use std::path::Path;

use crate::stats::Rate;

/// Appends `events` rows of `payload` bytes, spread over `sessions`
/// sessions (each row keyed by session and seq), `batch` rows per
/// transaction: the same batch shape our group commit produced.
pub fn append(_dir: &Path, _sessions: usize, _batch: usize, _events: u64, _payload: usize) -> Rate {
    todo!()
}

/// Replay of one session's `events` rows in seq order, decoded: cold (a
/// new connection after the OS page cache was dropped where allowed) and
/// warm (again, on the same connection).
pub fn replay(_dir: &Path, _events: u64, _payload: usize) -> (Rate, Rate) {
    todo!()
}
