//! The file under the redb store, with its holes filled before redb writes
//! into them.
//!
//! redb grows its file with `set_len`, which leaves the new part a hole: no
//! blocks behind it. Each page redb later writes there allocates a block,
//! and the commit's `fdatasync` must then write the file's block map as
//! well as the page: measured on this project's machines (ext4 on a
//! virtio disk), an `fdatasync` after writing 8 pages into a hole takes
//! 0.8–1.1 ms at the median and 6–7 ms at p90, against 0.3–0.4 ms and
//! 0.8 ms into blocks already written (`fallocate` does not help: its
//! unwritten extents are converted at the sync, which costs the same). A
//! log appends, so nearly every commit wrote into fresh holes.
//!
//! [`Filled`] wraps redb's own file backend. The first time redb writes
//! into a [`CHUNK`] of the file, it writes zeros over the holes in that
//! chunk (found with `SEEK_HOLE`/`SEEK_DATA`, so bytes already written are
//! never touched), then redb's write. A hole reads as zeros, so the file's
//! content is the same byte for byte, before and after a crash at any
//! point; the zeros reach the disk with the next commit's `fdatasync`, once
//! per chunk instead of a block map update on every commit. Everything
//! else (reads, length, sync, the lock that keeps a second server off the
//! file) is redb's backend unchanged.

use std::fs::File;
use std::ops::Bound;
use std::os::unix::fs::FileExt;
use std::sync::Mutex;

use ::redb::StorageBackend;
use ::redb::backends::FileBackend;
use nix::unistd::{Whence, lseek};

/// The span filled at once: the first write into a chunk fills all of its
/// holes. Larger chunks mean fewer fills, each one a larger write.
pub(super) const CHUNK: u64 = 1 << 20;

/// Zeros written per `pwrite` while filling.
static ZEROS: [u8; 64 * 1024] = [0; 64 * 1024];

/// redb's file backend, filling holes before writing into them.
#[derive(Debug)]
pub(super) struct Filled {
    inner: FileBackend,
    /// The same open file, for the hole search and the zeros.
    file: File,
    /// One bit per chunk: set once its holes are filled.
    filled: Mutex<Vec<u64>>,
}

impl Filled {
    pub(super) fn new(file: File) -> Result<Self, ::redb::DatabaseError> {
        let ours = file.try_clone()?;
        Ok(Self {
            inner: FileBackend::new(file)?,
            file: ours,
            filled: Mutex::new(Vec::new()),
        })
    }

    /// Fills the holes of every chunk `[offset, offset + len)` touches that
    /// is not filled yet.
    fn prepare(&self, offset: u64, len: usize) -> std::io::Result<()> {
        if len == 0 {
            return Ok(());
        }
        let first = offset / CHUNK;
        let last = (offset + len as u64 - 1) / CHUNK;
        // Held while filling: a write into a chunk being filled waits here
        // until its holes are zeros, so no zero lands on its page.
        let mut filled = self.filled.lock().unwrap_or_else(|e| e.into_inner());
        let mut end = None;
        for chunk in first..=last {
            let (word, bit) = ((chunk / 64) as usize, chunk % 64);
            if filled.get(word).is_some_and(|w| w & (1 << bit) != 0) {
                continue;
            }
            let end = match end {
                Some(end) => end,
                None => *end.insert(self.file.metadata()?.len()),
            };
            fill_holes(&self.file, chunk * CHUNK, ((chunk + 1) * CHUNK).min(end))?;
            if filled.len() <= word {
                filled.resize(word + 1, 0);
            }
            filled[word] |= 1 << bit;
        }
        Ok(())
    }
}

/// Writes zeros over every hole in `[start, end)` of `file`, and nothing
/// else. A file system without hole search reports none (Linux's default
/// `SEEK_HOLE` answers the end of the file), and one that refuses the
/// search gets nothing filled: either way the file is left as redb would
/// leave it. Only a failed write of the zeros (a full disk) is an error,
/// as redb's own write there would be.
pub(super) fn fill_holes(file: &File, start: u64, end: u64) -> std::io::Result<()> {
    let mut pos = start;
    while pos < end {
        let hole = match lseek(file, to_off(pos)?, Whence::SeekHole) {
            Ok(at) => at as u64,
            // ENXIO: at or past the end of the file, no hole inside it. Any
            // other refusal: the file system cannot say where its holes
            // are, so nothing is filled and redb writes as it would alone
            // (a store must not stop committing over an optimisation).
            Err(_) => return Ok(()),
        };
        if hole >= end {
            return Ok(());
        }
        let data = match lseek(file, to_off(hole)?, Whence::SeekData) {
            Ok(at) => at as u64,
            // Nothing but hole from here to the end of the file.
            Err(nix::errno::Errno::ENXIO) => end,
            // Where the hole ends is unknown: leave it, as above.
            Err(_) => return Ok(()),
        };
        let hole_end = data.min(end);
        let mut at = hole;
        while at < hole_end {
            let n = (hole_end - at).min(ZEROS.len() as u64) as usize;
            file.write_all_at(&ZEROS[..n], at)?;
            at += n as u64;
        }
        pos = hole_end;
    }
    Ok(())
}

fn to_off(at: u64) -> std::io::Result<i64> {
    i64::try_from(at).map_err(|_| std::io::Error::other("file offset past i64"))
}

impl StorageBackend for Filled {
    fn len(&self) -> Result<u64, std::io::Error> {
        self.inner.len()
    }

    fn read(&self, offset: u64, out: &mut [u8]) -> Result<(), std::io::Error> {
        self.inner.read(offset, out)
    }

    fn set_len(&self, len: u64) -> Result<(), std::io::Error> {
        // redb serializes resizing with writes. A chunk was filled only up
        // to the end of the file then: growing makes a new hole from the old
        // end, shrinking one from the new end (if it grows again), so every
        // chunk from the smaller of the two ends on is filled again.
        let mut filled = self.filled.lock().unwrap_or_else(|e| e.into_inner());
        let from = self.inner.len()?.min(len) / CHUNK;
        for chunk in from..(filled.len() as u64 * 64) {
            filled[(chunk / 64) as usize] &= !(1 << (chunk % 64));
        }
        self.inner.set_len(len)
    }

    fn sync_data(&self) -> Result<(), std::io::Error> {
        self.inner.sync_data()
    }

    fn write(&self, offset: u64, data: &[u8]) -> Result<(), std::io::Error> {
        self.prepare(offset, data.len())?;
        self.inner.write(offset, data)
    }

    fn close(&self) -> Result<(), std::io::Error> {
        self.inner.close()
    }

    fn try_lock_range(
        &self,
        start: Bound<u64>,
        end: Bound<u64>,
    ) -> Result<bool, ::redb::BackendError> {
        self.inner.try_lock_range(start, end)
    }

    fn try_lock_shared_range(
        &self,
        start: Bound<u64>,
        end: Bound<u64>,
    ) -> Result<bool, ::redb::BackendError> {
        self.inner.try_lock_shared_range(start, end)
    }

    fn lock_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<(), ::redb::BackendError> {
        self.inner.lock_range(start, end)
    }

    fn lock_shared_range(
        &self,
        start: Bound<u64>,
        end: Bound<u64>,
    ) -> Result<(), ::redb::BackendError> {
        self.inner.lock_shared_range(start, end)
    }

    fn unlock_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<(), ::redb::BackendError> {
        self.inner.unlock_range(start, end)
    }

    fn query_lock_range(
        &self,
        start: Bound<u64>,
        end: Bound<u64>,
    ) -> Result<bool, ::redb::BackendError> {
        self.inner.query_lock_range(start, end)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Where the holes of `file` are: `(start, end)` spans.
    fn holes(file: &File) -> Vec<(u64, u64)> {
        let len = file.metadata().unwrap().len();
        let mut out = Vec::new();
        let mut pos = 0;
        while pos < len {
            let hole = lseek(file, pos as i64, Whence::SeekHole).unwrap() as u64;
            if hole >= len {
                break;
            }
            let data = match lseek(file, hole as i64, Whence::SeekData) {
                Ok(at) => at as u64,
                Err(nix::errno::Errno::ENXIO) => len,
                Err(e) => panic!("{e}"),
            };
            out.push((hole, data));
            pos = data;
        }
        out
    }

    fn read(file: &File, at: u64, len: usize) -> Vec<u8> {
        let mut buf = vec![0; len];
        file.read_exact_at(&mut buf, at).unwrap();
        buf
    }

    fn sparse_file(dir: &std::path::Path, len: u64) -> File {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(dir.join("store.redb"))
            .unwrap();
        file.set_len(len).unwrap();
        file
    }

    /// A write into a hole fills its whole chunk first, and only that
    /// chunk; bytes already in the chunk stay as they were.
    #[test]
    fn the_first_write_into_a_chunk_fills_its_holes_and_keeps_its_data() {
        let dir = tempfile::tempdir().unwrap();
        let file = sparse_file(dir.path(), 4 * CHUNK);
        let kept = vec![7u8; 4096];
        file.write_all_at(&kept, CHUNK + 8192).unwrap();
        let check = file.try_clone().unwrap();
        if holes(&check).is_empty() {
            // A file system that reports no holes: nothing to fill, nothing to test.
            panic!("the test directory's file system keeps no holes; run it on ext4, xfs or tmpfs");
        }
        let backend = Filled::new(file).unwrap();

        backend.write(CHUNK + 3 * 4096, &[9u8; 4096]).unwrap();

        let spans = holes(&check);
        assert!(
            spans.iter().all(|&(s, e)| e <= CHUNK || s >= 2 * CHUNK),
            "chunk 1 has holes left: {spans:?}"
        );
        assert!(
            spans.iter().any(|&(s, _)| s < CHUNK),
            "chunk 0 untouched: {spans:?}"
        );
        assert!(
            spans.iter().any(|&(_, e)| e > 2 * CHUNK),
            "chunk 2 on untouched: {spans:?}"
        );
        assert_eq!(read(&check, CHUNK + 8192, 4096), kept, "data already there");
        assert_eq!(read(&check, CHUNK + 3 * 4096, 4096), vec![9u8; 4096]);
        assert_eq!(read(&check, CHUNK, 8192), vec![0u8; 8192]);
        assert_eq!(
            check.metadata().unwrap().len(),
            4 * CHUNK,
            "the length is redb's"
        );
    }

    /// A chunk filled up to the old end of the file has a hole after it
    /// once the file grows: the next write there fills it.
    #[test]
    fn growing_past_a_filled_chunk_fills_it_again() {
        let dir = tempfile::tempdir().unwrap();
        let file = sparse_file(dir.path(), CHUNK / 2);
        let check = file.try_clone().unwrap();
        let backend = Filled::new(file).unwrap();
        backend.write(0, &[1u8; 4096]).unwrap();
        assert!(holes(&check).is_empty(), "{:?}", holes(&check));

        backend.set_len(2 * CHUNK).unwrap();
        assert_eq!(holes(&check), vec![(CHUNK / 2, 2 * CHUNK)]);
        backend.write(4096, &[2u8; 4096]).unwrap();
        assert_eq!(holes(&check), vec![(CHUNK, 2 * CHUNK)]);
        assert_eq!(read(&check, 0, 4096), vec![1u8; 4096]);
        assert_eq!(read(&check, 4096, 4096), vec![2u8; 4096]);
    }

    /// The server's store file: commits leave no hole in the chunks they
    /// wrote, and it reopens with its events.
    #[test]
    fn a_store_on_it_commits_reads_and_reopens() {
        use crate::store::Store;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log.redb");
        {
            let store = super::super::RedbStore::open(&path).unwrap();
            let events: Vec<_> = (1..=2_000)
                .map(|seq| agent_harness_protocol::pb::Event {
                    session_id: "s".into(),
                    seq,
                    cli_line: format!("{{\"n\":{seq}}}").repeat(300),
                    ..Default::default()
                })
                .collect();
            for batch in events.chunks(100) {
                store
                    .commit(crate::store::Commit {
                        events: batch,
                        ..Default::default()
                    })
                    .unwrap();
            }
        }
        let file = File::open(&path).unwrap();
        let len = file.metadata().unwrap().len();
        assert!(len > 4 * CHUNK, "the file grew past a few chunks: {len}");
        // Every hole left is a chunk redb grew the file into and never wrote.
        for (start, end) in holes(&file) {
            assert!(
                start % CHUNK == 0 && (end % CHUNK == 0 || end == len),
                "a hole inside a written chunk: {start}..{end} of {len}"
            );
        }
        let store = super::super::RedbStore::open(&path).unwrap();
        let events = store.read_range("s", 0, 5_000).unwrap();
        assert_eq!(events.len(), 2_000);
        assert_eq!(events[1_999].seq, 2_000);
        assert_eq!(events[1_999].cli_line, "{\"n\":2000}".repeat(300));
    }
}
