//! The durable, append-only event log of every session.
//!
//! Three rules from DESIGN §4 shape this module:
//! - **Durable before visible.** One writer thread (`writer`) owns sequence
//!   numbers and metas. It takes every queued append (from all sessions, up to
//!   [`LogOptions::max_batch`] events), commits them in one
//!   `Durability::Immediate` transaction (group commit), and only then
//!   publishes them to the in-memory window, answers the appends and wakes
//!   subscribers. A commit writes a session's meta only when it changes.
//! - **Gapless catch-up.** [`EventLogs::subscribe`] registers for the head
//!   notification first, then replays, sends `caught_up`, then goes live
//!   (`subscribe`).
//! - **Bounded memory.** Each session keeps only the latest
//!   [`LogOptions::window`] events in memory; older reads fall through to the
//!   store. Subscribers hold no queue: they watch the head seq and pull what
//!   they have not sent, so a slow subscriber costs a `watch::Receiver` and
//!   a cursor, never a backlog.

mod subscribe;
mod writer;

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use agent_harness_client::pb;
use futures::Stream;
use tokio::sync::{oneshot, watch};

use crate::store::{Receipt, ReceiptWrite, SessionMeta, Store, StoreError};

use self::writer::Cmd;

/// Default History page size when the request says 0.
pub const HISTORY_DEFAULT_LIMIT: u32 = 50;
/// Largest History page the server returns.
pub const HISTORY_MAX_LIMIT: u32 = 1000;
/// Most events a subscriber fetches at once; bounds its transient buffer.
pub const SUBSCRIBER_CHUNK: usize = 256;

/// Tuning knobs of the log.
#[derive(Debug, Clone)]
pub struct LogOptions {
    /// Latest events kept in memory per session (2,000); older reads go to the store.
    pub window: usize,
    /// Largest gap Subscribe replays contiguously (10,000); beyond it the
    /// stream resets to the tail window.
    pub max_replay: u64,
    /// Heartbeat interval on an idle live stream (15 s).
    pub heartbeat: Duration,
    /// Most events in one group commit (10,000); bounds a transaction's size.
    pub max_batch: usize,
}

impl Default for LogOptions {
    fn default() -> Self {
        Self {
            window: 2000,
            max_replay: 10_000,
            heartbeat: Duration::from_secs(15),
            max_batch: 10_000,
        }
    }
}

/// An event to append; the log assigns `seq`, `session_id` and `time`.
#[derive(Debug, Clone)]
pub struct NewEvent {
    /// The run it belongs to ("" for none).
    pub run_id: String,
    /// What happened.
    pub payload: pb::event::Payload,
    /// The CLI's original stdout line ("" for harness-made events).
    pub cli_line: String,
}

/// A change to a session's meta, committed with an append
/// ([`EventLogs::commit`]); it cannot change the session id, the head or
/// the creation time.
pub type MetaChange = Box<dyn FnOnce(&mut SessionMeta) + Send + 'static>;

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
    /// Sessions known in memory.
    pub sessions: usize,
    /// Events held in all session windows together.
    pub window_events: usize,
    /// Events fetched by subscribers but not yet yielded, over all subscribers.
    pub subscriber_buffered: usize,
    /// Live subscribe streams.
    pub subscribers: usize,
    /// Durable commits (group commits) since the log was opened.
    pub commits: u64,
    /// Events those commits wrote; `committed_events / commits` is the
    /// average group-commit size.
    pub committed_events: u64,
}

/// The in-memory face of one session.
struct SessionLog {
    /// Committed head seq. Subscribers hold receivers; the writer sends
    /// after the commit and after the window was updated.
    head: watch::Sender<u64>,
    /// The latest committed events, contiguous, ending at the head (may be
    /// empty after a restart: then everything is read from the store).
    /// A `RwLock`: a live event fans out to every subscriber at once, and
    /// they all read it concurrently.
    window: RwLock<VecDeque<pb::Event>>,
    /// Whether the session has a stored meta (so it "exists" without events).
    has_meta: AtomicBool,
    /// Last append or meta change, Unix ms (the stored meta is not rewritten
    /// per append, so this is where the append time lives).
    updated_ms: AtomicI64,
}

impl SessionLog {
    fn new(head: u64, has_meta: bool, updated_ms: i64) -> Self {
        Self {
            head: watch::Sender::new(head),
            window: RwLock::new(VecDeque::new()),
            has_meta: AtomicBool::new(has_meta),
            updated_ms: AtomicI64::new(updated_ms),
        }
    }

    fn window(&self) -> std::sync::RwLockReadGuard<'_, VecDeque<pb::Event>> {
        self.window.read().unwrap_or_else(|p| p.into_inner())
    }

    fn window_mut(&self) -> std::sync::RwLockWriteGuard<'_, VecDeque<pb::Event>> {
        self.window.write().unwrap_or_else(|p| p.into_inner())
    }

    /// The event `seq`, if the window holds it.
    fn window_get(&self, seq: u64) -> Option<pb::Event> {
        let w = self.window();
        let front = w.front()?.seq;
        let i = usize::try_from(seq.checked_sub(front)?).ok()?;
        w.get(i).cloned()
    }

    /// Events `after+1 ..` (at most `max`) if the window still covers `after+1`.
    fn window_span(&self, after: u64, max: usize) -> Option<Vec<pb::Event>> {
        let w = self.window();
        let front = w.front()?.seq;
        let back = w.back()?.seq;
        if front > after.saturating_add(1) || back <= after {
            return None;
        }
        let skip = usize::try_from(after + 1 - front).ok()?;
        Some(w.iter().skip(skip).take(max).cloned().collect())
    }
}

/// State shared by the handle, the writer thread and every subscriber.
struct Shared {
    store: Arc<dyn Store>,
    opts: LogOptions,
    sessions: RwLock<HashMap<String, Arc<SessionLog>>>,
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
    /// Whether the last commit succeeded: false from a failed commit until
    /// the next one succeeds. See [`EventLogs::storage_ok`].
    storage_ok: watch::Sender<bool>,
}

impl Shared {
    /// Whether the log was shut down.
    fn is_closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }

    /// Ends every stream: sets the flag, then bumps every session's head
    /// watch (without changing the head) so that waiting streams wake and
    /// see it. A stream created later sees the flag on its first step.
    fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
        let sessions = self.sessions.read().unwrap_or_else(|p| p.into_inner());
        for s in sessions.values() {
            s.head.send_modify(|_| {});
        }
    }

    /// Brings a stored meta's `updated_ms` up to the last append, which
    /// the stored row does not track.
    fn refresh(&self, meta: &mut SessionMeta) {
        if let Some(s) = self.get(&meta.session_id) {
            meta.updated_ms = meta.updated_ms.max(s.updated_ms.load(Ordering::Relaxed));
        }
    }

    fn get(&self, session_id: &str) -> Option<Arc<SessionLog>> {
        self.sessions
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(session_id)
            .cloned()
    }

    fn get_or_create(&self, session_id: &str) -> Arc<SessionLog> {
        if let Some(s) = self.get(session_id) {
            return s;
        }
        self.sessions
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .entry(session_id.to_owned())
            .or_insert_with(|| Arc::new(SessionLog::new(0, false, 0)))
            .clone()
    }

    /// Events `after+1 ..= upto` (at most `max`): from the window when it
    /// covers them, else from the store on a blocking thread.
    async fn read_span(
        self: &Arc<Self>,
        session_id: &str,
        session: Option<&SessionLog>,
        after: u64,
        upto: u64,
        max: usize,
    ) -> Result<Vec<pb::Event>, LogError> {
        if upto <= after {
            return Ok(Vec::new());
        }
        let want = usize::try_from(upto - after).unwrap_or(usize::MAX).min(max);
        if let Some(mut evs) = session.and_then(|s| s.window_span(after, want)) {
            evs.retain(|e| e.seq <= upto);
            return Ok(evs);
        }
        let shared = self.clone();
        let sid = session_id.to_owned();
        let mut evs =
            tokio::task::spawn_blocking(move || shared.store.read_range(&sid, after, want))
                .await
                .map_err(|_| LogError::Closed)??;
        evs.retain(|e| e.seq <= upto);
        Ok(evs)
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
    writer: Mutex<Option<std::thread::JoinHandle<()>>>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        // The last handle is gone: nobody can append any more, so end the streams.
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
    /// Loads every session's meta and head (the store derives the head from
    /// the events table) and the time of its last event, and starts the
    /// group-commit writer thread.
    pub fn open(store: Arc<dyn Store>, opts: LogOptions) -> Result<Self, LogError> {
        let metas = store.sessions()?;
        let mut sessions = HashMap::with_capacity(metas.len());
        let mut by_id = HashMap::with_capacity(metas.len());
        for mut m in metas {
            if m.head_seq > 0 {
                // Appends do not rewrite the meta: the last append time is
                // the last event's time.
                let last = store.read_before(&m.session_id, u64::MAX, 1)?;
                if let Some(t) = last.first().and_then(|e| e.time) {
                    let ms = t.seconds.saturating_mul(1000) + i64::from(t.nanos / 1_000_000);
                    m.updated_ms = m.updated_ms.max(ms);
                }
            }
            sessions.insert(
                m.session_id.clone(),
                Arc::new(SessionLog::new(m.head_seq, true, m.updated_ms)),
            );
            by_id.insert(m.session_id.clone(), m);
        }
        let shared = Arc::new(Shared {
            store,
            opts,
            sessions: RwLock::new(sessions),
            closed: AtomicBool::new(false),
            buffered: AtomicUsize::new(0),
            subscribers: AtomicUsize::new(0),
            commits: AtomicU64::new(0),
            committed_events: AtomicU64::new(0),
            storage_ok: watch::Sender::new(true),
        });
        let (tx, rx) = std::sync::mpsc::channel();
        let writer = writer::spawn(shared.clone(), rx, by_id).map_err(|e| {
            LogError::Store(Arc::new(StoreError::Rejected(format!(
                "cannot start the log writer thread: {e}"
            ))))
        })?;
        Ok(Self {
            inner: Arc::new(Inner {
                shared,
                tx,
                writer: Mutex::new(Some(writer)),
            }),
        })
    }

    /// Appends `events` to one session. Assigns consecutive seqs and the
    /// append time; resolves only after the durable commit, and subscribers
    /// see the events only after that commit too. On error nothing of the
    /// call was committed and no seq was consumed.
    pub async fn append(
        &self,
        session_id: &str,
        events: Vec<NewEvent>,
    ) -> Result<Vec<pb::Event>, LogError> {
        if events.is_empty() {
            return Ok(Vec::new());
        }
        self.send_append(session_id, events, None, None).await
    }

    /// Appends `events` and changes the session's meta in ONE commit: after
    /// a crash either both are there or neither (e.g. a `run_end` and the
    /// clearing of the pid it ended). Otherwise as [`EventLogs::append`] and
    /// [`EventLogs::update_meta`]; with no events it is a meta update.
    pub async fn append_with_meta(
        &self,
        session_id: &str,
        events: Vec<NewEvent>,
        f: impl FnOnce(&mut SessionMeta) + Send + 'static,
    ) -> Result<Vec<pb::Event>, LogError> {
        self.send_append(session_id, events, Some(Box::new(f)), None)
            .await
    }

    /// Appends `events`, changes the meta (when `meta` is given) and writes
    /// `receipt` (when given), all in ONE commit: a keyed call's receipt is
    /// durable exactly when the events it appended are. With no events and
    /// no meta change it commits the receipt alone (the session is not
    /// touched); with nothing at all it does nothing. Otherwise as
    /// [`EventLogs::append_with_meta`].
    pub async fn commit(
        &self,
        session_id: &str,
        events: Vec<NewEvent>,
        meta: Option<MetaChange>,
        receipt: Option<ReceiptWrite>,
    ) -> Result<Vec<pb::Event>, LogError> {
        if events.is_empty() && meta.is_none() && receipt.is_none() {
            return Ok(Vec::new());
        }
        self.send_append(session_id, events, meta, receipt).await
    }

    /// The stored receipt of `(session_id, key)`, however old.
    pub async fn receipt(&self, session_id: &str, key: &str) -> Result<Option<Receipt>, LogError> {
        let (sid, key) = (session_id.to_owned(), key.to_owned());
        self.inner
            .shared
            .blocking(move |st| st.receipt(&sid, &key))
            .await
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

    /// How many receipts the store holds (tests, stats).
    pub async fn receipt_count(&self) -> Result<usize, LogError> {
        self.inner.shared.blocking(|st| st.receipt_count()).await
    }

    async fn send_append(
        &self,
        session_id: &str,
        events: Vec<NewEvent>,
        meta: Option<writer::MetaFn>,
        receipt: Option<ReceiptWrite>,
    ) -> Result<Vec<pb::Event>, LogError> {
        let (reply, rx) = oneshot::channel();
        self.inner
            .tx
            .send(Cmd::Append {
                session_id: session_id.to_owned(),
                events,
                meta,
                receipt,
                reply,
            })
            .map_err(|_| LogError::Closed)?;
        rx.await.map_err(|_| LogError::Closed)?
    }

    /// Whether storage works: true until a commit fails, then false until
    /// one succeeds again. The server reports it as its health.
    pub fn storage_ok(&self) -> watch::Receiver<bool> {
        self.inner.shared.storage_ok.subscribe()
    }

    /// Streams one session: a `replay` header, the events after `after_seq`
    /// (or the tail window on reset), `caught_up` once, then live events and
    /// heartbeats. Never ends on its own; ends at [`EventLogs::shutdown`].
    /// A session with no events yet is fine: it goes live when they come.
    pub fn subscribe(
        &self,
        session_id: &str,
        after_seq: u64,
    ) -> impl Stream<Item = pb::SubscribeResponse> + Send + 'static {
        subscribe::stream(self.inner.shared.clone(), session_id, after_seq)
    }

    /// A History page: the newest `limit` events with `seq < before_seq`,
    /// oldest first, and whether older ones exist. `before_seq == 0` (or past
    /// the head) means from the tail; `limit == 0` means 50; capped at 1000.
    pub async fn history(
        &self,
        session_id: &str,
        before_seq: u64,
        limit: u32,
    ) -> Result<(Vec<pb::Event>, bool), LogError> {
        let limit = match limit {
            0 => HISTORY_DEFAULT_LIMIT,
            l => l.min(HISTORY_MAX_LIMIT),
        } as u64;
        let shared = &self.inner.shared;
        let session = shared.get(session_id);
        let head = session.as_ref().map_or(0, |s| *s.head.borrow());
        let before = if before_seq == 0 || before_seq > head {
            head + 1
        } else {
            before_seq
        };
        if before <= 1 {
            return Ok((Vec::new(), false));
        }
        let first = before.saturating_sub(limit).max(1);
        let window_hit = session
            .as_deref()
            .and_then(|s| s.window_span(first - 1, (before - first) as usize));
        let events = match window_hit {
            Some(evs) if evs.first().map(|e| e.seq) == Some(first) => evs,
            _ => {
                let sid = session_id.to_owned();
                shared
                    .blocking(move |st| st.read_before(&sid, before, limit as usize))
                    .await?
            }
        };
        let has_more = events.first().is_some_and(|e| e.seq > 1);
        Ok((events, has_more))
    }

    /// Every committed event of a session, oldest first (for derive on
    /// GetSession and for recovery; may be large).
    pub async fn read_all(&self, session_id: &str) -> Result<Vec<pb::Event>, LogError> {
        let sid = session_id.to_owned();
        self.inner
            .shared
            .blocking(move |st| st.read_range(&sid, 0, usize::MAX))
            .await
    }

    /// The session's committed head seq (0 when it has no events).
    pub fn head_seq(&self, session_id: &str) -> u64 {
        self.inner
            .shared
            .get(session_id)
            .map_or(0, |s| *s.head.borrow())
    }

    /// Whether the session has any event or a stored meta.
    pub fn exists(&self, session_id: &str) -> bool {
        self.inner
            .shared
            .get(session_id)
            .is_some_and(|s| *s.head.borrow() > 0 || s.has_meta.load(Ordering::Acquire))
    }

    /// Every stored session's meta, ordered by session id.
    pub async fn sessions(&self) -> Result<Vec<SessionMeta>, LogError> {
        let mut metas = self.inner.shared.blocking(|st| st.sessions()).await?;
        for m in &mut metas {
            self.inner.shared.refresh(m);
        }
        Ok(metas)
    }

    /// One session's stored meta.
    pub async fn meta(&self, session_id: &str) -> Result<Option<SessionMeta>, LogError> {
        let sid = session_id.to_owned();
        let mut meta = self.inner.shared.blocking(move |st| st.meta(&sid)).await?;
        if let Some(m) = meta.as_mut() {
            self.inner.shared.refresh(m);
        }
        Ok(meta)
    }

    /// Changes a session's meta durably (creating it if absent), e.g. the
    /// resume id or the pid + start time of the live process. Runs on the
    /// writer thread, serialized with appends, so it never races a head
    /// update; `f` cannot change `session_id`, `head_seq` or `created_ms`.
    pub async fn update_meta(
        &self,
        session_id: &str,
        f: impl FnOnce(&mut SessionMeta) + Send + 'static,
    ) -> Result<(), LogError> {
        let (reply, rx) = oneshot::channel();
        self.inner
            .tx
            .send(Cmd::Meta {
                session_id: session_id.to_owned(),
                f: Box::new(f),
                reply,
            })
            .map_err(|_| LogError::Closed)?;
        rx.await.map_err(|_| LogError::Closed)?
    }

    /// Commits every append queued so far, stops the writer, and ends every
    /// subscribe stream. Later appends fail with [`LogError::Closed`].
    pub async fn shutdown(&self) {
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

    /// What the log holds in memory right now (tests and benches).
    pub fn stats(&self) -> LogStats {
        let shared = &self.inner.shared;
        let sessions = shared.sessions.read().unwrap_or_else(|p| p.into_inner());
        LogStats {
            sessions: sessions.len(),
            window_events: sessions.values().map(|s| s.window().len()).sum(),
            subscriber_buffered: shared.buffered.load(Ordering::Relaxed),
            subscribers: shared.subscribers.load(Ordering::Relaxed),
            commits: shared.commits.load(Ordering::Relaxed),
            committed_events: shared.committed_events.load(Ordering::Relaxed),
        }
    }
}
