//! A raw write + fdatasync loop on the same disk: the physical limit.
//!
//! TODO(helper): implement.

use std::path::Path;

use crate::stats::Rate;

/// Appends `events` records of `payload` bytes to one file, `batch`
/// records per write + `fdatasync`.
pub fn append(_dir: &Path, _batch: usize, _events: u64, _payload: usize) -> Rate {
    todo!()
}
