//! What a successful commit makes visible, and in which order it wakes
//! those waiting for it: the sessions' windows and heads first
//! ([`Writer::publish`]), then the appenders' replies and the streams that
//! follow the sessions ([`answer`]).

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use agent_harness_protocol::pb;

use super::{Reply, Touched, Writer};
use crate::log::{EncodedEvent, SessionLog};

/// At most this many streams following the sessions of a commit are woken
/// before its appenders' replies; more are woken after them.
const FEW_SUBSCRIBERS: usize = 4;

/// Answers each append of a committed batch with its own events (moved out
/// of the batch: replies are in batch order, as are their events) and wakes
/// the streams following the sessions in `wake`; returns how many appends
/// were answered.
///
/// A few streams first, many last. Each woken stream is a task the runtime
/// queues in wake order. With 1,000 of them queued first the replies would
/// wait behind the whole fan-out wave; a few are a few polls, and queued
/// after a reply a lone subscriber waits for a second worker to wake while
/// the first runs the appender.
pub(super) fn answer(
    events: Vec<pb::Event>,
    replies: Vec<Reply>,
    wake: Vec<Arc<SessionLog>>,
) -> usize {
    let streams_first = followed_by_few(&wake);
    if streams_first {
        wake_subscribers(&wake);
    }
    let answered = replies.len();
    for ((tx, _, _), events) in split(events, replies) {
        let _ = tx.send(Ok(events));
    }
    if !streams_first {
        wake_subscribers(&wake);
    }
    answered
}

/// Each reply with its events, in order: the later ones split off the end,
/// so the first keeps the batch's own vector (a commit that answers one
/// append moves its events, however many, without a copy).
fn split(mut events: Vec<pb::Event>, replies: Vec<Reply>) -> Vec<(Reply, Vec<pb::Event>)> {
    let mut parts: Vec<Vec<pb::Event>> = Vec::with_capacity(replies.len());
    for (_, n, _) in replies.iter().skip(1).rev() {
        let at = events.len().saturating_sub(*n);
        parts.push(events.split_off(at));
    }
    debug_assert_eq!(events.len(), replies.first().map_or(0, |(_, n, _)| *n));
    parts.push(events);
    replies.into_iter().zip(parts.into_iter().rev()).collect()
}

/// Whether at most [`FEW_SUBSCRIBERS`] streams follow these sessions
/// (counted until there are more).
fn followed_by_few(sessions: &[Arc<SessionLog>]) -> bool {
    let mut streams = 0;
    sessions.iter().all(|s| {
        streams += s.head.receiver_count();
        streams <= FEW_SUBSCRIBERS
    })
}

/// Wakes the streams following these sessions.
fn wake_subscribers(sessions: &[Arc<SessionLog>]) {
    for session in sessions {
        session.head.send_modify(|_| {});
    }
}

impl Writer {
    /// After a successful commit: fill windows, then set the heads, so that
    /// when an append's reply arrives its caller already reads its own
    /// events (`head_seq`, History, Subscribe). Returns the sessions whose
    /// head moved; [`answer`] wakes their subscribers.
    pub(super) fn publish(
        &self,
        events: &[pb::Event],
        encoded: &[bytes::Bytes],
        touched: &HashMap<String, Touched>,
        now_ms: i64,
    ) -> Vec<Arc<SessionLog>> {
        let mut wake = Vec::new();
        // Group by session once; within a session, events are already in seq
        // order because appends were numbered in arrival order. The window
        // shares the bytes the store was given.
        let mut by_session: HashMap<&str, Vec<EncodedEvent>> = HashMap::new();
        for (e, bytes) in events.iter().zip(encoded) {
            let shared = EncodedEvent::new(e.seq, bytes.clone());
            by_session
                .entry(e.session_id.as_str())
                .or_default()
                .push(shared);
        }
        for session_id in touched.keys() {
            let head_seq = self.metas[session_id].1.head_seq;
            // A session nobody has in memory stays out: its head is in the
            // store, where the next reader loads it from.
            let Some(session) = self.shared.resident.get(session_id) else {
                continue;
            };
            session.has_meta.store(true, Ordering::Release);
            session.updated_ms.fetch_max(now_ms, Ordering::Relaxed);
            if head_seq <= *session.head.borrow() {
                continue;
            }
            if let Some(evs) = by_session.remove(session_id.as_str()) {
                self.shared.resident.extend_window(&session, &evs);
            }
            // Set without notifying (the closure reports "not modified"): a
            // stream that polls now already sees it; waiting ones are woken
            // by the caller.
            session.head.send_if_modified(|h| {
                *h = (*h).max(head_seq);
                false
            });
            wake.push(session);
        }
        wake
    }
}

#[cfg(test)]
mod tests {
    use tokio::sync::oneshot;

    use super::*;

    /// Events with seqs 1 to `n`.
    fn numbered(n: u64) -> Vec<pb::Event> {
        (1..=n)
            .map(|seq| pb::Event {
                seq,
                ..Default::default()
            })
            .collect()
    }

    #[test]
    fn each_reply_gets_its_own_events_in_order() {
        let events = numbered(6);
        let counts = [2, 0, 3, 1];
        let replies: Vec<Reply> = counts
            .iter()
            .map(|n| (oneshot::channel().0, *n, String::new()))
            .collect();
        let seqs: Vec<Vec<u64>> = split(events, replies)
            .into_iter()
            .map(|(_, events)| events.iter().map(|e| e.seq).collect())
            .collect();
        assert_eq!(seqs, vec![vec![1, 2], vec![], vec![3, 4, 5], vec![6]]);
    }

    #[test]
    fn one_reply_keeps_the_batch_vector() {
        let events = numbered(3);
        let at = events.as_ptr();
        let mut parts = split(events, vec![(oneshot::channel().0, 3, String::new())]);
        let (_, events) = parts.pop().expect("one reply");
        assert_eq!(events.as_ptr(), at, "moved, not copied");
        assert_eq!(events.len(), 3);
    }
}
