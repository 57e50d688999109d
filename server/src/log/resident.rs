//! Which sessions the log holds in memory, and how much of each.
//!
//! A session is *resident* while it has an entry here: its committed head
//! (a watch that subscribers follow) and a window of its latest events.
//! Nothing else in the log is per session, so this map is what memory grows
//! with, and it is bounded three ways:
//! - **per session**: a window keeps at most [`Limits::window`] events and
//!   [`Limits::window_bytes`] bytes (the newest event always stays, so the
//!   live fan-out never reads it back from storage);
//! - **all windows together**: at most [`Limits::cache_bytes`]; past it the
//!   windows of the least recently used sessions are dropped (reads fall
//!   through to the store, which holds everything);
//! - **sessions**: at most [`Limits::cache_sessions`] entries that nobody
//!   holds; past it the least recently used idle ones are evicted whole.
//!   An entry held by a Subscribe stream (it keeps an `Arc`) is never
//!   evicted: the stream follows that entry's head watch.
//!
//! A window holds each event encoded ([`EncodedEvent`]), as the writer
//! encoded it once for the store: every stream and page shares those bytes.
//! Bytes are counted as the events' encoded (protobuf) size.
//!
//! Entries are made in two places only: by a reader that loaded the head
//! from the store (`Shared::load`, which checks that no commit was
//! published meanwhile, so a stale head is never installed) and by nobody
//! else: the writer updates resident entries after a commit, and after the
//! tailing task found another process's commits in a shared store, and
//! leaves other sessions alone (their head is in the store).

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

use tokio::sync::watch;

use super::frame::EncodedEvent;

/// The bounds of [`Resident`]; see the module docs.
#[derive(Debug, Clone, Copy)]
pub(super) struct Limits {
    pub window: usize,
    pub window_bytes: usize,
    pub cache_bytes: usize,
    pub cache_sessions: usize,
}

/// The latest events of one session, contiguous, ending at its head.
#[derive(Default)]
struct Window {
    events: VecDeque<EncodedEvent>,
    bytes: usize,
}

impl Window {
    fn pop_front(&mut self) {
        if let Some(e) = self.events.pop_front() {
            self.bytes -= e.bytes.len();
        }
    }
}

/// The in-memory face of one resident session.
pub(super) struct SessionLog {
    /// Committed head seq. Subscribers hold receivers; the writer sends
    /// after the commit and after the window was updated.
    pub head: watch::Sender<u64>,
    /// See [`Window`]. May be empty (after loading, or after the byte
    /// budget dropped it): then reads go to the store. A `RwLock`: a live
    /// event fans out to every subscriber at once, and they all read it
    /// concurrently.
    window: RwLock<Window>,
    /// Whether the session has a stored meta (so it "exists" without events).
    pub has_meta: AtomicBool,
    /// Set when the session was deleted (the entry is no longer in the
    /// map): its streams send what they still hold, then end.
    pub deleted: AtomicBool,
    /// Last append or meta change known here, Unix ms.
    pub updated_ms: AtomicI64,
    /// [`Resident`]'s clock at the last use, for least-recently-used order.
    last_used: AtomicU64,
    /// Live typing: the blocks its live run is writing (never stored). The
    /// run task holds this entry while it lives (see `EventLogs::typing`),
    /// so it is never evicted from under a subscriber.
    pub board: crate::partial::Board,
    /// Every stored row of seq 1 to this one was read and found to decode
    /// (see [`crate::log::span`]): stored rows never change, so they are
    /// sent again unchecked. Lost with the entry (evicted, deleted), and
    /// then earned again by the next read from seq 1.
    pub checked: AtomicU64,
}

impl SessionLog {
    pub fn new(head: u64, has_meta: bool, updated_ms: i64) -> Self {
        Self {
            head: watch::Sender::new(head),
            window: RwLock::new(Window::default()),
            has_meta: AtomicBool::new(has_meta),
            deleted: AtomicBool::new(false),
            updated_ms: AtomicI64::new(updated_ms),
            last_used: AtomicU64::new(0),
            board: crate::partial::Board::default(),
            checked: AtomicU64::new(0),
        }
    }

    fn window(&self) -> RwLockReadGuard<'_, Window> {
        self.window.read().unwrap_or_else(|p| p.into_inner())
    }

    fn window_mut(&self) -> RwLockWriteGuard<'_, Window> {
        self.window.write().unwrap_or_else(|p| p.into_inner())
    }

    /// The event `seq`, if the window holds it (its shared bytes).
    pub fn window_get(&self, seq: u64) -> Option<EncodedEvent> {
        let w = self.window();
        let front = w.events.front()?.seq;
        let i = usize::try_from(seq.checked_sub(front)?).ok()?;
        w.events.get(i).cloned()
    }

    /// Events `after+1 ..` (at most `max`) if the window still covers `after+1`.
    pub fn window_span(&self, after: u64, max: usize) -> Option<Vec<EncodedEvent>> {
        let w = self.window();
        let front = w.events.front()?.seq;
        let back = w.events.back()?.seq;
        if front > after.saturating_add(1) || back <= after {
            return None;
        }
        let skip = usize::try_from(after + 1 - front).ok()?;
        Some(w.events.iter().skip(skip).take(max).cloned().collect())
    }

    fn window_len(&self) -> usize {
        self.window().events.len()
    }

    fn window_bytes(&self) -> usize {
        self.window().bytes
    }
}

/// Every resident session; see the module docs.
pub(super) struct Resident {
    map: RwLock<HashMap<String, Arc<SessionLog>>>,
    limits: Limits,
    /// A logical clock for least-recently-used order.
    clock: AtomicU64,
    /// Bytes in all windows together.
    bytes: AtomicUsize,
}

impl Resident {
    pub fn new(limits: Limits) -> Self {
        Self {
            map: RwLock::default(),
            limits,
            clock: AtomicU64::new(0),
            bytes: AtomicUsize::new(0),
        }
    }

    fn read(&self) -> RwLockReadGuard<'_, HashMap<String, Arc<SessionLog>>> {
        self.map.read().unwrap_or_else(|p| p.into_inner())
    }

    fn write(&self) -> RwLockWriteGuard<'_, HashMap<String, Arc<SessionLog>>> {
        self.map.write().unwrap_or_else(|p| p.into_inner())
    }

    fn touch(&self, s: &SessionLog) {
        let now = self.clock.fetch_add(1, Ordering::Relaxed);
        s.last_used.store(now, Ordering::Relaxed);
    }

    /// The session's entry, if resident (marks it used).
    pub fn get(&self, session_id: &str) -> Option<Arc<SessionLog>> {
        let s = self.read().get(session_id).cloned()?;
        self.touch(&s);
        Some(s)
    }

    /// The resident entry, or the one `make` builds, called under the map's
    /// write lock (when it builds none, `None`: e.g. a commit was published
    /// since the caller read the store). Evicts idle entries past the cap.
    pub fn get_or_insert<E>(
        &self,
        session_id: &str,
        make: impl FnOnce() -> Result<Option<SessionLog>, E>,
    ) -> Result<Option<Arc<SessionLog>>, E> {
        let s = {
            let mut map = self.write();
            match map.get(session_id) {
                Some(s) => s.clone(),
                None => {
                    let Some(made) = make()? else {
                        return Ok(None);
                    };
                    let s = Arc::new(made);
                    map.insert(session_id.to_owned(), s.clone());
                    if map.len() > self.limits.cache_sessions {
                        self.evict_idle(&mut map);
                    }
                    s
                }
            }
        };
        self.touch(&s);
        Ok(Some(s))
    }

    /// Forgets `entry` if it is still the session's entry, nobody else holds
    /// it and the session does not exist (a Subscribe that waited for a
    /// session that never came): an unknown id keeps nothing once its
    /// stream is gone.
    pub fn release_if_never_created(&self, session_id: &str, entry: &Arc<SessionLog>) {
        let mut map = self.write();
        let Some(s) = map.get(session_id) else {
            return;
        };
        // The map's reference and the caller's: nobody else.
        if Arc::ptr_eq(s, entry)
            && Arc::strong_count(s) == 2
            && *s.head.borrow() == 0
            && !s.has_meta.load(Ordering::Acquire)
        {
            map.remove(session_id);
        }
    }

    /// Drops the least recently used entries nobody holds until at most
    /// nine tenths of the cap remain (so eviction runs once per tenth of
    /// the cap of new entries, not on every insert).
    fn evict_idle(&self, map: &mut HashMap<String, Arc<SessionLog>>) {
        let keep = self.limits.cache_sessions - self.limits.cache_sessions / 10;
        // Under the write lock nobody can clone an entry, so a count of one
        // means only the map holds it: no stream follows its head.
        let mut idle: Vec<(u64, String)> = map
            .iter()
            .filter(|(_, s)| Arc::strong_count(s) == 1)
            .map(|(k, s)| (s.last_used.load(Ordering::Relaxed), k.clone()))
            .collect();
        idle.sort_unstable();
        let excess = map.len().saturating_sub(keep);
        for (_, k) in idle.into_iter().take(excess) {
            if let Some(s) = map.remove(&k) {
                self.bytes.fetch_sub(s.window_bytes(), Ordering::Relaxed);
            }
        }
    }

    /// Appends just-committed events (of one session, in seq order) to its
    /// window and trims it to the per-session bounds. Events the window
    /// already holds are skipped; when the rest do not follow its newest
    /// event (another process committed the seqs between, see `tail`), the
    /// window restarts with them, so it stays contiguous.
    pub fn extend_window(&self, s: &SessionLog, events: &[EncodedEvent]) {
        let Limits {
            window,
            window_bytes,
            ..
        } = self.limits;
        if window == 0 {
            return;
        }
        let mut w = s.window_mut();
        let before = w.bytes;
        let back = w.events.back().map(|e| e.seq);
        let events = match back {
            Some(back) => {
                let new = events.partition_point(|e| e.seq <= back);
                let events = &events[new..];
                if events.first().is_some_and(|e| e.seq != back + 1) {
                    *w = Window::default();
                }
                events
            }
            None => events,
        };
        // Only the newest `window` of this batch can survive the trim.
        let skip = events.len().saturating_sub(window);
        for e in &events[skip..] {
            w.bytes += e.bytes.len();
            w.events.push_back(e.clone());
        }
        while w.events.len() > window || (w.bytes > window_bytes && w.events.len() > 1) {
            w.pop_front();
        }
        let after = w.bytes;
        drop(w);
        if after >= before {
            self.bytes.fetch_add(after - before, Ordering::Relaxed);
        } else {
            self.bytes.fetch_sub(before - after, Ordering::Relaxed);
        }
    }

    /// Empties the session's window (its bytes leave the budget).
    pub fn clear_window(&self, s: &SessionLog) {
        let freed = std::mem::take(&mut *s.window_mut()).bytes;
        self.bytes.fetch_sub(freed, Ordering::Relaxed);
    }

    /// When all windows together are over [`Limits::cache_bytes`], drops
    /// whole windows, least recently used first, until at most nine tenths
    /// of it remain.
    pub fn enforce_byte_budget(&self) {
        let budget = self.limits.cache_bytes;
        if self.bytes.load(Ordering::Relaxed) <= budget {
            return;
        }
        let target = budget - budget / 10;
        let mut by_age: Vec<(u64, Arc<SessionLog>)> = self
            .read()
            .values()
            .filter(|s| s.window_bytes() > 0)
            .map(|s| (s.last_used.load(Ordering::Relaxed), s.clone()))
            .collect();
        by_age.sort_unstable_by_key(|(t, _)| *t);
        for (_, s) in by_age {
            if self.bytes.load(Ordering::Relaxed) <= target {
                break;
            }
            let mut w = s.window_mut();
            let freed = w.bytes;
            *w = Window::default();
            drop(w);
            self.bytes.fetch_sub(freed, Ordering::Relaxed);
        }
    }

    /// Takes the session's entry out of the map (its window's bytes leave
    /// the budget); holders keep their `Arc`.
    pub fn remove(&self, session_id: &str) -> Option<Arc<SessionLog>> {
        let s = self.write().remove(session_id)?;
        self.bytes.fetch_sub(s.window_bytes(), Ordering::Relaxed);
        Some(s)
    }

    /// Every resident entry (shutdown wakes them all).
    pub fn all(&self) -> Vec<Arc<SessionLog>> {
        self.read().values().cloned().collect()
    }

    /// The session's entry, if resident, without marking it used (the
    /// tailing task looks without using).
    pub fn peek(&self, session_id: &str) -> Option<Arc<SessionLog>> {
        self.read().get(session_id).cloned()
    }

    /// The ids of every resident session.
    pub fn ids(&self) -> Vec<String> {
        self.read().keys().cloned().collect()
    }

    /// Resident sessions, events in their windows, bytes in their windows.
    pub fn stats(&self) -> (usize, usize, usize) {
        let map = self.read();
        (
            map.len(),
            map.values().map(|s| s.window_len()).sum(),
            self.bytes.load(Ordering::Relaxed),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use agent_harness_protocol::pb;

    fn ev(seq: u64, text_len: usize) -> EncodedEvent {
        EncodedEvent::of(&pb::Event {
            seq,
            session_id: "s".into(),
            cli_line: "x".repeat(text_len),
            ..Default::default()
        })
    }

    fn limits() -> Limits {
        Limits {
            window: 100,
            window_bytes: 10_000,
            cache_bytes: 25_000,
            cache_sessions: 10,
        }
    }

    fn new_entry(r: &Resident, id: &str) -> Arc<SessionLog> {
        r.get_or_insert(id, || Ok::<_, ()>(Some(SessionLog::new(0, true, 0))))
            .unwrap()
            .unwrap()
    }

    #[test]
    fn a_window_is_bounded_by_events_and_bytes_but_keeps_its_newest_event() {
        let r = Resident::new(limits());
        let s = new_entry(&r, "s");
        let evs: Vec<EncodedEvent> = (1..=50).map(|i| ev(i, 1_000)).collect();
        r.extend_window(&s, &evs);
        let (_, events, bytes) = r.stats();
        assert!(bytes <= 10_000, "{bytes}");
        assert!((9..50).contains(&events), "{events}");
        assert_eq!(s.window_get(50).unwrap().seq, 50);
        assert!(s.window_get(1).is_none());
        // One event bigger than the whole budget still stays.
        r.extend_window(&s, &[ev(51, 50_000)]);
        assert_eq!(s.window_get(51).unwrap().seq, 51);
        assert_eq!(r.stats().1, 1);
    }

    #[test]
    fn a_window_skips_what_it_holds_and_restarts_at_a_gap() {
        let r = Resident::new(limits());
        let s = new_entry(&r, "s");
        let evs: Vec<EncodedEvent> = (1..=5).map(|i| ev(i, 10)).collect();
        r.extend_window(&s, &evs);
        // 4..=6 overlaps: 6 is added once.
        let more: Vec<EncodedEvent> = (4..=6).map(|i| ev(i, 10)).collect();
        r.extend_window(&s, &more);
        assert_eq!(r.stats().1, 6);
        let seqs: Vec<u64> = s
            .window_span(0, 10)
            .unwrap()
            .iter()
            .map(|e| e.seq)
            .collect();
        assert_eq!(seqs, (1..=6).collect::<Vec<_>>());
        // 9, 10 after 6: 7 and 8 were committed elsewhere; the window restarts.
        let later: Vec<EncodedEvent> = (9..=10).map(|i| ev(i, 10)).collect();
        r.extend_window(&s, &later);
        assert_eq!(r.stats().1, 2);
        assert!(s.window_span(6, 10).is_none(), "7 is not in the window");
        assert_eq!(s.window_get(10).unwrap().seq, 10);
        let bytes: usize = later.iter().map(|e| e.bytes.len()).sum();
        assert_eq!(r.stats().2, bytes, "the dropped events left the budget");
    }

    #[test]
    fn past_the_byte_budget_the_least_recently_used_windows_go() {
        let r = Resident::new(limits());
        let (a, b, c) = (new_entry(&r, "a"), new_entry(&r, "b"), new_entry(&r, "c"));
        for s in [&a, &b, &c] {
            let evs: Vec<EncodedEvent> = (1..=9).map(|i| ev(i, 1_000)).collect();
            r.extend_window(s, &evs);
        }
        assert!(r.stats().2 > 25_000);
        r.get("a"); // a is now the most recently used
        r.enforce_byte_budget();
        assert!(r.stats().2 <= 22_500, "{:?}", r.stats());
        assert!(b.window_get(9).is_none(), "the oldest window was dropped");
        assert!(a.window_get(9).is_some(), "the newest stays");
    }

    #[test]
    fn idle_entries_past_the_cap_are_evicted_oldest_first_and_held_ones_never() {
        let r = Resident::new(limits());
        let held = new_entry(&r, "held");
        for i in 0..10 {
            new_entry(&r, &format!("s{i}"));
        }
        // 11 entries > 10: evicted down to 9, oldest idle first; "held" stays.
        let (n, _, _) = r.stats();
        assert_eq!(n, 9);
        assert!(r.get("held").is_some());
        assert!(r.get("s0").is_none() && r.get("s1").is_none());
        assert!(r.get("s9").is_some());
        drop(held);
    }
}
