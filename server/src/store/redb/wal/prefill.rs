//! Zeros written ahead of a new log, off the commit path.
//!
//! A record is synced into blocks written before it (see `Wal::append`), so
//! that its `fdatasync` allocates nothing. A new log has no such blocks:
//! grown on the commit path, a megabyte of zeros at a time, every megabyte
//! of records cost a commit that wrote the zeros and a sync that allocated
//! them, until the log first reached a checkpoint and was reused from its
//! start. On a new store that was about a sixth of the time of its first
//! hundred thousand events (BENCHMARKS.md, "The write-ahead log's first
//! generation"). So when the log opens shorter than a generation, a thread
//! writes and syncs the zeros instead, a megabyte at a time, up to that
//! length, while the store serves. A record that reaches past what the
//! thread has done waits for it (the thread writes far faster than records
//! come); past the thread's end the log grows on the commit path as
//! before. The thread never writes below where it has got to, and a record
//! is never written above it, so the two never write the same bytes. It
//! writes through the log's own descriptor, and not at all when the
//! filesystem has less than four times the zeros free: a nearly full disk
//! is not filled with them (the log then grows on the commit path, and the
//! commit that finds no room fails, as it did).

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::thread::JoinHandle;

use super::CHUNK;

/// The zeros are written only when the filesystem has this many times
/// their size free.
pub(super) const FREE_FACTOR: u64 = 4;

/// The thread writing zeros ahead, stopped (and waited for) on drop.
#[derive(Debug)]
pub(super) struct Prefill {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

#[derive(Debug)]
struct Shared {
    progress: Mutex<Progress>,
    moved: Condvar,
    stop: AtomicBool,
}

#[derive(Debug, Clone, Copy)]
struct Progress {
    /// Every byte below this is written and synced.
    done: u64,
    /// The thread has ended (done, stopped, or failed).
    ended: bool,
}

impl Prefill {
    /// Starts writing zeros into `file` from `from` up to `to`; `None` when
    /// there is nothing to write, or when the filesystem has less than
    /// [`FREE_FACTOR`] times that free: a nearly full disk is not filled
    /// with zeros (there the log grows on the commit path, as it did, and a
    /// full disk fails the commit that needed the room).
    pub(super) fn start(file: &Arc<File>, from: u64, to: u64) -> std::io::Result<Option<Self>> {
        if from >= to {
            return Ok(None);
        }
        let Ok(stat) = nix::sys::statvfs::fstatvfs(file.as_ref()) else {
            return Ok(None);
        };
        let free = stat.blocks_available().saturating_mul(stat.fragment_size());
        if free < (to - from).saturating_mul(FREE_FACTOR) {
            return Ok(None);
        }
        let file = file.clone();
        let shared = Arc::new(Shared {
            progress: Mutex::new(Progress {
                done: from,
                ended: false,
            }),
            moved: Condvar::new(),
            stop: AtomicBool::new(false),
        });
        let run = shared.clone();
        let thread = std::thread::Builder::new()
            .name("wal-prefill".into())
            .spawn(move || run.fill(&file, from, to))?;
        Ok(Some(Self {
            shared,
            thread: Some(thread),
        }))
    }

    /// Waits until the zeros reach `len` or the thread ends; returns how
    /// far they reach (below `len` only once the thread has ended).
    pub(super) fn wait_for(&self, len: u64) -> u64 {
        let mut p = self.shared.lock();
        while p.done < len && !p.ended {
            p = self
                .shared
                .moved
                .wait(p)
                .unwrap_or_else(PoisonError::into_inner);
        }
        p.done
    }
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, Progress> {
        self.progress.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn fill(&self, file: &File, from: u64, to: u64) {
        let zeros = vec![0u8; CHUNK as usize];
        let mut at = from;
        while at < to && !self.stop.load(Ordering::Relaxed) {
            let n = (to - at).min(CHUNK);
            if let Err(e) = file
                .write_all_at(&zeros[..n as usize], at)
                .and_then(|()| file.sync_data())
            {
                // The commit path grows the log from here, as it would
                // without this thread.
                tracing::warn!(error = %e, "writing zeros ahead of the write-ahead log failed");
                break;
            }
            at += n;
            self.lock().done = at;
            self.moved.notify_all();
        }
        self.lock().ended = true;
        self.moved.notify_all();
    }
}

impl Drop for Prefill {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fills_the_range_with_zeros_and_says_how_far() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log");
        std::fs::write(&path, [7u8; 100]).unwrap();
        let file = Arc::new(
            std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .open(&path)
                .unwrap(),
        );
        let to = 2 * CHUNK + 5;
        let p = Prefill::start(&file, 100, to).unwrap().expect("a range");
        assert!(p.wait_for(CHUNK) >= CHUNK);
        assert_eq!(p.wait_for(u64::MAX), to, "ends at its end");
        drop(p);
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(bytes.len() as u64, to);
        assert!(
            bytes[..100].iter().all(|&b| b == 7),
            "nothing below is touched"
        );
        assert!(bytes[100..].iter().all(|&b| b == 0));
        assert!(Prefill::start(&file, to, to).unwrap().is_none());
    }

    #[test]
    fn not_on_a_filesystem_without_four_times_the_room() {
        let dir = tempfile::tempdir().unwrap();
        let file = Arc::new(std::fs::File::create(dir.path().join("log")).unwrap());
        // More than any disk here has free, a quarter of it included.
        assert!(Prefill::start(&file, 0, u64::MAX / 8).unwrap().is_none());
        assert_eq!(file.metadata().unwrap().len(), 0, "nothing written");
    }

    #[test]
    fn a_drop_stops_it_and_nothing_is_written_after() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log");
        let file = Arc::new(std::fs::File::create(&path).unwrap());
        let p = Prefill::start(&file, 0, 64 * CHUNK).unwrap().unwrap();
        drop(p);
        let len = std::fs::metadata(&path).unwrap().len();
        assert!(len <= 64 * CHUNK && len % CHUNK == 0, "{len}");
        let again = std::fs::metadata(&path).unwrap().len();
        assert_eq!(len, again, "the thread is gone");
    }
}
