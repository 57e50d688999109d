//! The cap on idle keep-alive processes (`--max-idle-runs`): which run
//! tasks sit idle, since when, and which one to end when there are too
//! many.
//!
//! A keep-alive process between turns answers the next Send at once, but
//! holds a few hundred MB. Each run task reports here whether its process
//! is idle (the same "idle" the idle timeout uses: no turn, no pending
//! permission, no control request, no stop under way) and its last
//! activity. When more than the cap are idle, the least recently active
//! one is told to go: the task itself decides (it alone knows whether a
//! Send reached it meanwhile, or background tasks are running) and ends
//! its process the way the idle timeout does. Its session resumes the
//! conversation on its next Send.
//!
//! The registry is this process's: on a cluster each node caps its own.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::Notify;
use tokio::time::Instant;

/// How the registry tells a run to go, and which idle stretch it judged
/// (the `since` it held): a run that had activity after that is not the
/// least recently active any more.
#[derive(Default)]
struct Told {
    notify: Notify,
    since: Mutex<Option<Instant>>,
}

/// The idle runs of one manager. Cheap to clone.
#[derive(Clone)]
pub(super) struct IdleRuns {
    inner: Arc<Inner>,
}

struct Inner {
    /// Most idle processes kept; 0: none outlives its turn.
    max: usize,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// The idle runs by entry id: since when, and how to tell each to go.
    idle: HashMap<u64, (Instant, Arc<Told>)>,
    next_id: u64,
}

impl IdleRuns {
    /// A registry keeping at most `max` processes idle.
    pub(super) fn new(max: usize) -> Self {
        Self {
            inner: Arc::new(Inner {
                max,
                state: Mutex::new(State::default()),
            }),
        }
    }

    /// Processes idle now (evictions already told are not counted).
    pub(super) fn len(&self) -> usize {
        self.lock().idle.len()
    }

    /// The entry of one run task: not idle until it says so.
    pub(super) fn entry(&self) -> IdleEntry {
        let id = {
            let mut s = self.lock();
            s.next_id += 1;
            s.next_id
        };
        IdleEntry {
            runs: self.clone(),
            id,
            evict: Arc::new(Told::default()),
            since: None,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // Nothing panics while holding it; a poisoned map is still right.
        self.inner.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Tells the least recently active idle runs to go until at most `max`
    /// are left. A run told leaves the map at once, so it is told once and
    /// the next call picks another.
    fn enforce(&self, s: &mut State) {
        while s.idle.len() > self.inner.max {
            let Some(victim) = s
                .idle
                .iter()
                .min_by_key(|(id, (since, _))| (*since, **id))
                .map(|(id, _)| *id)
            else {
                return;
            };
            if let Some((since, told)) = s.idle.remove(&victim) {
                *told.since.lock().unwrap_or_else(|e| e.into_inner()) = Some(since);
                // Stored when nobody waits: the run sees it at its next poll.
                told.notify.notify_one();
            }
        }
    }
}

/// One run task's place in [`IdleRuns`]; leaves it when dropped.
pub(super) struct IdleEntry {
    runs: IdleRuns,
    id: u64,
    evict: Arc<Told>,
    /// What the map holds for this run, as far as this entry knows.
    since: Option<Instant>,
}

impl IdleEntry {
    /// Reports the process idle since `since` (its last activity), or busy
    /// (`None`). A change of either may end another idle process.
    pub(super) fn set(&mut self, since: Option<Instant>) {
        if self.since == since {
            return;
        }
        self.since = since;
        let mut s = self.runs.lock();
        match since {
            Some(t) => {
                s.idle.insert(self.id, (t, self.evict.clone()));
                self.runs.enforce(&mut s);
            }
            None => {
                s.idle.remove(&self.id);
            }
        }
    }

    /// Resolves when the registry tells this run to go, with the idle
    /// stretch it judged (since when the run was idle). The run is then
    /// out of the map; [`IdleEntry::evicted`] records that here.
    pub(super) async fn told(&self) -> Option<Instant> {
        self.evict.notify.notified().await;
        self.evict
            .since
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
    }

    /// The run handled its eviction (ended, or found it was no longer
    /// idle): the map no longer holds it, so a later [`IdleEntry::set`]
    /// puts it back.
    pub(super) fn evicted(&mut self) {
        self.since = None;
        self.runs.lock().idle.remove(&self.id);
    }
}

impl Drop for IdleEntry {
    fn drop(&mut self) {
        self.runs.lock().idle.remove(&self.id);
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn told(e: &IdleEntry) -> bool {
        use futures::FutureExt;
        e.told().now_or_never().is_some()
    }

    #[tokio::test(start_paused = true)]
    async fn past_the_cap_the_least_recently_active_goes() {
        let runs = IdleRuns::new(2);
        let t0 = Instant::now();
        let mut a = runs.entry();
        let mut b = runs.entry();
        let mut c = runs.entry();
        b.set(Some(t0));
        a.set(Some(t0 + Duration::from_secs(1)));
        assert_eq!(runs.len(), 2);
        assert!(!told(&a) && !told(&b));
        c.set(Some(t0 + Duration::from_secs(2)));
        use futures::FutureExt;
        assert_eq!(
            b.told().now_or_never(),
            Some(Some(t0)),
            "b was idle longest"
        );
        assert!(!told(&a) && !told(&c));
        assert_eq!(runs.len(), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn a_busy_run_is_not_counted_and_comes_back_with_its_new_time() {
        let runs = IdleRuns::new(1);
        let t0 = Instant::now();
        let mut a = runs.entry();
        let mut b = runs.entry();
        a.set(Some(t0));
        a.set(None);
        b.set(Some(t0 + Duration::from_secs(1)));
        assert!(!told(&b));
        // a's turn ended after b's: b is now the least recently active.
        a.set(Some(t0 + Duration::from_secs(2)));
        assert!(told(&b) && !told(&a));
    }

    #[tokio::test(start_paused = true)]
    async fn zero_keeps_no_process_idle() {
        let runs = IdleRuns::new(0);
        let mut a = runs.entry();
        a.set(Some(Instant::now()));
        assert!(told(&a));
        assert_eq!(runs.len(), 0);
        // Told once: handling it and staying idle at the same time
        // (background tasks) does not tell it again until it reports anew.
        a.evicted();
        assert!(!told(&a));
    }

    #[tokio::test(start_paused = true)]
    async fn a_dropped_entry_leaves_the_map() {
        let runs = IdleRuns::new(4);
        let mut a = runs.entry();
        a.set(Some(Instant::now()));
        assert_eq!(runs.len(), 1);
        drop(a);
        assert_eq!(runs.len(), 0);
    }
}
