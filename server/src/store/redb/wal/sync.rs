//! The log's syncs, on a thread of their own, so a commit fills its redb
//! transaction while its record goes to the disk.
//!
//! A commit writes its record, asks this thread to sync the log, fills the
//! transaction, then waits for the sync before committing the transaction
//! (see `Wal::write`): nothing becomes visible before it is durable, as
//! when the commit synced in turn, and the sync and the filling, which
//! take about as long as each other, overlap. One sync at a time: a commit
//! waits for its own before the next is written.

use std::fs::File;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;

/// The thread syncing the log, stopped (and waited for) on drop.
#[derive(Debug)]
pub(super) struct Syncer {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

#[derive(Debug)]
struct Shared {
    state: Mutex<State>,
    /// A sync was asked for, or the thread is to stop.
    asked: Condvar,
    /// A sync ended.
    ended: Condvar,
    /// Syncs done.
    done: AtomicU64,
}

#[derive(Debug)]
enum State {
    Idle,
    Asked,
    Ended(std::io::Result<()>),
    Stop,
}

/// A sync asked for and not yet waited on: [`Syncer::wait`] takes it, so
/// a commit cannot go on without hearing how its sync ended.
#[must_use = "a sync asked for is waited on before the commit goes on"]
#[derive(Debug)]
pub(super) struct Pending(());

impl Syncer {
    /// Starts the thread, syncing `file` when asked.
    pub(super) fn start(file: &Arc<File>) -> std::io::Result<Self> {
        let file = file.clone();
        let shared = Arc::new(Shared {
            state: Mutex::new(State::Idle),
            asked: Condvar::new(),
            ended: Condvar::new(),
            done: AtomicU64::new(0),
        });
        let run = shared.clone();
        let thread = std::thread::Builder::new()
            .name("wal-sync".into())
            .spawn(move || run.serve(&file))?;
        Ok(Self {
            shared,
            thread: Some(thread),
        })
    }

    /// Asks for a sync of everything written to the file so far.
    pub(super) fn ask(&self) -> Pending {
        let mut state = self.shared.lock();
        debug_assert!(matches!(*state, State::Idle), "one sync at a time");
        *state = State::Asked;
        drop(state);
        self.shared.asked.notify_one();
        Pending(())
    }

    /// How many syncs the thread has done.
    #[cfg(test)]
    pub(super) fn done(&self) -> u64 {
        self.shared.done.load(Ordering::Relaxed)
    }

    /// Waits for the sync asked for and returns how it ended.
    pub(super) fn wait(&self, _pending: Pending) -> std::io::Result<()> {
        let mut state = self.shared.lock();
        loop {
            match std::mem::replace(&mut *state, State::Idle) {
                State::Ended(result) => return result,
                other => {
                    *state = other;
                    state = self
                        .shared
                        .ended
                        .wait(state)
                        .unwrap_or_else(PoisonError::into_inner);
                }
            }
        }
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn serve(&self, file: &File) {
        let mut state = self.lock();
        loop {
            match *state {
                State::Stop => return,
                State::Asked => {
                    drop(state);
                    let result = file.sync_data();
                    self.done.fetch_add(1, Ordering::Relaxed);
                    state = self.lock();
                    if matches!(*state, State::Stop) {
                        return;
                    }
                    *state = State::Ended(result);
                    self.ended.notify_one();
                }
                State::Idle | State::Ended(_) => {
                    state = self
                        .asked
                        .wait(state)
                        .unwrap_or_else(PoisonError::into_inner);
                }
            }
        }
    }
}

impl Drop for Syncer {
    fn drop(&mut self) {
        *self.shared.lock() = State::Stop;
        self.shared.asked.notify_one();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::FileExt;

    use super::*;

    #[test]
    fn each_sync_asked_for_is_answered_in_turn() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log");
        let file = Arc::new(
            std::fs::OpenOptions::new()
                .create(true)
                .truncate(true)
                .read(true)
                .write(true)
                .open(&path)
                .unwrap(),
        );
        let syncer = Syncer::start(&file).unwrap();
        for i in 0..100u64 {
            file.write_all_at(&i.to_le_bytes(), i * 8).unwrap();
            let pending = syncer.ask();
            syncer.wait(pending).unwrap();
        }
        assert_eq!(std::fs::read(&path).unwrap().len(), 800);
        assert_eq!(syncer.done(), 100);
        drop(syncer);
        // The thread has ended and let its descriptor go: only ours is left.
        assert_eq!(Arc::strong_count(&file), 1);
    }

    #[test]
    fn a_failed_sync_is_the_waiters_error() {
        // A descriptor that cannot be synced: a pipe's read end is refused
        // with EINVAL.
        let (read, _write) = nix::unistd::pipe().unwrap();
        let file = Arc::new(File::from(read));
        let syncer = Syncer::start(&file).unwrap();
        let err = syncer.wait(syncer.ask()).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(nix::libc::EINVAL), "{err}");
        // And the next sync is asked for and answered as usual.
        assert!(syncer.wait(syncer.ask()).is_err());
    }
}
