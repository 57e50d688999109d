//! The durable, append-only event log of every session.
//!
//! Rules from docs/ARCHITECTURE.md, "Invariants", shape this module:
//! - **Durable before visible.** One writer thread (`writer`) owns sequence
//!   numbers and metas. It takes every queued append (from all sessions, up to
//!   [`LogOptions::max_batch`] events), commits them in one
//!   `Durability::Immediate` transaction (group commit), and only then
//!   publishes them to the in-memory window, answers the appends and wakes
//!   subscribers. A commit writes a session's meta only when it changes.
//! - **Gapless catch-up.** [`EventLogs::subscribe`] registers for the head
//!   notification first, then replays, sends `caught_up`, then goes live
//!   (`subscribe`).
//! - **Bounded memory.** Only *resident* sessions (see [`resident`]) are in
//!   memory, each with a window of its latest events bounded by count and
//!   bytes, all windows together by a byte budget, idle sessions by an LRU
//!   cap; older reads fall through to the store. The writer keeps a bounded
//!   cache of metas and reads the rest from the store. Subscribers hold no
//!   queue: they watch the head seq and pull what they have not sent, so a
//!   slow subscriber costs a `watch::Receiver` and a cursor, never a backlog.
//! - **Following other writers.** On a store other processes write too
//!   (one with a commit feed), a tailing task ([`tail`]) brings the
//!   resident sessions forward to what they committed, through the writer
//!   thread, so subscribers see their events as they see this process's.
//! - **Bounded messages.** An event over [`LogOptions::max_event_bytes`] is
//!   stored whole beside its cut-down form ([`cut`]); the window, every
//!   read and every stream carry the cut form, History pages are bounded by
//!   bytes, and [`EventLogs::full_event`] gives the whole one back.

mod commit;
pub mod cut;
pub mod decodable;
mod failpoint;
mod frame;
mod index;
mod nodes;
mod options;
mod read;
mod resident;
mod span;
mod subscribe;
mod tail;
mod typing;
mod writer;

pub use self::commit::{Commit, MetaChange, NewEvent, Submitted};
pub use self::failpoint::FAILPOINT_ENV;
pub use self::frame::{EncodedEvent, Frame, HistoryPage};
pub use self::options::{
    DEFAULT_CACHE_SESSIONS, DEFAULT_DELTA_INTERVAL, DEFAULT_HEARTBEAT, DEFAULT_MAX_REPLAY,
    DEFAULT_TAIL_POLL, DEFAULT_WINDOW, DEFAULT_WINDOW_BYTES, DEFAULT_WINDOW_CACHE_BYTES,
    LogOptions,
};
pub use self::typing::Typing;

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use agent_harness_protocol::pb;
use futures::Stream;
use tokio::sync::{oneshot, watch};

use crate::store::{ReceiptWrite, SessionMeta, Store, StoreError};

use self::resident::{Limits, Resident, SessionLog};
use self::writer::Cmd;

/// Default History page size when the request says 0.
pub const HISTORY_DEFAULT_LIMIT: u32 = 50;
/// Largest History page the server returns.
pub const HISTORY_MAX_LIMIT: u32 = 1000;
/// Events a live subscriber that fell out of the window asks the store for
/// at once. A read may go on to the end of the stored row it stops in, up
/// to twice as many (see `Store::read_range_onward`): this bounds its
/// transient buffer.
pub const SUBSCRIBER_CHUNK: usize = 256;
/// Events a replaying subscriber asks the store for at once (it too may go
/// on to the end of a row, and it reads one such span ahead). A replay reads
/// on to its end, and each read is a read transaction and a hand-off to a
/// blocking thread and back: with spans four times larger a warm replay
/// took about a fifth less server CPU per event (BENCHMARKS.md, "Longer
/// replay spans"). A span is bounded in bytes as well, by the page a read
/// fills ([`cut::PAGE_BYTES`]), however large its events.
pub const REPLAY_CHUNK: usize = 1024;
/// Most events a subscriber that fell behind copies out of the window at
/// once. Small on purpose: every copy is its own, so with 1,000 lagging
/// subscribers chunks of [`SUBSCRIBER_CHUNK`] held ~200 MB of clones, and
/// their cache misses made catching up cost more CPU per event than
/// keeping up, so a subscriber that fell behind stayed behind
/// (BENCHMARKS.md, "Where the time goes"). Store reads keep the larger
/// chunk: there each read is a transaction.
pub const SUBSCRIBER_WINDOW_CHUNK: usize = 16;
/// Optimistic loads of a head from the store before loading under the lock
/// (see `Shared::load`).
const LOAD_RETRIES: usize = 2;

/// Errors from the log.
#[derive(Debug, thiserror::Error)]
pub enum LogError {
    /// The store failed; for an append, nothing of its batch was committed.
    #[error("storage: {0}")]
    Store(#[source] Arc<StoreError>),
    /// The log was shut down (or its writer is gone).
    #[error("event log is shut down")]
    Closed,
}

impl From<StoreError> for LogError {
    fn from(e: StoreError) -> Self {
        Self::Store(Arc::new(e))
    }
}

/// Counters for tests and benches: what the log holds in memory right now.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LogStats {
    /// Sessions resident in memory.
    pub sessions: usize,
    /// Events held in all session windows together.
    pub window_events: usize,
    /// Encoded bytes of those events.
    pub window_bytes: usize,
    /// Events (and meta changes) queued for the writer, not yet answered.
    pub queued: usize,
    /// Events fetched by subscribers but not yet yielded, over all subscribers
    /// (a span a replaying stream read ahead included).
    pub subscriber_buffered: usize,
    /// Live subscribe streams.
    pub subscribers: usize,
    /// Durable commits (group commits) since the log was opened.
    pub commits: u64,
    /// Events those commits wrote; `committed_events / commits` is the
    /// average group-commit size.
    pub committed_events: u64,
    /// Writes (a session's part of a commit, a deletion) the store refused
    /// whole since the log was opened because this node no longer owns
    /// their session (fenced: its lease lapsed, or another node took the
    /// session over).
    pub fenced_writes: u64,
    /// Stored rows a read checked decode (before sending them as they are)
    /// since the log was opened; rows a session's earlier reads found to
    /// decode are not checked again (see `SessionLog::checked`).
    pub rows_checked: u64,
}

/// State shared by the handle, the writer thread and every subscriber.
struct Shared {
    store: Arc<dyn Store>,
    opts: LogOptions,
    resident: Resident,
    /// Commits published so far: a reader that loads a head from the store
    /// installs it only if no commit was published meanwhile.
    published: AtomicU64,
    /// Set by shutdown (or when the last handle drops): ends every stream.
    /// A plain flag rather than a `CancellationToken`: every live stream
    /// checks it on every event, and the token's check takes a mutex that
    /// all streams would share (see [`Shared::close`]).
    closed: AtomicBool,
    /// See [`LogStats::subscriber_buffered`].
    buffered: AtomicUsize,
    /// See [`LogStats::subscribers`].
    subscribers: AtomicUsize,
    /// See [`LogStats::commits`].
    commits: AtomicU64,
    /// See [`LogStats::committed_events`].
    committed_events: AtomicU64,
    /// Sessions the last successful commit wrote to (see
    /// [`EventLogs::alone`]).
    last_commit_sessions: AtomicUsize,
    /// See [`LogStats::fenced_writes`].
    fenced_writes: AtomicU64,
    /// See [`LogStats::rows_checked`].
    rows_checked: AtomicU64,
    /// Whether the last commit succeeded: false from a failed commit until
    /// the next one succeeds. See [`EventLogs::storage_ok`].
    storage_ok: watch::Sender<bool>,
    /// Commit and subscriber histograms (see [`EventLogs::metrics`]).
    metrics: crate::metrics::LogMetrics,
}

impl Shared {
    /// The per-event budget, never above the ceiling.
    fn budget(&self) -> usize {
        self.opts
            .max_event_bytes
            .clamp(cut::MIN_EVENT_BYTES, cut::MAX_EVENT_BYTES_CEILING)
    }

    /// Whether the log was shut down.
    fn is_closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }

    /// Ends every stream: sets the flag, then bumps every session's head
    /// watch (without changing the head) so that waiting streams wake and
    /// see it. A stream created later sees the flag on its first step.
    fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
        for s in self.resident.all() {
            s.head.send_modify(|_| {});
        }
    }

    /// Brings a stored meta's `updated_ms` up to the last append, which
    /// the stored row does not track.
    fn refresh(&self, meta: &mut SessionMeta) {
        if let Some(s) = self.resident.get(&meta.session_id) {
            meta.updated_ms = meta.updated_ms.max(s.updated_ms.load(Ordering::Relaxed));
        }
    }

    /// The session's resident entry, loading its head from the store when
    /// it is not resident. `None` when the store has neither a meta nor
    /// events for it: then nothing is allocated, unless `create` (a
    /// Subscribe waiting for the session to appear), which makes an empty
    /// entry that lives as long as someone holds it.
    ///
    /// The store is read without holding the resident map's lock, and the
    /// result is installed only if no commit was published meanwhile (else
    /// the head read may be stale, and it is read again). After
    /// [`LOAD_RETRIES`] such races the read is done under the map's write
    /// lock, where no publish can interleave.
    async fn load(
        self: &Arc<Self>,
        session_id: &str,
        create: bool,
    ) -> Result<Option<Arc<SessionLog>>, LogError> {
        if let Some(s) = self.resident.get(session_id) {
            return Ok(Some(s));
        }
        let entry = move |meta: Option<SessionMeta>| match meta {
            Some(m) => Some(SessionLog::new(m.head_seq, true, m.updated_ms)),
            None if create => Some(SessionLog::new(0, false, 0)),
            None => None,
        };
        for _ in 0..LOAD_RETRIES {
            let seen = self.published.load(Ordering::SeqCst);
            let sid = session_id.to_owned();
            let meta = self.blocking(move |st| st.meta(&sid)).await?;
            let unchanged = || self.published.load(Ordering::SeqCst) == seen;
            if meta.is_none() && !create {
                return Ok(None);
            }
            let got = self.resident.get_or_insert(session_id, || {
                Ok::<_, StoreError>(unchanged().then(|| entry(meta)).flatten())
            })?;
            if got.is_some() {
                return Ok(got);
            }
        }
        let shared = self.clone();
        let sid = session_id.to_owned();
        tokio::task::spawn_blocking(move || {
            shared
                .resident
                .get_or_insert(&sid, || shared.store.meta(&sid).map(entry))
        })
        .await
        .map_err(|_| LogError::Closed)?
        .map_err(LogError::from)
    }

    async fn blocking<T: Send + 'static>(
        self: &Arc<Self>,
        f: impl FnOnce(&dyn Store) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, LogError> {
        let shared = self.clone();
        Ok(
            tokio::task::spawn_blocking(move || f(shared.store.as_ref()))
                .await
                .map_err(|_| LogError::Closed)??,
        )
    }
}

struct Inner {
    shared: Arc<Shared>,
    /// To the writer thread; a std channel so the writer can wait with a
    /// timeout while it lingers for a batch.
    tx: std::sync::mpsc::Sender<Cmd>,
    /// Bounds what waits for the writer: one permit per queued event (or
    /// meta change), [`LogOptions::max_queued`] in all. An append that finds
    /// the queue full waits for room (backpressure reaches the CLI through
    /// its stdout pipe) instead of growing memory.
    queue: Arc<tokio::sync::Semaphore>,
    writer: Mutex<Option<std::thread::JoinHandle<()>>>,
    /// The tailing task ([`tail`]), when the store has a commit feed. It
    /// holds a sender to the writer, so it must end for the writer to.
    tail: Mutex<Option<tokio::task::JoinHandle<()>>>,
    /// Ends the tailing task.
    stop_tail: tokio_util::sync::CancellationToken,
}

impl Drop for Inner {
    fn drop(&mut self) {
        // The last handle is gone: nobody can append any more, so end the
        // streams, and the tailing task (then the writer ends too).
        self.stop_tail.cancel();
        self.shared.close();
    }
}

/// Every session's event log. Cheap to clone (an `Arc` inside).
#[derive(Clone)]
pub struct EventLogs {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for EventLogs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventLogs")
            .field("stats", &self.stats())
            .finish()
    }
}

impl EventLogs {
    /// Starts the group-commit writer thread, and the tailing task when the
    /// store has a commit feed (other processes write it too) and this is
    /// called within a Tokio runtime. Nothing is loaded: a session's head
    /// and meta are read from the store when it is first used.
    pub fn open(store: Arc<dyn Store>, opts: LogOptions) -> Result<Self, LogError> {
        let resident = Resident::new(Limits {
            window: opts.window,
            window_bytes: opts.window_bytes.max(1),
            cache_bytes: opts.cache_bytes,
            cache_sessions: opts.cache_sessions.max(1),
        });
        let shared = Arc::new(Shared {
            store,
            opts,
            resident,
            published: AtomicU64::new(0),
            closed: AtomicBool::new(false),
            buffered: AtomicUsize::new(0),
            subscribers: AtomicUsize::new(0),
            commits: AtomicU64::new(0),
            committed_events: AtomicU64::new(0),
            last_commit_sessions: AtomicUsize::new(0),
            fenced_writes: AtomicU64::new(0),
            rows_checked: AtomicU64::new(0),
            storage_ok: watch::Sender::new(true),
            metrics: crate::metrics::LogMetrics::default(),
        });
        let (tx, rx) = std::sync::mpsc::channel();
        let writer = writer::spawn(shared.clone(), rx).map_err(|e| {
            LogError::Store(Arc::new(StoreError::Rejected(format!(
                "cannot start the log writer thread: {e}"
            ))))
        })?;
        let stop_tail = tokio_util::sync::CancellationToken::new();
        let tail = tail::spawn(shared.clone(), tx.clone(), stop_tail.clone());
        let queue = Arc::new(tokio::sync::Semaphore::new(
            shared
                .opts
                .max_queued
                .clamp(1, tokio::sync::Semaphore::MAX_PERMITS),
        ));
        Ok(Self {
            inner: Arc::new(Inner {
                shared,
                tx,
                queue,
                writer: Mutex::new(Some(writer)),
                tail: Mutex::new(tail),
                stop_tail,
            }),
        })
    }

    /// Writes `commit` to one session in ONE durable transaction: assigns
    /// its events consecutive seqs and the append time, changes the meta,
    /// writes the receipt. Resolves only after the commit, and subscribers
    /// see the events only after it too; returns the events as appended. On
    /// error nothing of it was committed and no seq was consumed. Runs on
    /// the writer thread, serialized with every other write, so a meta
    /// change never races a head update.
    pub async fn commit(
        &self,
        session_id: &str,
        commit: Commit,
    ) -> Result<Vec<pb::Event>, LogError> {
        self.submit(session_id, commit).await.await
    }

    /// Hands `commit` to the writer (once its queue has room) and returns
    /// without waiting for the commit: the [`Submitted`] resolves to what
    /// [`EventLogs::commit`] would. The writer takes its queue in order, so
    /// commits submitted one after another are committed in that order: a
    /// caller may hand over its next commit before the last is answered.
    pub async fn submit(&self, session_id: &str, commit: Commit) -> Submitted {
        if commit.is_empty() {
            return Submitted::ready(Ok(Vec::new()));
        }
        let room = match self.queue_room(commit.events.len().max(1)).await {
            Ok(room) => room,
            Err(e) => return Submitted::ready(Err(e)),
        };
        let (reply, rx) = oneshot::channel();
        let sent = self.inner.tx.send(Cmd::Commit {
            session_id: session_id.to_owned(),
            commit,
            reply,
        });
        match sent {
            Ok(()) => Submitted::waiting(room, rx),
            Err(_) => Submitted::ready(Err(LogError::Closed)),
        }
    }

    /// Deletes the receipts created before `before_ms` (Unix ms), in
    /// transactions of at most `batch` deletions; returns how many. Runs on
    /// a blocking thread beside the writer (redb serializes the two write
    /// transactions; each prune transaction is bounded by `batch`).
    pub async fn prune_receipts(&self, before_ms: i64, batch: usize) -> Result<usize, LogError> {
        let batch = batch.max(1);
        let mut total = 0;
        loop {
            let n = self
                .inner
                .shared
                .blocking(move |st| st.prune_receipts(before_ms, batch))
                .await?;
            total += n;
            if n < batch {
                return Ok(total);
            }
        }
    }

    /// Events (and meta changes) queued for the writer and not yet
    /// answered, the commits under way included.
    pub fn queued(&self) -> usize {
        let cap = self.inner.shared.opts.max_queued.max(1);
        cap.saturating_sub(self.inner.queue.available_permits())
    }

    /// Whether a caller whose commit of `mine` events is under way is the
    /// writer's only one: the last commit wrote to one session at most,
    /// and nothing else is queued. Then the writer waits for that caller
    /// between its commits, and its next commit may be handed over before
    /// this one is answered (see [`EventLogs::submit`]); with other
    /// sessions writing, the writer has their commits to do meanwhile.
    pub fn alone(&self, mine: usize) -> bool {
        self.inner
            .shared
            .last_commit_sessions
            .load(Ordering::Relaxed)
            <= 1
            && self.queued() <= mine.max(1)
    }

    /// Room for `n` more queued events (at most the whole queue, so one
    /// huge append still goes through alone), held until its reply.
    async fn queue_room(&self, n: usize) -> Result<tokio::sync::OwnedSemaphorePermit, LogError> {
        let cap = self.inner.shared.opts.max_queued.max(1);
        let n = u32::try_from(n.min(cap)).unwrap_or(u32::MAX);
        Arc::clone(&self.inner.queue)
            .acquire_many_owned(n)
            .await
            .map_err(|_| LogError::Closed)
    }

    /// Whether storage works: true until a commit fails, then false until
    /// one succeeds again. The server reports it as its health.
    pub fn storage_ok(&self) -> watch::Receiver<bool> {
        self.inner.shared.storage_ok.subscribe()
    }

    /// Streams one session: a `replay` header, the events after `after_seq`
    /// (or the tail window on reset), `caught_up` once, then live events and
    /// heartbeats. Never ends on its own; ends at [`EventLogs::shutdown`].
    /// A session with no events yet is fine: it goes live when they come
    /// (its in-memory entry lives as long as the stream). Registered for
    /// live events when this returns; the first read loads the session's
    /// head from the store when it is not in memory.
    pub async fn subscribe(
        &self,
        session_id: &str,
        after_seq: u64,
    ) -> Result<impl Stream<Item = pb::SubscribeResponse> + Send + 'static, LogError> {
        self.subscribe_with(session_id, after_seq, false).await
    }

    /// [`EventLogs::subscribe`], and with `deltas` also live typing: after
    /// `caught_up`, a snapshot of the blocks being written, then their
    /// fragments, each after every event it follows (see [`crate::partial`]).
    pub async fn subscribe_with(
        &self,
        session_id: &str,
        after_seq: u64,
        deltas: bool,
    ) -> Result<impl Stream<Item = pb::SubscribeResponse> + Send + 'static, LogError> {
        use futures::StreamExt;
        let frames = self.subscribe_frames(session_id, after_seq, deltas).await?;
        let sid = session_id.to_owned();
        Ok(frames.map(move |f| f.into_response(&sid)))
    }

    /// [`EventLogs::subscribe_with`] as the wire sends it: each event's
    /// shared bytes, encoded once at its commit, and the stream's own
    /// messages (see [`Frame`]).
    pub async fn subscribe_frames(
        &self,
        session_id: &str,
        after_seq: u64,
        deltas: bool,
    ) -> Result<impl Stream<Item = Frame> + Send + 'static, LogError> {
        let shared = self.inner.shared.clone();
        let session = shared
            .load(session_id, true)
            .await?
            .ok_or(LogError::Closed)?;
        Ok(subscribe::stream(
            shared, session, session_id, after_seq, deltas,
        ))
    }

    /// Deletes a session: everything the store holds of it (events, whole
    /// forms, meta, receipts, its rows of the conversation index), with
    /// `receipt` (the deleting call's own) in the same transaction, after
    /// every append queued before it; then forgets it in memory. Its open
    /// Subscribe streams send the events they still hold in memory and
    /// end. False when nothing was stored. The caller makes sure nothing
    /// appends to the session meanwhile (a later append creates it anew).
    pub async fn delete_session(
        &self,
        session_id: &str,
        receipt: Option<ReceiptWrite>,
    ) -> Result<bool, LogError> {
        let _room = self.queue_room(1).await?;
        let (reply, rx) = oneshot::channel();
        self.inner
            .tx
            .send(Cmd::Delete {
                session_id: session_id.to_owned(),
                receipt,
                reply,
            })
            .map_err(|_| LogError::Closed)?;
        rx.await.map_err(|_| LogError::Closed)?
    }

    /// True once the log was shut down: its streams have ended for that
    /// reason (and not because their session was deleted).
    pub fn is_closed(&self) -> bool {
        self.inner.shared.is_closed()
    }

    /// Commits every append queued so far, stops the writer, and ends every
    /// subscribe stream. Later appends fail with [`LogError::Closed`].
    pub async fn shutdown(&self) {
        self.inner.stop_tail.cancel();
        let tail = self
            .inner
            .tail
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let Some(t) = tail {
            let _ = t.await;
        }
        let (reply, rx) = oneshot::channel();
        if self.inner.tx.send(Cmd::Shutdown { reply }).is_ok() {
            let _ = rx.await;
        }
        self.inner.shared.close();
        let handle = self
            .inner
            .writer
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let Some(h) = handle {
            // The writer has already replied; joining only waits for it to drop its state.
            let _ = tokio::task::spawn_blocking(move || h.join()).await;
        }
    }

    /// The histograms the writer and the subscribe streams fill: commit
    /// sizes and durations, subscriber lag (served at `/metrics`).
    pub fn metrics(&self) -> &crate::metrics::LogMetrics {
        &self.inner.shared.metrics
    }

    /// What the log holds in memory right now (tests and benches).
    pub fn stats(&self) -> LogStats {
        let shared = &self.inner.shared;
        let (sessions, window_events, window_bytes) = shared.resident.stats();
        LogStats {
            sessions,
            window_events,
            window_bytes,
            queued: self.queued(),
            subscriber_buffered: shared.buffered.load(Ordering::Relaxed),
            subscribers: shared.subscribers.load(Ordering::Relaxed),
            commits: shared.commits.load(Ordering::Relaxed),
            committed_events: shared.committed_events.load(Ordering::Relaxed),
            fenced_writes: shared.fenced_writes.load(Ordering::Relaxed),
            rows_checked: shared.rows_checked.load(Ordering::Relaxed),
        }
    }
}
