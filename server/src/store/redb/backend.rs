//! The store file's backend: redb's own [`FileBackend`], with the pages it
//! writes synced early, by a thread of their own.
//!
//! **Why.** Between checkpoints redb commits without syncing, because the
//! write-ahead log makes each commit durable (see [`super::wal`]). The
//! pages it writes then stay dirty in the kernel's page cache, and the
//! checkpoint's `fdatasync` had to write all of them (about 40 MB for a
//! 32 MiB generation) while no commit could go on: 16–20 ms, 14 times in a
//! 600,000-line row at one session. Here, once [`SYNC_BYTES`] have been
//! written since the last sync, a thread syncs the file on a handle of its
//! own. The checkpoint's sync then finds most pages on disk (about 3 ms).
//! The pages redb writes between checkpoints are those its write buffer
//! cannot hold: half of its page cache (`--store-cache-bytes`), which is
//! why that defaults to a size well under a generation.
//!
//! **Crash safety is unchanged.** Syncing early only does sooner what the
//! kernel's own writeback may do at any time: what is durable, and in
//! which order, is still decided by the syncs of the log and of the
//! checkpoint. redb never writes over the pages its last durable commit
//! uses, so its file after a crash still opens at that commit.

use std::fs::File;
use std::ops::Bound;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use ::redb::backends::FileBackend;
use ::redb::{BackendError, StorageBackend};

/// What redb's backend methods fail with.
type IoResult<T> = Result<T, std::io::Error>;

/// The file is synced once this many bytes were written since the last sync.
pub(super) const SYNC_BYTES: u64 = 4 << 20;

/// [`FileBackend`] that syncs early (see the module docs).
#[derive(Debug)]
pub(super) struct EarlySync {
    inner: FileBackend,
    /// Bytes written since the file was last synced.
    unsynced: AtomicU64,
    syncer: Arc<Syncer>,
    /// The sync thread, joined when the backend is dropped: none outlives
    /// its store.
    thread: Option<std::thread::JoinHandle<()>>,
}

/// What the sync thread waits on.
#[derive(Debug, Default)]
struct Syncer {
    state: Mutex<State>,
    /// Wakes the thread when a sync is asked for or the backend closes,
    /// and whoever waits for a sync to be done (the tests).
    wake: Condvar,
}

#[derive(Debug, Default)]
struct State {
    /// A sync is asked for.
    asked: bool,
    /// The backend closed: the thread ends.
    closed: bool,
    /// Syncs done.
    done: u64,
}

impl Syncer {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn wait<'a>(&self, state: MutexGuard<'a, State>) -> MutexGuard<'a, State> {
        self.wake.wait(state).unwrap_or_else(|e| e.into_inner())
    }

    fn ask(&self) {
        self.lock().asked = true;
        self.wake.notify_all();
    }

    fn close(&self) {
        self.lock().closed = true;
        self.wake.notify_all();
    }
}

impl EarlySync {
    /// `inner`, the backend of the file at `path`, and its sync thread (on
    /// a read-only handle of its own, so it shares none of the file's locks).
    pub(super) fn new(inner: FileBackend, path: &Path) -> IoResult<Self> {
        let handle = File::open(path)?;
        let syncer = Arc::new(Syncer::default());
        let theirs = Arc::clone(&syncer);
        let thread = std::thread::Builder::new()
            .name("store-sync".into())
            .spawn(move || sync_when_asked(&handle, &theirs))?;
        Ok(Self {
            inner,
            unsynced: AtomicU64::new(0),
            syncer,
            thread: Some(thread),
        })
    }
}

impl Drop for EarlySync {
    fn drop(&mut self) {
        self.syncer.close();
        if let Some(thread) = self.thread.take() {
            // At most one sync under way to wait for.
            let _ = thread.join();
        }
    }
}

/// The sync thread: syncs `file` each time it is asked, until closed. A
/// failed sync is only logged: nothing waits on it, and the checkpoint's
/// own sync writes whatever is still dirty (and reports its failure).
fn sync_when_asked(file: &File, syncer: &Syncer) {
    let mut state = syncer.lock();
    while !state.closed {
        if !state.asked {
            state = syncer.wait(state);
            continue;
        }
        state.asked = false;
        drop(state);
        if let Err(e) = file.sync_data() {
            tracing::debug!(error = %e, "an early sync of the store file failed");
        }
        state = syncer.lock();
        state.done += 1;
        syncer.wake.notify_all();
    }
}

impl StorageBackend for EarlySync {
    fn len(&self) -> IoResult<u64> {
        self.inner.len()
    }

    fn read(&self, offset: u64, out: &mut [u8]) -> IoResult<()> {
        self.inner.read(offset, out)
    }

    fn set_len(&self, len: u64) -> IoResult<()> {
        self.inner.set_len(len)
    }

    fn sync_data(&self) -> IoResult<()> {
        self.unsynced.store(0, Ordering::Relaxed);
        self.inner.sync_data()
    }

    fn write(&self, offset: u64, data: &[u8]) -> IoResult<()> {
        self.inner.write(offset, data)?;
        let len = data.len() as u64;
        if self.unsynced.fetch_add(len, Ordering::Relaxed) + len >= SYNC_BYTES {
            self.unsynced.store(0, Ordering::Relaxed);
            self.syncer.ask();
        }
        Ok(())
    }

    fn close(&self) -> IoResult<()> {
        self.syncer.close();
        self.inner.close()
    }

    fn try_lock_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<bool, BackendError> {
        self.inner.try_lock_range(start, end)
    }

    fn try_lock_shared_range(
        &self,
        start: Bound<u64>,
        end: Bound<u64>,
    ) -> Result<bool, BackendError> {
        self.inner.try_lock_shared_range(start, end)
    }

    fn lock_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<(), BackendError> {
        self.inner.lock_range(start, end)
    }

    fn lock_shared_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<(), BackendError> {
        self.inner.lock_shared_range(start, end)
    }

    fn unlock_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<(), BackendError> {
        self.inner.unlock_range(start, end)
    }

    fn query_lock_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<bool, BackendError> {
        self.inner.query_lock_range(start, end)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn open(dir: &Path) -> EarlySync {
        let path = dir.join("store");
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .unwrap();
        EarlySync::new(FileBackend::new(file).unwrap(), &path).unwrap()
    }

    /// Waits until the thread has done `n` syncs.
    fn synced(backend: &EarlySync, n: u64) {
        let mut state = backend.syncer.lock();
        while state.done < n {
            state = backend.syncer.wait(state);
        }
    }

    #[test]
    fn the_file_is_synced_each_time_enough_was_written_since_the_last_sync() {
        let dir = tempfile::tempdir().unwrap();
        let backend = open(dir.path());
        let page = vec![7u8; 4096];
        let pages = SYNC_BYTES / 4096;
        // One page short of a sync: none asked for.
        for n in 0..pages - 1 {
            backend.write(n * 4096, &page).unwrap();
        }
        assert!(!backend.syncer.lock().asked);
        assert_eq!(backend.syncer.lock().done, 0);
        backend.write((pages - 1) * 4096, &page).unwrap();
        synced(&backend, 1);
        // redb's own sync starts the count again.
        for n in 0..pages - 1 {
            backend.write(n * 4096, &page).unwrap();
        }
        backend.sync_data().unwrap();
        backend.write(0, &page).unwrap();
        assert!(!backend.syncer.lock().asked);
        for n in 0..pages {
            backend.write(n * 4096, &page).unwrap();
        }
        synced(&backend, 2);
        let mut read = vec![0; 4096];
        backend.read(SYNC_BYTES - 4096, &mut read).unwrap();
        assert_eq!(read, page);
    }

    #[test]
    fn closing_ends_the_thread_and_later_writes_ask_for_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let mut backend = open(dir.path());
        backend.close().unwrap();
        let thread = backend.thread.take().unwrap();
        thread.join().unwrap();
        // The thread is gone: a sync asked for now is never done.
        backend.write(0, &vec![1u8; SYNC_BYTES as usize]).unwrap();
        assert!(backend.syncer.lock().asked);
        assert_eq!(backend.syncer.lock().done, 0);
    }
}
