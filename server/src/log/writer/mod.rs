//! The group-commit writer: the one owner of sequence numbers and metas.
//!
//! A dedicated OS thread (redb is synchronous) blocks on the command channel,
//! then takes everything else already queued, from every session, up to
//! `max_batch` events (lingering briefly for appenders the previous commit
//! just answered, see [`next_cmd`]), and commits it as ONE
//! `Durability::Immediate` transaction. Only after that commit does it
//! publish: events go into the session windows, the heads are set, each
//! append's oneshot resolves and the head watches are bumped, waking
//! subscribers (a few before the replies, many after them: see
//! [`publish`]). If the commit fails, the seqs it assigned are rolled back
//! (the cached metas of its sessions are forgotten, so the next append
//! numbers from the store's head), so the log never has a gap. The thread
//! ends on `Cmd::Shutdown` or when every sender is dropped, after
//! committing what was queued before.
//!
//! On a store other processes write too, the seqs cached here can be stale:
//! another process may have committed the next seqs of a session. The
//! writer then relies on the store refusing a (session, seq) it already
//! holds: the whole batch fails cleanly (nothing written, its appends
//! answered with the storage error, as any failed commit), never
//! overwriting or reordering the other writer's events, and the next
//! append numbers from the fresh head. When the tailing task saw the other
//! commits first (`Cmd::Follow`), the cached meta is forgotten at once and
//! the next append does not fail at all. Which process may append to a
//! session is not decided here.
//!
//! Per-commit cost is what bounds throughput (each session a commit touches
//! costs at least one copied-on-write B-tree leaf), so a commit writes only
//! events plus the metas that really changed: a session's first commit
//! creates its meta, a commit that carries a meta change rewrites it, and
//! one with events alone writes no meta at all (the store derives the head
//! from the events table). It does write the session index row of each
//! session it moves (`index`), folded on from the row before. A commit that carries the receipt of a keyed
//! call writes it in the same transaction: a receipt is never
//! durable without its events, nor the events without it. A commit that
//! carries only a receipt does not touch its session. Each appended event
//! is built once and encoded once (the store's row and its session's
//! window share those bytes), and moved (not cloned) into the append's
//! reply. An event over the per-event budget is committed twice in that
//! transaction, whole (for `ReadFullEvent`) and cut down (`cut::fit`); only
//! the cut form goes on (window, reply, subscribers).

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::sync::mpsc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use agent_harness_protocol::pb;
use tokio::sync::oneshot;

mod apart;
mod index;
mod publish;

use self::publish::answer;
use super::failpoint::{Failpoint, When};
use super::tail::Ahead;
use super::{Commit, EncodedEvent, LogError, MetaChange, Shared};
use crate::store::{self, IndexFold, IndexRow, ReceiptWrite, SessionMeta};

/// What the writer is asked to do.
pub(super) enum Cmd {
    /// Write one commit to one session.
    Commit {
        session_id: String,
        commit: Commit,
        reply: oneshot::Sender<Result<Vec<pb::Event>, LogError>>,
    },
    /// Delete one session from the store (writing `receipt` in the same
    /// transaction) and from memory, after committing what was queued
    /// before it. Replies whether the session had anything stored.
    Delete {
        session_id: String,
        receipt: Option<ReceiptWrite>,
        reply: oneshot::Sender<Result<bool, LogError>>,
    },
    /// Bring resident sessions forward to heads another process committed
    /// (from the tailing task, see `tail`), after committing what was
    /// queued before.
    Follow {
        ahead: Vec<Ahead>,
        reply: oneshot::Sender<()>,
    },
    /// Commit what is queued, then stop.
    Shutdown { reply: oneshot::Sender<()> },
}

impl Cmd {
    fn weight(&self) -> usize {
        match self {
            Cmd::Commit { commit, .. } => commit.weight(),
            _ => 1,
        }
    }
}

/// A session touched by the batch being committed.
struct Touched {
    /// Whether the commit writes its meta (new session or meta update).
    write_meta: bool,
    /// Its head before the batch: what its index row is folded on from.
    head_before: u64,
}

/// An append's reply channel, how many of the batch's events are its, and
/// its session.
type Reply = (
    oneshot::Sender<Result<Vec<pb::Event>, LogError>>,
    usize,
    String,
);

/// What one batch writes in its store transaction, and whom it answers.
struct Parts {
    events: Vec<pb::Event>,
    /// Each of `events` encoded, once: the store's rows and the windows.
    encoded: Vec<bytes::Bytes>,
    /// The whole form of each event of `events` streamed cut down.
    full: Vec<pb::Event>,
    /// The metas that changed.
    metas: Vec<SessionMeta>,
    receipts: Vec<ReceiptWrite>,
    transcript: Vec<store::TranscriptEntry>,
    /// The index rows of the sessions written.
    index: Vec<IndexRow>,
    replies: Vec<Reply>,
}

/// Applies a caller's meta change; the log owns `session_id`, `head_seq`
/// and `created_ms`, so the closure cannot corrupt them.
fn change_meta(meta: &mut SessionMeta, session_id: &str, now_ms: i64, f: MetaChange) {
    let (head, created) = (meta.head_seq, meta.created_ms);
    f(meta);
    meta.session_id = session_id.to_owned();
    meta.head_seq = head;
    meta.created_ms = created;
    meta.updated_ms = now_ms;
}

/// How long the writer sleeps, per round, while it lingers.
const LINGER_GAP: Duration = Duration::from_micros(50);
/// Longest the writer lingers in total before a commit (and never more than
/// half the previous commit's duration).
const LINGER_MAX: Duration = Duration::from_micros(500);

/// The next command for the batch being collected: whatever is queued, or,
/// when `linger` (fewer appends collected than the previous commit
/// answered) and before `until`, what arrives while the writer sleeps
/// [`LINGER_GAP`]; it stops lingering after a sleep in which nothing came.
///
/// Why linger: appenders await their append, so the ones the previous commit
/// just answered come back a few µs later. Without waiting, the writer
/// starts the next commit with only the appends that queued during the
/// previous one, and the appenders settle into two alternating half-size
/// groups, each paying a full fsync (measured: 100 appenders on one session
/// committed 50 per commit). Lingering lets them merge into one group. A
/// lone appender never lingers (it is the only append answered and already
/// in the batch), so single-append latency is unchanged. The writer sleeps
/// rather than blocking on the channel so that the returning appenders do
/// not each have to wake it (a futex wake and a context switch per append,
/// which on 2 cores steals the CPU the appenders need).
fn next_cmd(rx: &mpsc::Receiver<Cmd>, linger: bool, until: Instant) -> Option<Cmd> {
    match rx.try_recv() {
        Ok(c) => Some(c),
        Err(mpsc::TryRecvError::Empty) if linger => {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return None;
            }
            std::thread::sleep(left.min(LINGER_GAP));
            rx.try_recv().ok()
        }
        Err(_) => None,
    }
}

pub(super) fn spawn(
    shared: Arc<Shared>,
    rx: mpsc::Receiver<Cmd>,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    std::thread::Builder::new()
        .name("event-log-writer".into())
        .spawn(move || {
            Writer {
                shared,
                metas: HashMap::new(),
                index: HashMap::new(),
                clock: 0,
                failpoint: Failpoint::from_env(),
            }
            .run(rx)
        })
}

struct Writer {
    shared: Arc<Shared>,
    /// The metas (and so heads) of recently written sessions, each with the
    /// commit it was last used in. A bounded cache (`cache_sessions`): a
    /// session not in it is read from the store, which has every commit.
    metas: HashMap<String, (u64, SessionMeta)>,
    /// The index folds of the sessions in `metas` (see [`index`]), each at
    /// its session's committed head.
    index: HashMap<String, IndexFold>,
    /// Commits attempted since start-up, counting the one under way: the
    /// meta cache's least-recently-used clock and the failpoint's counter.
    clock: u64,
    /// A crash point for crash tests (`AGENT_HARNESS_FAILPOINT`), if armed.
    failpoint: Option<Failpoint>,
}

impl Writer {
    fn run(mut self, rx: mpsc::Receiver<Cmd>) {
        let max_batch = self.shared.opts.max_batch.max(1);
        let mut carry: Option<Cmd> = None;
        // Appends the previous commit answered, and how long it took: see
        // `next_cmd` for why the writer lingers for the former.
        let mut answered = 0usize;
        let mut last_commit = Duration::ZERO;
        loop {
            let first = match carry.take() {
                Some(c) => c,
                None => match rx.recv() {
                    Ok(c) => c,
                    Err(_) => return,
                },
            };
            let linger_until = Instant::now() + (last_commit / 2).min(LINGER_MAX);
            let mut stop = None;
            let mut apart = None;
            let mut batch = Vec::new();
            let mut weight = 0;
            let mut appends = 0;
            let mut next = Some(first);
            while let Some(cmd) = next.take() {
                match cmd {
                    Cmd::Shutdown { reply } => {
                        stop = Some(reply);
                        break;
                    }
                    // A deletion is never batched: it follows what was
                    // queued before it, in its own transaction. Nor is a
                    // follow: it may forget cached metas a batch numbers from.
                    cmd @ (Cmd::Delete { .. } | Cmd::Follow { .. }) => {
                        if batch.is_empty() {
                            apart = Some(cmd);
                        } else {
                            carry = Some(cmd);
                        }
                        break;
                    }
                    cmd => {
                        if weight > 0 && weight + cmd.weight() > max_batch {
                            carry = Some(cmd);
                            break;
                        }
                        weight += cmd.weight();
                        appends += usize::from(matches!(cmd, Cmd::Commit { .. }));
                        batch.push(cmd);
                    }
                }
                next = next_cmd(&rx, appends < answered, linger_until);
            }
            if !batch.is_empty() {
                let t0 = Instant::now();
                answered = self.commit(batch);
                last_commit = t0.elapsed();
            }
            if let Some(cmd) = apart {
                self.apart(cmd);
            }
            if let Some(reply) = stop {
                match carry.take() {
                    Some(cmd @ (Cmd::Delete { .. } | Cmd::Follow { .. })) => self.apart(cmd),
                    Some(cmd) => {
                        self.commit(vec![cmd]);
                    }
                    None => {}
                }
                // Anything queued after the shutdown request is refused by
                // dropping the receiver with its commands and their reply
                // senders (the callers see Closed).
                drop(rx);
                let _ = reply.send(());
                return;
            }
        }
    }

    /// Commits one batch and answers every command in it; returns how many
    /// appends were answered with success.
    fn commit(&mut self, batch: Vec<Cmd>) -> usize {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        let now_ms = i64::try_from(now.as_millis()).unwrap_or(i64::MAX);
        let time = pbjson_types::Timestamp {
            seconds: i64::try_from(now.as_secs()).unwrap_or(i64::MAX),
            nanos: i32::try_from(now.subsec_nanos()).unwrap_or(0),
        };
        // Every session this batch touches, and whether its meta must be
        // written.
        let mut touched: HashMap<String, Touched> = HashMap::new();
        let mut events: Vec<pb::Event> = Vec::with_capacity(batch.iter().map(Cmd::weight).sum());
        let mut replies = Vec::with_capacity(batch.len());
        // The whole form of each event the batch streams cut down.
        let mut full: Vec<pb::Event> = Vec::new();
        let budget = self.shared.budget();
        let mut receipts = Vec::new();
        let mut transcript = Vec::new();

        for cmd in batch {
            let reply = match cmd {
                Cmd::Commit {
                    session_id,
                    commit:
                        Commit {
                            events: new,
                            meta: change,
                            receipt,
                            transcript: lines,
                        },
                    reply,
                } => {
                    transcript.extend(lines);
                    if new.is_empty() && change.is_none() {
                        // A receipt alone (a keyed call that appended
                        // nothing): the session is not touched.
                        receipts.extend(receipt);
                        replies.push((reply, 0, session_id));
                        continue;
                    }
                    let meta = match self.touch(&mut touched, &session_id, now_ms, change.is_some())
                    {
                        Ok(m) => m,
                        Err(e) => {
                            let _ = reply.send(Err(e));
                            continue;
                        }
                    };
                    // Only with its events: a call refused here leaves no receipt.
                    receipts.extend(receipt);
                    if let Some(f) = change {
                        change_meta(meta, &session_id, now_ms, f);
                    }
                    let start = events.len();
                    for mut e in new {
                        // A client's Structs arrive at any depth the request
                        // decoder took: stored deeper, they would not decode.
                        crate::nesting::bound_payload(&mut e.payload);
                        meta.head_seq += 1;
                        let event = pb::Event {
                            seq: meta.head_seq,
                            session_id: session_id.clone(),
                            run_id: e.run_id,
                            time: Some(time),
                            cli_line: e.cli_line,
                            truncated: None,
                            payload: Some(e.payload),
                        };
                        // Over the budget: stored whole, streamed cut down.
                        match super::cut::fit(&event, budget) {
                            Some(cut) => {
                                full.push(event);
                                events.push(cut);
                            }
                            None => events.push(event),
                        }
                    }
                    (reply, events.len() - start, session_id)
                }
                Cmd::Shutdown { .. } | Cmd::Delete { .. } | Cmd::Follow { .. } => {
                    unreachable!("shutdown, deletion and follow are never batched")
                }
            };
            replies.push(reply);
        }

        let encoded: Vec<bytes::Bytes> = events.iter().map(|e| EncodedEvent::of(e).bytes).collect();
        let indexed = self.index(&events, &touched);
        let changed: Vec<SessionMeta> = touched
            .iter()
            .filter(|(_, t)| t.write_meta)
            .map(|(k, _)| self.metas[k].1.clone())
            .collect();
        self.clock += 1;
        if let Some(fp) = &self.failpoint {
            fp.check(self.clock, When::Before);
        }
        let started = Instant::now();
        let mut parts = Parts {
            events,
            encoded,
            full,
            metas: changed,
            receipts,
            transcript,
            index: indexed.rows,
            replies,
        };
        let stored = self.store_unfenced(&mut parts, &mut touched);
        let Parts {
            events,
            encoded,
            replies,
            full,
            ..
        } = parts;
        drop(full);
        match stored {
            Ok(()) => {
                if let Some(fp) = &self.failpoint {
                    fp.check(self.clock, When::After);
                }
                self.shared
                    .storage_ok
                    .send_if_modified(|ok| !std::mem::replace(ok, true));
                let took = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
                self.shared.commits.fetch_add(1, Ordering::Relaxed);
                self.shared
                    .committed_events
                    .fetch_add(events.len() as u64, Ordering::Relaxed);
                self.shared
                    .last_commit_sessions
                    .store(touched.len(), Ordering::Relaxed);
                let metrics = &self.shared.metrics;
                metrics.commit_micros.observe(took);
                metrics.commit_events.observe(events.len() as u64);
                for (sid, fold) in indexed.folds {
                    if touched.contains_key(&sid) {
                        self.index.insert(sid, fold);
                    }
                }
                let wake = self.publish(&events, &encoded, &touched, now_ms);
                self.shared.published.fetch_add(1, Ordering::SeqCst);
                self.shared.resident.enforce_byte_budget();
                self.trim_metas();
                answer(events, replies, wake)
            }
            Err(e) => {
                tracing::error!(error = %e, events = events.len(), "event log commit failed");
                self.shared
                    .storage_ok
                    .send_if_modified(|ok| std::mem::replace(ok, false));
                // The seqs the batch assigned are given back by forgetting
                // the cached metas of its sessions: the next append reads
                // them from the store, which has every commit. Another
                // process sharing the store may have committed those seqs
                // (the store refused ours as duplicates): read afresh, the
                // head is theirs, never stale.
                for sid in touched.keys() {
                    self.metas.remove(sid);
                    self.index.remove(sid);
                }
                let err = LogError::from(e);
                for (tx, _, _) in replies {
                    let e = match &err {
                        LogError::Store(s) => LogError::Store(s.clone()),
                        LogError::Closed => LogError::Closed,
                    };
                    let _ = tx.send(Err(e));
                }
                0
            }
        }
    }

    /// Commits `parts` in one store transaction. A batch mixes sessions:
    /// when the store refuses some of them as fenced (this node no longer
    /// owns them: its lease lapsed, or another node took them over), their
    /// appends are answered Fenced, counted, and taken out of the batch
    /// (and of `touched` and the meta cache, so nothing of them is
    /// published), and the rest is committed again without them, so one
    /// stale session never fails the others. The store's answer for what
    /// is left.
    fn store_unfenced(
        &mut self,
        parts: &mut Parts,
        touched: &mut HashMap<String, Touched>,
    ) -> Result<(), store::StoreError> {
        loop {
            let stored = self.shared.store.commit(store::Commit {
                events: &parts.events,
                encoded: &parts.encoded,
                full: &parts.full,
                metas: &parts.metas,
                receipts: &parts.receipts,
                transcript: &parts.transcript,
                index: &parts.index,
            });
            let fenced = match stored {
                Err(store::StoreError::Fenced { sessions })
                    if sessions.iter().any(|s| touched.contains_key(s)) =>
                {
                    sessions
                }
                other => return other,
            };
            tracing::warn!(sessions = ?fenced, "fenced: this node no longer owns these sessions");
            let keep = |sid: &String| !fenced.contains(sid);
            for sid in &fenced {
                touched.remove(sid);
                self.metas.remove(sid);
            }
            let mut kept = parts.events.iter().map(|e| keep(&e.session_id));
            parts.encoded.retain(|_| kept.next().unwrap_or(false));
            parts.events.retain(|e| keep(&e.session_id));
            parts.full.retain(|e| keep(&e.session_id));
            parts.metas.retain(|m| keep(&m.session_id));
            parts.transcript.retain(|t| keep(&t.session_id));
            parts.index.retain(|r| keep(&r.session_id));
            parts
                .receipts
                .retain(|r| !fenced.iter().any(|s| s == r.session_id()));
            let (gone, kept): (Vec<_>, Vec<_>) = std::mem::take(&mut parts.replies)
                .into_iter()
                .partition(|(_, _, sid)| !keep(sid));
            parts.replies = kept;
            self.shared
                .fenced_writes
                .fetch_add(gone.len() as u64, Ordering::Relaxed);
            for (tx, _, sid) in gone {
                let _ = tx.send(Err(LogError::from(store::StoreError::Fenced {
                    sessions: vec![sid],
                })));
            }
        }
    }

    /// The session's meta (from the cache, else the store; created if
    /// new), noting the session as touched. A new session's meta is
    /// written with the batch (it creates the session); an existing one only
    /// when `write_meta` (a meta update).
    fn touch(
        &mut self,
        touched: &mut HashMap<String, Touched>,
        session_id: &str,
        now_ms: i64,
        write_meta: bool,
    ) -> Result<&mut SessionMeta, LogError> {
        if !self.metas.contains_key(session_id) {
            // Not cached: the store has it (every commit is there), unless new.
            if let Some(m) = self.shared.store.meta(session_id)? {
                self.metas.insert(session_id.to_owned(), (self.clock, m));
            }
        }
        match touched.get_mut(session_id) {
            Some(t) => t.write_meta |= write_meta,
            None => {
                let write_meta = write_meta || !self.metas.contains_key(session_id);
                let head_before = self.metas.get(session_id).map_or(0, |(_, m)| m.head_seq);
                touched.insert(
                    session_id.to_owned(),
                    Touched {
                        write_meta,
                        head_before,
                    },
                );
            }
        }
        let clock = self.clock;
        let entry = match self.metas.entry(session_id.to_owned()) {
            Entry::Occupied(o) => o.into_mut(),
            Entry::Vacant(v) => v.insert((clock, SessionMeta::new(session_id, now_ms))),
        };
        entry.0 = clock;
        Ok(&mut entry.1)
    }

    /// Keeps the meta cache within `cache_sessions`: past it, the least
    /// recently used go (down to nine tenths, so this sorts rarely).
    fn trim_metas(&mut self) {
        let cap = self.shared.opts.cache_sessions.max(1);
        if self.metas.len() <= cap {
            return;
        }
        let mut ages: Vec<(u64, String)> = self
            .metas
            .iter()
            .map(|(k, (t, _))| (*t, k.clone()))
            .collect();
        ages.sort_unstable();
        let excess = self.metas.len() - (cap - cap / 10);
        for (_, k) in ages.into_iter().take(excess) {
            self.metas.remove(&k);
            self.index.remove(&k);
        }
    }
}
