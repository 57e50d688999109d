//! The group-commit writer: the one owner of sequence numbers and metas.
//!
//! A dedicated OS thread (redb is synchronous) blocks on the command channel,
//! then takes everything else already queued, from every session, up to
//! `max_batch` events, and commits it as ONE `Durability::Immediate`
//! transaction. Only after that commit does it publish: events go into the
//! session windows, the head watch is bumped (waking subscribers), and each
//! append's oneshot resolves. If the commit fails, the seqs it assigned are
//! rolled back, so the log never has a gap. The thread ends on
//! `Cmd::Shutdown` or when every sender is dropped, after committing what
//! was queued before.

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{SystemTime, UNIX_EPOCH};

use agent_harness_client::pb;
use tokio::sync::{mpsc, oneshot};

use super::{LogError, NewEvent, Shared};
use crate::store::SessionMeta;

/// A meta change, applied on the writer thread.
pub(super) type MetaFn = Box<dyn FnOnce(&mut SessionMeta) + Send>;

/// What the writer is asked to do.
pub(super) enum Cmd {
    /// Append events to one session.
    Append {
        session_id: String,
        events: Vec<NewEvent>,
        reply: oneshot::Sender<Result<Vec<pb::Event>, LogError>>,
    },
    /// Change one session's meta.
    Meta {
        session_id: String,
        f: MetaFn,
        reply: oneshot::Sender<Result<(), LogError>>,
    },
    /// Commit what is queued, then stop.
    Shutdown { reply: oneshot::Sender<()> },
}

impl Cmd {
    fn weight(&self) -> usize {
        match self {
            Cmd::Append { events, .. } => events.len(),
            _ => 1,
        }
    }
}

enum Reply {
    Append(
        oneshot::Sender<Result<Vec<pb::Event>, LogError>>,
        Range<usize>,
    ),
    Meta(oneshot::Sender<Result<(), LogError>>),
}

pub(super) fn spawn(
    shared: Arc<Shared>,
    rx: mpsc::UnboundedReceiver<Cmd>,
    metas: HashMap<String, SessionMeta>,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    std::thread::Builder::new()
        .name("event-log-writer".into())
        .spawn(move || Writer { shared, metas }.run(rx))
}

struct Writer {
    shared: Arc<Shared>,
    /// Authoritative metas (and so heads) of every session.
    metas: HashMap<String, SessionMeta>,
}

impl Writer {
    fn run(mut self, mut rx: mpsc::UnboundedReceiver<Cmd>) {
        let max_batch = self.shared.opts.max_batch.max(1);
        let mut carry: Option<Cmd> = None;
        loop {
            let first = match carry.take() {
                Some(c) => c,
                None => match rx.blocking_recv() {
                    Some(c) => c,
                    None => return,
                },
            };
            let mut stop = None;
            let mut batch = Vec::new();
            let mut weight = 0;
            let mut next = Some(first);
            while let Some(cmd) = next.take() {
                match cmd {
                    Cmd::Shutdown { reply } => {
                        stop = Some(reply);
                        break;
                    }
                    cmd => {
                        if weight > 0 && weight + cmd.weight() > max_batch {
                            carry = Some(cmd);
                            break;
                        }
                        weight += cmd.weight();
                        batch.push(cmd);
                    }
                }
                next = rx.try_recv().ok();
            }
            if !batch.is_empty() {
                self.commit(batch);
            }
            if let Some(reply) = stop {
                if let Some(cmd) = carry.take() {
                    self.commit(vec![cmd]);
                }
                // Anything queued after the shutdown request is refused by
                // dropping its reply sender (the caller sees Closed).
                rx.close();
                let _ = reply.send(());
                return;
            }
        }
    }

    fn commit(&mut self, batch: Vec<Cmd>) {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        let now_ms = i64::try_from(now.as_millis()).unwrap_or(i64::MAX);
        let time = pbjson_types::Timestamp {
            seconds: i64::try_from(now.as_secs()).unwrap_or(i64::MAX),
            nanos: i32::try_from(now.subsec_nanos()).unwrap_or(0),
        };
        // Pre-batch metas of every touched session (None = did not exist), for rollback.
        let mut before: HashMap<String, Option<SessionMeta>> = HashMap::new();
        let mut events: Vec<pb::Event> = Vec::with_capacity(batch.iter().map(Cmd::weight).sum());
        let mut replies = Vec::with_capacity(batch.len());

        for cmd in batch {
            let (session_id, reply) = match cmd {
                Cmd::Append {
                    session_id,
                    events: new,
                    reply,
                } => {
                    let meta = self.touch(&mut before, &session_id, now_ms);
                    let start = events.len();
                    for e in new {
                        meta.head_seq += 1;
                        events.push(pb::Event {
                            seq: meta.head_seq,
                            session_id: session_id.clone(),
                            run_id: e.run_id,
                            time: Some(time),
                            cli_line: e.cli_line,
                            payload: Some(e.payload),
                        });
                    }
                    (session_id, Reply::Append(reply, start..events.len()))
                }
                Cmd::Meta {
                    session_id,
                    f,
                    reply,
                } => {
                    let meta = self.touch(&mut before, &session_id, now_ms);
                    let (head, created) = (meta.head_seq, meta.created_ms);
                    f(meta);
                    // The log owns these; a caller's closure cannot corrupt them.
                    meta.session_id.clone_from(&session_id);
                    meta.head_seq = head;
                    meta.created_ms = created;
                    (session_id, Reply::Meta(reply))
                }
                Cmd::Shutdown { .. } => unreachable!("shutdown is never batched"),
            };
            if let Some(m) = self.metas.get_mut(&session_id) {
                m.updated_ms = now_ms;
            }
            replies.push(reply);
        }

        let dirty: Vec<SessionMeta> = before.keys().map(|k| self.metas[k].clone()).collect();
        match self.shared.store.append_batch(&events, &dirty) {
            Ok(()) => {
                self.publish(&events, &dirty);
                for r in replies {
                    match r {
                        Reply::Append(tx, range) => {
                            let _ = tx.send(Ok(events[range].to_vec()));
                        }
                        Reply::Meta(tx) => {
                            let _ = tx.send(Ok(()));
                        }
                    }
                }
            }
            Err(e) => {
                tracing::error!(error = %e, events = events.len(), "event log commit failed");
                for (sid, old) in before {
                    match old {
                        Some(m) => {
                            self.metas.insert(sid, m);
                        }
                        None => {
                            self.metas.remove(&sid);
                        }
                    }
                }
                let err = LogError::from(e);
                for r in replies {
                    let e = match &err {
                        LogError::Store(s) => LogError::Store(s.clone()),
                        LogError::Closed => LogError::Closed,
                    };
                    match r {
                        Reply::Append(tx, _) => {
                            let _ = tx.send(Err(e));
                        }
                        Reply::Meta(tx) => {
                            let _ = tx.send(Err(e));
                        }
                    }
                }
            }
        }
    }

    /// The session's meta, created if new, remembering its pre-batch value.
    fn touch(
        &mut self,
        before: &mut HashMap<String, Option<SessionMeta>>,
        session_id: &str,
        now_ms: i64,
    ) -> &mut SessionMeta {
        if !before.contains_key(session_id) {
            before.insert(session_id.to_owned(), self.metas.get(session_id).cloned());
        }
        match self.metas.entry(session_id.to_owned()) {
            Entry::Occupied(o) => o.into_mut(),
            Entry::Vacant(v) => v.insert(SessionMeta::new(session_id, now_ms)),
        }
    }

    /// After a successful commit: fill windows, then bump heads (waking subscribers).
    fn publish(&self, events: &[pb::Event], dirty: &[SessionMeta]) {
        let window = self.shared.opts.window;
        // Group by session once; within a session, events are already in seq
        // order because appends were numbered in arrival order.
        let mut by_session: HashMap<&str, Vec<&pb::Event>> = HashMap::new();
        if window > 0 {
            for e in events {
                by_session.entry(e.session_id.as_str()).or_default().push(e);
            }
        }
        for meta in dirty {
            let session = self.shared.get_or_create(&meta.session_id);
            session.has_meta.store(true, Ordering::Release);
            if meta.head_seq == *session.head.borrow() {
                continue;
            }
            if let Some(evs) = by_session.remove(meta.session_id.as_str()) {
                let mut w = session.window_mut();
                // Only the newest `window` of this batch can survive the trim.
                let skip = evs.len().saturating_sub(window);
                w.extend(evs[skip..].iter().map(|e| (*e).clone()));
                while w.len() > window {
                    w.pop_front();
                }
            }
            session.head.send_replace(meta.head_seq);
        }
    }
}
