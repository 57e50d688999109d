//! The tasks a server starts, owned in one place: every `spawn` of the
//! server goes through a [`Tasks`] handle, so shutdown can wait for all of
//! them (a reaper's kill, a marker sweep, a cassette's last write) before
//! the log closes and the runtime drops, instead of cutting them off.
//!
//! Each spawn site names its task (for the log and the wait at shutdown)
//! and states its cancel policy in a comment: either it runs to completion
//! (a reaper must reap) or it ends on a token or a closed channel that
//! shutdown triggers. Nothing here cancels a task: [`Tasks::wait`] only
//! closes the tracker and waits, and names what is left when its bound
//! runs out.
//!
//! Imports nothing of the crate: every layer may spawn through it.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio_util::task::TaskTracker;

/// A clonable handle on one set of tasks. [`Tasks::default`] is a set of
/// its own, for callers outside a server (tests, `record`) that never wait.
#[derive(Clone, Default)]
pub struct Tasks {
    tracker: TaskTracker,
    /// How many tasks of each name are running, for the shutdown log.
    live: Arc<Mutex<BTreeMap<&'static str, usize>>>,
}

impl std::fmt::Debug for Tasks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tasks")
            .field("running", &self.tracker.len())
            .finish()
    }
}

impl Tasks {
    /// A new, empty set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Spawns `task` on the runtime as one of this set, under `name`.
    pub fn spawn<F>(&self, name: &'static str, task: F) -> tokio::task::JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        let running = Running::enter(&self.live, name);
        self.tracker.spawn(async move {
            let _running = running;
            task.await
        })
    }

    /// How many tasks of this set are running.
    pub fn len(&self) -> usize {
        self.tracker.len()
    }

    /// True when no task of this set is running.
    pub fn is_empty(&self) -> bool {
        self.tracker.is_empty()
    }

    /// The names of the running tasks, each with how many run under it.
    pub fn running(&self) -> Vec<(&'static str, usize)> {
        let live = self.live.lock().unwrap_or_else(|e| e.into_inner());
        live.iter().map(|(name, n)| (*name, *n)).collect()
    }

    /// Closes the set and waits until every task in it has ended, at most
    /// `bound`. Tasks spawned after this still run and are waited for while
    /// the wait lasts. Returns false, having logged the names of the tasks
    /// still running, when the bound ran out first.
    pub async fn wait(&self, bound: Duration) -> bool {
        self.tracker.close();
        if tokio::time::timeout(bound, self.tracker.wait())
            .await
            .is_ok()
        {
            return true;
        }
        for (name, count) in self.running() {
            tracing::warn!(
                task = name,
                count,
                "task still running after the shutdown bound"
            );
        }
        false
    }
}

/// Counts one task under its name while it runs (dropped with the task,
/// whether it ended or was aborted).
struct Running {
    live: Arc<Mutex<BTreeMap<&'static str, usize>>>,
    name: &'static str,
}

impl Running {
    fn enter(live: &Arc<Mutex<BTreeMap<&'static str, usize>>>, name: &'static str) -> Self {
        *live
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(name)
            .or_default() += 1;
        Self {
            live: live.clone(),
            name,
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let mut live = self.live.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = live.get_mut(self.name) {
            *n -= 1;
            if *n == 0 {
                live.remove(self.name);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn wait_returns_when_every_task_has_ended() {
        let tasks = Tasks::new();
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        tasks.spawn("held", async move {
            let _ = rx.await;
        });
        assert_eq!(tasks.running(), [("held", 1)]);
        let waiting = tokio::spawn({
            let tasks = tasks.clone();
            async move { tasks.wait(Duration::from_secs(60)).await }
        });
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished(), "a task is still running");
        tx.send(()).unwrap();
        assert!(waiting.await.unwrap());
        assert!(tasks.is_empty() && tasks.running().is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn the_bound_ends_the_wait_and_names_what_is_left() {
        let tasks = Tasks::new();
        tasks.spawn("stuck", std::future::pending::<()>());
        assert!(!tasks.wait(Duration::from_secs(5)).await);
        assert_eq!(tasks.running(), [("stuck", 1)]);
    }
}
