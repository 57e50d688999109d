//! The client's copy of a session's log and the rules that keep it coherent:
//! dedup by seq, gap detection, reset rebuilds, history prepends and local
//! (injected) events. Pure and synchronous so every rule is unit-testable;
//! the subscription task owns one [`ClientLog`].

use std::collections::BTreeSet;

use crate::derive::{Derived, Fold};
use crate::pb::{Event, ReplayStart};

use super::events::Events;

/// A stream message that breaks the Subscribe contract; the subscription
/// drops the stream and resubscribes from the last good seq.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Fault {
    /// An event skipped seqs: `got` arrived when `expected` was next.
    Gap { expected: u64, got: u64 },
    /// A non-reset replay that starts past the cursor (events would be
    /// missing between the cursor and `from_seq + 1`).
    ReplayAhead { cursor: u64, from_seq: u64 },
    /// The replay said it was done but stopped short of its own head.
    ShortReplay { cursor: u64, head_seq: u64 },
}

impl std::fmt::Display for Fault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Fault::Gap { expected, got } => {
                write!(f, "gap in stream: expected seq {expected}, got {got}")
            }
            Fault::ReplayAhead { cursor, from_seq } => write!(
                f,
                "replay starts after seq {from_seq} but the client holds up to {cursor}"
            ),
            Fault::ShortReplay { cursor, head_seq } => write!(
                f,
                "caught up at head {head_seq} but the stream only reached {cursor}"
            ),
        }
    }
}

/// What happened to one streamed event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Applied {
    /// Taken: the cursor advanced.
    Appended,
    /// Already held (seq <= cursor): dropped.
    Duplicate,
}

/// What a History page did to the list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Prepended {
    /// The page was joined to the front of the list.
    Joined,
    /// The list was rebuilt (reset) while the request was in flight, or the
    /// page does not end right before the oldest held event: dropped.
    Stale,
}

/// How the list changed since the last [`ClientLog::publish`].
#[derive(Debug, Default)]
struct Dirty {
    /// Anything changed (the derived state must be recomputed).
    any: bool,
    /// The mirror must be rebuilt from scratch (reset, insert in the middle).
    rebuild: bool,
    /// Events added at the front of `events` since the last publish.
    prepended: usize,
    /// Events added at the end of `events` since the last publish.
    appended: usize,
}

/// The client's log of one session.
#[derive(Debug, Default)]
pub(crate) struct ClientLog {
    /// The authoritative list, oldest first: server events in seq order, and
    /// local events (seq 0) where they were injected. Contiguous because the
    /// derive functions take a slice.
    events: Vec<Event>,
    /// What snapshots share; brought up to date with `events` on publish.
    mirror: Events,
    /// The derive fold over `mirror`: appends are applied one event at a
    /// time, anything else refolds the whole list.
    fold: Fold,
    /// The highest seq taken from the stream: the Subscribe cursor.
    cursor: u64,
    /// The oldest seq of the contiguous run of server events held (from the
    /// stream or History pages); None before the first one arrives.
    floor: Option<u64>,
    /// Seqs injected locally ahead of the cursor; the stream's copy replaces
    /// the local one when it arrives.
    ahead: BTreeSet<u64>,
    /// Bumped by every reset, so a History page requested before it is
    /// recognised as belonging to the old list.
    epoch: u64,
    /// The server said no older events exist (or can be served).
    history_exhausted: bool,
    dirty: Dirty,
}

impl ClientLog {
    /// The Subscribe cursor: every server event up to it is held (from the
    /// oldest held one on).
    pub(crate) fn cursor(&self) -> u64 {
        self.cursor
    }

    /// The reset counter (see [`ClientLog::prepend`]).
    pub(crate) fn epoch(&self) -> u64 {
        self.epoch
    }

    /// The seq of the oldest server event held: History pages go below it.
    pub(crate) fn oldest_seq(&self) -> Option<u64> {
        self.floor
    }

    /// True when older events than the oldest held one may exist. Seqs start
    /// at 1 without gaps, so anything above 1 has predecessors, unless the
    /// server already said it has nothing older.
    pub(crate) fn has_more_history(&self) -> bool {
        !self.history_exhausted && self.oldest_seq().is_some_and(|s| s > 1)
    }

    /// Handles the ReplayStart that opens every Subscribe stream.
    pub(crate) fn replay_start(&mut self, start: &ReplayStart) -> Result<(), Fault> {
        if start.reset {
            // The server could not continue from our cursor: what we hold may
            // disagree with its log, so none of it (local events included)
            // survives; the replayed tail becomes the whole list.
            self.events.clear();
            self.ahead.clear();
            self.floor = None;
            self.cursor = start.from_seq;
            self.epoch += 1;
            self.history_exhausted = false;
            self.dirty.any = true;
            self.dirty.rebuild = true;
            return Ok(());
        }
        if start.from_seq > self.cursor {
            return Err(Fault::ReplayAhead {
                cursor: self.cursor,
                from_seq: start.from_seq,
            });
        }
        // from_seq below the cursor only means overlap: duplicates get dropped.
        Ok(())
    }

    /// Handles one streamed event.
    pub(crate) fn stream_event(&mut self, event: Event) -> Result<Applied, Fault> {
        if event.seq <= self.cursor {
            return Ok(Applied::Duplicate);
        }
        if event.seq != self.cursor + 1 {
            return Err(Fault::Gap {
                expected: self.cursor + 1,
                got: event.seq,
            });
        }
        self.cursor = event.seq;
        self.floor.get_or_insert(event.seq);
        self.dirty.any = true;
        if self.ahead.remove(&event.seq) {
            // A local copy was injected earlier: the server's copy wins.
            if let Some(slot) = self.events.iter_mut().find(|e| e.seq == event.seq) {
                *slot = event;
                self.dirty.rebuild = true;
                return Ok(Applied::Appended);
            }
        }
        self.events.push(event);
        self.dirty.appended += 1;
        Ok(Applied::Appended)
    }

    /// Checks the CaughtUp head against what the replay delivered.
    pub(crate) fn caught_up(&self, head_seq: u64) -> Result<(), Fault> {
        if head_seq > self.cursor {
            return Err(Fault::ShortReplay {
                cursor: self.cursor,
                head_seq,
            });
        }
        Ok(())
    }

    /// Adds a local event. Seq 0 events are appended; an event with a seq is
    /// dropped when that seq is already held, and otherwise placed in seq
    /// order. Returns whether it was added.
    pub(crate) fn inject(&mut self, event: Event) -> bool {
        if event.seq == 0 {
            self.events.push(event);
            self.dirty.any = true;
            self.dirty.appended += 1;
            return true;
        }
        if self.events.iter().any(|e| e.seq == event.seq) {
            return false;
        }
        if event.seq > self.cursor {
            self.ahead.insert(event.seq);
        }
        let at = self
            .events
            .iter()
            .position(|e| e.seq > event.seq)
            .unwrap_or(self.events.len());
        let at_end = at == self.events.len();
        self.events.insert(at, event);
        self.dirty.any = true;
        if at_end {
            self.dirty.appended += 1;
        } else {
            self.dirty.rebuild = true;
        }
        true
    }

    /// Joins a History page (oldest first, all older than what was held when
    /// it was requested in `epoch`) to the front of the list.
    pub(crate) fn prepend(&mut self, epoch: u64, page: Vec<Event>, has_more: bool) -> Prepended {
        let Some(floor) = self.floor else {
            return Prepended::Stale;
        };
        if epoch != self.epoch {
            return Prepended::Stale;
        }
        let page: Vec<Event> = page.into_iter().filter(|e| e.seq < floor).collect();
        let contiguous = page.windows(2).all(|w| w[0].seq + 1 == w[1].seq)
            && page.last().is_none_or(|e| e.seq + 1 == floor)
            && page.first().is_none_or(|e| e.seq > 0);
        if !contiguous {
            return Prepended::Stale;
        }
        if !has_more {
            self.history_exhausted = true;
        }
        let Some(first) = page.first() else {
            return Prepended::Joined;
        };
        self.floor = Some(first.seq);
        self.dirty.any = true;
        // Events injected locally with an old seq are already here: merge
        // around them (rare), otherwise the page simply goes first.
        let held: BTreeSet<u64> = self
            .events
            .iter()
            .map(|e| e.seq)
            .filter(|&s| s != 0 && s < floor)
            .collect();
        if held.is_empty() {
            self.dirty.prepended += page.len();
            self.events.splice(0..0, page);
            return Prepended::Joined;
        }
        self.dirty.rebuild = true;
        for event in page.into_iter().filter(|e| !held.contains(&e.seq)) {
            let at = self
                .events
                .iter()
                .position(|e| e.seq > event.seq)
                .unwrap_or(self.events.len());
            self.events.insert(at, event);
        }
        Prepended::Joined
    }

    /// True when something changed since the last publish.
    pub(crate) fn changed(&self) -> bool {
        self.dirty.any
    }

    /// Brings the shared mirror and the derived state up to date and returns
    /// them.
    pub(crate) fn publish(&mut self) -> (Events, Derived) {
        let d = std::mem::take(&mut self.dirty);
        let appended = &self.events[self.events.len() - d.appended..];
        if d.rebuild || d.prepended > 0 {
            // Derived state depends on order: anything not at the end means
            // folding the whole list again.
            self.fold = Fold::new();
            for e in &self.events {
                self.fold.apply(e);
            }
        } else {
            for e in appended {
                self.fold.apply(e);
            }
        }
        if d.rebuild || self.mirror.fragmented() {
            self.mirror = Events::from_slice(&self.events);
        } else {
            if d.prepended > 0 {
                self.mirror.prepend(&self.events[..d.prepended]);
            }
            self.mirror.append(appended);
        }
        debug_assert_eq!(self.mirror.len(), self.events.len());
        (self.mirror.clone(), self.fold.snapshot())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pb::{self, event::Payload};

    fn ev(seq: u64) -> Event {
        Event {
            seq,
            ..Default::default()
        }
    }

    fn input(seq: u64, text: &str) -> Event {
        Event {
            seq,
            run_id: "r1".into(),
            payload: Some(Payload::InputSent(pb::InputSent {
                text: text.into(),
                ..Default::default()
            })),
            ..Default::default()
        }
    }

    fn turn_end(seq: u64) -> Event {
        Event {
            seq,
            run_id: "r1".into(),
            payload: Some(Payload::TurnEnd(pb::TurnEnd::default())),
            ..Default::default()
        }
    }

    /// The incremental fold must always agree with a fresh derive_all over
    /// the published list, whatever mix of appends, prepends, injections and
    /// resets produced it.
    #[test]
    fn incremental_derived_matches_derive_all() {
        let run_start = |seq| Event {
            seq,
            run_id: "r1".into(),
            payload: Some(Payload::RunStart(pb::RunStart::default())),
            ..Default::default()
        };
        let mut log = ClientLog::default();
        let check = |log: &mut ClientLog| {
            let (events, derived) = log.publish();
            assert_eq!(derived, crate::derive::derive_all(&events.to_vec()));
            derived
        };
        log.replay_start(&replay(true, 3)).unwrap();
        log.stream_event(input(4, "hi")).unwrap();
        check(&mut log);
        log.inject(input(0, "optimistic"));
        check(&mut log);
        log.stream_event(turn_end(5)).unwrap();
        check(&mut log);
        let epoch = log.epoch();
        log.prepend(epoch, vec![ev(1), run_start(2), input(3, "first")], false);
        let derived = check(&mut log);
        assert_eq!(derived.head_seq, 5);
        log.replay_start(&replay(true, 0)).unwrap();
        log.stream_event(run_start(1)).unwrap();
        check(&mut log);
    }

    fn replay(reset: bool, from_seq: u64) -> ReplayStart {
        ReplayStart {
            reset,
            from_seq,
            head_seq: 0,
        }
    }

    fn take(log: &mut ClientLog, seqs: impl IntoIterator<Item = u64>) {
        for s in seqs {
            assert_eq!(log.stream_event(ev(s)), Ok(Applied::Appended));
        }
    }

    #[test]
    fn duplicates_dropped_and_gaps_reported() {
        let mut log = ClientLog::default();
        log.replay_start(&replay(false, 0)).unwrap();
        take(&mut log, 1..=3);
        assert_eq!(log.stream_event(ev(2)), Ok(Applied::Duplicate));
        assert_eq!(
            log.stream_event(ev(5)),
            Err(Fault::Gap {
                expected: 4,
                got: 5
            })
        );
        assert_eq!(log.cursor(), 3);
        assert_eq!(log.publish().0.seqs(), vec![1, 2, 3]);
    }

    #[test]
    fn reset_rebuilds_from_the_replayed_tail() {
        let mut log = ClientLog::default();
        log.replay_start(&replay(false, 0)).unwrap();
        take(&mut log, 1..=50);
        log.inject(ev(0));
        log.publish();
        log.replay_start(&replay(true, 0)).unwrap();
        take(&mut log, 1..=10);
        assert_eq!(log.publish().0.seqs(), (1..=10).collect::<Vec<_>>());
        assert!(!log.has_more_history());
    }

    #[test]
    fn replay_past_the_cursor_without_reset_is_a_fault() {
        let mut log = ClientLog::default();
        assert!(log.replay_start(&replay(false, 4)).is_err());
        assert!(log.caught_up(0).is_ok());
        assert!(log.caught_up(1).is_err());
    }

    #[test]
    fn injected_seq_is_replaced_by_the_streamed_copy() {
        let mut log = ClientLog::default();
        take(&mut log, 1..=2);
        let mut local = ev(3);
        local.run_id = "local".into();
        assert!(log.inject(local.clone()));
        assert!(!log.inject(local), "same seq twice");
        assert!(!log.inject(ev(2)), "already streamed");
        let mut server = ev(3);
        server.run_id = "server".into();
        assert_eq!(log.stream_event(server), Ok(Applied::Appended));
        let (events, _) = log.publish();
        assert_eq!(events.seqs(), vec![1, 2, 3]);
        assert_eq!(events.last().unwrap().run_id, "server");
    }

    #[test]
    fn prepend_joins_pages_and_rejects_stale_ones() {
        let mut log = ClientLog::default();
        log.replay_start(&replay(true, 6)).unwrap();
        take(&mut log, 7..=9);
        log.publish();
        assert!(log.has_more_history());
        let epoch = log.epoch();
        assert_eq!(
            log.prepend(epoch, vec![ev(4), ev(5), ev(6)], true),
            Prepended::Joined
        );
        assert_eq!(log.publish().0.seqs(), (4..=9).collect::<Vec<_>>());
        // A page that does not end right before the oldest held event.
        assert_eq!(
            log.prepend(epoch, vec![ev(1), ev(2)], true),
            Prepended::Stale
        );
        // A page from before a reset.
        log.replay_start(&replay(true, 8)).unwrap();
        assert_eq!(log.prepend(epoch, vec![ev(3)], true), Prepended::Stale);
        take(&mut log, 9..=9);
        assert_eq!(log.publish().0.seqs(), vec![9]);
        let epoch = log.epoch();
        assert_eq!(
            log.prepend(epoch, (1..=8).map(ev).collect(), false),
            Prepended::Joined
        );
        assert!(!log.has_more_history());
        assert_eq!(log.publish().0.seqs(), (1..=9).collect::<Vec<_>>());
    }

    #[test]
    fn prepend_merges_around_locally_injected_old_events() {
        let mut log = ClientLog::default();
        log.replay_start(&replay(true, 4)).unwrap();
        take(&mut log, 5..=6);
        assert!(log.inject(ev(2)));
        assert_eq!(log.oldest_seq(), Some(5), "injected events move no cursor");
        let epoch = log.epoch();
        assert_eq!(
            log.prepend(epoch, (1..=4).map(ev).collect(), false),
            Prepended::Joined
        );
        assert_eq!(log.publish().0.seqs(), (1..=6).collect::<Vec<_>>());
    }
}
