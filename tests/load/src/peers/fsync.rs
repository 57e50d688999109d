//! A raw write + fdatasync loop on the same disk: the physical limit.
//!
//! One file; each batch of records is one `write` then one `fdatasync`
//! (`File::sync_data`), so every record is on disk when its batch's call
//! returns, as with our log's group commit. A record is its length (`u32`,
//! little-endian) then its payload. Nothing else is done per event: this is
//! what the disk gives durable appends of that batch shape.

use std::fs::{File, OpenOptions};
use std::io::{Seek, SeekFrom, Write};
use std::path::Path;
use std::time::Instant;

use crate::stats::Rate;

/// The log file, in the `dir` the caller gives.
const LOG_FILE: &str = "fsync.log";

/// Length prefix of a record.
const LEN: usize = size_of::<u32>();

/// How the file's blocks come to exist.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// The file grows with each batch: every `fdatasync` also commits the
    /// new size (and on ext4 the new blocks) through the journal. What an
    /// appending log does.
    Grow,
    /// The whole file is written (zeros) and synced first, not timed; the
    /// batches then overwrite it in place, so an `fdatasync` has only data
    /// to flush. What a reused, preallocated log (SQLite's WAL after a
    /// checkpoint) does: the lower bound of a durable write.
    Prewritten,
}

/// Appends `events` records of `payload` bytes to one file, `batch`
/// records per write + `fdatasync`.
///
/// The file grows ([`Layout::Grow`]). `dir` must not hold the file
/// already. Timed: from the first `write` to the last `fdatasync`
/// returning (creating the file and syncing its directory are not).
pub fn append(dir: &Path, batch: usize, events: u64, payload: usize) -> Rate {
    append_with(dir, Layout::Grow, batch, events, payload)
}

/// [`append`] on the given file layout.
pub fn append_with(dir: &Path, layout: Layout, batch: usize, events: u64, payload: usize) -> Rate {
    assert!(batch > 0, "fsync append: empty batches");
    let record = u32::try_from(payload).expect("fsync append: payload over 4 GiB");
    let path = dir.join(LOG_FILE);
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&path)
        .unwrap_or_else(|e| panic!("fsync append: create {}: {e}", path.display()));
    if layout == Layout::Prewritten {
        prewrite(&mut file, events * (LEN + payload) as u64);
    }
    // The file's name is durable before the first record is.
    file.sync_all().expect("fsync append: fsync file");
    File::open(dir)
        .and_then(|d| d.sync_all())
        .expect("fsync append: fsync directory");

    let mut buf = Vec::with_capacity(batch.min(events as usize) * (LEN + payload));
    let mut written = 0u64;
    let start = Instant::now();
    while written < events {
        let n = (batch as u64).min(events - written);
        buf.clear();
        for i in written..written + n {
            push_record(&mut buf, record, i);
        }
        file.write_all(&buf).expect("fsync append: write");
        file.sync_data().expect("fsync append: fdatasync");
        written += n;
    }
    let secs = start.elapsed().as_secs_f64();
    Rate { events, secs }
}

/// Appends record `seq`: its length, then `len` payload bytes whose first
/// ones carry `seq` (little-endian, as much as fits), the rest filler.
fn push_record(buf: &mut Vec<u8>, len: u32, seq: u64) {
    buf.extend_from_slice(&len.to_le_bytes());
    let len = len as usize;
    let stamp = len.min(8);
    buf.extend_from_slice(&seq.to_le_bytes()[..stamp]);
    buf.resize(buf.len() + len - stamp, b'x');
}

/// Writes `bytes` zeros, syncs them, and goes back to the start.
fn prewrite(file: &mut File, bytes: u64) {
    let zeros = vec![0u8; 1 << 20];
    let mut left = bytes;
    while left > 0 {
        let n = left.min(zeros.len() as u64) as usize;
        file.write_all(&zeros[..n]).expect("fsync prewrite: write");
        left -= n as u64;
    }
    file.sync_all().expect("fsync prewrite: fsync");
    file.seek(SeekFrom::Start(0)).expect("fsync prewrite: seek");
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Parses the file back: checks every record's length and seq in order
    /// and that nothing follows the last; returns the records read.
    fn verify(dir: &Path, payload: usize) -> u64 {
        let bytes = std::fs::read(dir.join(LOG_FILE)).unwrap();
        let mut at = 0;
        let mut n = 0u64;
        while at < bytes.len() {
            let len = u32::from_le_bytes(bytes[at..at + LEN].try_into().unwrap()) as usize;
            assert_eq!(len, payload, "record {n} at byte {at}: length {len}");
            at += LEN;
            let body = &bytes[at..at + len];
            let stamp = len.min(8);
            assert_eq!(body[..stamp], n.to_le_bytes()[..stamp], "record {n}: seq");
            assert!(body[stamp..].iter().all(|&b| b == b'x'), "record {n}: body");
            at += len;
            n += 1;
        }
        n
    }

    #[test]
    fn every_record_of_every_batch_is_written_in_order() {
        // 103 records in batches of 10: the last, short batch must be written too.
        for layout in [Layout::Grow, Layout::Prewritten] {
            for batch in [1, 10, 103, 1000] {
                let dir = tempfile::tempdir().unwrap();
                let rate = append_with(dir.path(), layout, batch, 103, 100);
                assert_eq!(rate.events, 103);
                assert_eq!(verify(dir.path(), 100), 103, "{layout:?} batch={batch}");
            }
        }
    }

    #[test]
    fn append_grows_a_file_of_exactly_its_records() {
        let dir = tempfile::tempdir().unwrap();
        append(dir.path(), 7, 50, 900);
        let len = std::fs::metadata(dir.path().join(LOG_FILE)).unwrap().len();
        assert_eq!(len, 50 * (4 + 900));
        assert_eq!(verify(dir.path(), 900), 50);
    }

    #[test]
    fn tiny_payloads_still_carry_their_seq() {
        let dir = tempfile::tempdir().unwrap();
        append(dir.path(), 4, 9, 3);
        assert_eq!(verify(dir.path(), 3), 9);
    }

    #[test]
    #[should_panic(expected = "record 5: seq")]
    fn verify_catches_a_lost_record() {
        let dir = tempfile::tempdir().unwrap();
        append(dir.path(), 3, 10, 16);
        let path = dir.path().join(LOG_FILE);
        let mut bytes = std::fs::read(&path).unwrap();
        bytes.drain(5 * 20..6 * 20);
        std::fs::write(&path, bytes).unwrap();
        verify(dir.path(), 16);
    }

    #[test]
    #[should_panic(expected = "exists")]
    fn append_refuses_a_used_directory() {
        let dir = tempfile::tempdir().unwrap();
        append(dir.path(), 1, 1, 10);
        append(dir.path(), 1, 1, 10);
    }
}
