//! Durable storage behind the event log: a small synchronous trait with an
//! in-memory implementation (tests, benches), a redb one (the server's
//! default, one file) and a PostgreSQL one (`--store-url`, a database
//! several servers can share).
//!
//! The trait is deliberately narrow: the [`crate::log`] layer owns sequence
//! numbers, windows and subscribers, and only asks storage to commit a batch
//! atomically and to read ranges back. Besides events and metas it keeps the
//! receipts of keyed calls ([`receipt`]), committed in the same transaction
//! as the events of their call, and an index of which session each CLI
//! conversation belongs to ([`conversations`]), committed with the event
//! that names it, and the CLI's own record of each conversation
//! ([`transcript`]), committed with the events of the same stdout batch
//! and never a log event, and the session index ([`index`]): one row per
//! session of what ListSessions filters and sorts on, committed with the
//! events it reflects. Every implementation passes the same contract
//! suite (`server/tests/log_store/store_contract.rs`).

pub mod conversations;
pub mod index;
mod memory;
pub mod ownership;
mod postgres;
pub mod receipt;
mod redb;
pub mod transcript;

pub use self::index::{IndexFold, IndexRow, ListPage, ListQuery, Order, Position};
pub use self::memory::MemoryStore;
pub use self::ownership::{Claim, Joined};
pub use self::postgres::{PostgresStore, probe as probe_postgres, redact as redact_store_url};
pub use self::receipt::{Answer, Receipt, ReceiptWrite};
pub use self::redb::{DEFAULT_PAGE_CACHE_BYTES, REDB_FORMAT, RedbStore};
pub use self::transcript::TranscriptEntry;

use std::collections::BTreeMap;

use agent_harness_protocol::pb;
use bytes::Bytes;
use serde::{Deserialize, Serialize};

/// What the server remembers about a session besides its events: only
/// what the log cannot say (the process to kill after a crash, the env
/// values a respawn needs). What the log says (the resume id, the last
/// run's cwd) derive reads from the log; rows written when the meta kept
/// copies of them still load, the copies ignored.
///
/// Written when it really changes (the session's first append, or a meta
/// update), not on every append: a commit that touches 100 sessions would
/// otherwise rewrite 100 meta rows. `head_seq` is therefore never taken from
/// the stored row: every [`Store`] fills it from the events table (the last
/// stored seq of the session) when it returns a meta, so it can never
/// disagree with the events after a crash.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionMeta {
    /// The session id (the key).
    pub session_id: String,
    /// Highest committed seq (0 = no events yet). On read, derived from the
    /// events table; the value written is ignored.
    pub head_seq: u64,
    /// Creation time, Unix milliseconds.
    pub created_ms: i64,
    /// Last change, Unix milliseconds. The stored row has the last meta
    /// write; [`crate::log::EventLogs`] reports the later of that and the
    /// last append.
    pub updated_ms: i64,
    /// Pid of the live CLI process group leader, so recovery can kill an orphan.
    pub pid: Option<u32>,
    /// Start time of that pid (clock ticks since boot), so a reused pid is never hit.
    pub pid_start_time: Option<u64>,
    /// The environment a client gave the last run that spawned (`StartConfig.env`),
    /// names and values sealed with the server's secrets key
    /// ([`crate::secrets`]): never in clear in the store, nor in the event log
    /// (whose `run_start` records the names only). Kept so a Send that
    /// respawns the session (even after a server restart) starts it with the
    /// same variables. Never sent to a client.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sealed_env: Option<String>,
    /// The same in clear, as rows written before values were sealed hold it:
    /// read for the session's next respawn, never written again.
    #[serde(default, rename = "env", skip_serializing)]
    pub legacy_env: BTreeMap<String, String>,
}

impl SessionMeta {
    /// A fresh meta for a session that has nothing yet.
    pub fn new(session_id: &str, now_ms: i64) -> Self {
        Self {
            session_id: session_id.to_owned(),
            created_ms: now_ms,
            updated_ms: now_ms,
            ..Self::default()
        }
    }

    /// Forgets the recorded process (its run has ended; recovery must not
    /// look for it).
    pub fn forget_process(&mut self) {
        self.pid = None;
        self.pid_start_time = None;
    }
}

/// Errors from a [`Store`].
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The redb database failed (I/O, corruption, transaction).
    #[error("storage: {0}")]
    Redb(#[from] ::redb::Error),
    /// The PostgreSQL database failed (unreachable, restarted, a statement
    /// refused), or a store URL is bad; never holds a password.
    #[error("database: {0}")]
    Postgres(String),
    /// An injected fault (crash tests) or an invariant the caller broke.
    #[error("{0}")]
    Rejected(String),
    /// The store was written in a format this binary does not read (a
    /// newer release wrote it); nothing was changed. The text names both
    /// formats and what to do.
    #[error("{0}")]
    Format(String),
    /// This node may no longer write to these sessions: its lease lapsed,
    /// it rejoined under a new epoch, or another node claimed them (see
    /// [`ownership`]). Nothing of them was written.
    #[error("fenced: this node no longer owns session(s) {}", sessions.join(", "))]
    Fenced {
        /// The sessions refused.
        sessions: Vec<String>,
    },
}

/// What one durable transaction writes (see [`Store::commit`]).
#[derive(Debug, Clone, Copy, Default)]
pub struct Commit<'a> {
    /// The events as they are streamed: one over the per-event budget in its
    /// cut-down form, marked `truncated`.
    pub events: &'a [pb::Event],
    /// The encoding of each of `events`, in the same order, when the caller
    /// has it (the log encodes each event once, for its window too): the
    /// rows' values as they are. Empty: the store encodes `events`.
    pub encoded: &'a [Bytes],
    /// The whole form of each cut event of `events` (same session and seq),
    /// kept for [`Store::read_full`].
    pub full: &'a [pb::Event],
    /// The metas that changed (usually none).
    pub metas: &'a [SessionMeta],
    /// Receipts of the keyed calls whose events these are (usually none).
    pub receipts: &'a [ReceiptWrite],
    /// Lines of the CLI's conversation files, appended after those stored
    /// for their session, in order (usually none).
    pub transcript: &'a [TranscriptEntry],
    /// The index rows of the sessions these events move (see [`index`]),
    /// replacing their stored rows: a commit holds its sessions' newest
    /// events, so its rows are never behind the stored ones.
    pub index: &'a [IndexRow],
}

/// What a store tells the logs reading it about commits (see
/// [`Store::commit_notices`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CommitNotice {
    /// These sessions have new committed events (written by any process
    /// sharing the store, this one included).
    Sessions(Vec<String>),
    /// Notices may have been missed (the feed reconnected or fell behind):
    /// re-check every followed session.
    Lost,
}

/// Durable storage for every session's events and meta.
///
/// Synchronous on purpose: redb is synchronous, and the log calls it from
/// its writer thread or `spawn_blocking`, never from an async task directly.
pub trait Store: Send + Sync + 'static {
    /// Commits one [`Commit`] (events of any sessions, the whole form of
    /// those cut down, the metas that changed, the receipts of the keyed
    /// calls whose events these are) in ONE atomic, durable transaction:
    /// after `Ok` everything survives a crash, after an error or a crash
    /// nothing of it is visible.
    fn commit(&self, commit: Commit<'_>) -> Result<(), StoreError>;
    /// [`Store::commit`] of events stored as given (none cut down) and
    /// metas, without receipts.
    fn append_batch(&self, batch: &[pb::Event], metas: &[SessionMeta]) -> Result<(), StoreError> {
        self.commit(Commit {
            events: batch,
            metas,
            ..Commit::default()
        })
    }
    /// The receipt of `(session_id, key)`, however old (the caller applies
    /// the TTL: one not yet pruned may be expired).
    fn receipt(&self, session_id: &str, key: &str) -> Result<Option<Receipt>, StoreError>;
    /// Deletes up to `limit` receipts created before `before_ms` (Unix ms),
    /// oldest first, durably; returns how many it deleted.
    fn prune_receipts(&self, before_ms: i64, limit: usize) -> Result<usize, StoreError>;
    /// How many receipts are stored (tests, stats).
    fn receipt_count(&self) -> Result<usize, StoreError>;
    /// Events with `seq > after_seq`, ascending, at most `limit`.
    fn read_range(
        &self,
        session_id: &str,
        after_seq: u64,
        limit: usize,
    ) -> Result<Vec<pb::Event>, StoreError> {
        self.read_range_within(session_id, after_seq, limit, usize::MAX, usize::MAX)
    }
    /// The newest `limit` events with `seq < before_seq`, returned oldest-first.
    fn read_before(
        &self,
        session_id: &str,
        before_seq: u64,
        limit: usize,
    ) -> Result<Vec<pb::Event>, StoreError> {
        self.read_before_within(session_id, before_seq, limit, usize::MAX, usize::MAX)
    }
    /// As [`Store::read_range`], stopping once the events taken hold more
    /// than `max_bytes` of encoded events, each counted as at most
    /// `event_cap` bytes (the size it is streamed at); always at least one.
    /// A read of large events thus stays bounded in memory.
    fn read_range_within(
        &self,
        session_id: &str,
        after_seq: u64,
        limit: usize,
        max_bytes: usize,
        event_cap: usize,
    ) -> Result<Vec<pb::Event>, StoreError> {
        let rows = self.read_range_raw(session_id, after_seq, limit, max_bytes, event_cap)?;
        Ok(decode_rows(session_id, rows))
    }
    /// As [`Store::read_before`], keeping the newest events that hold at
    /// most `max_bytes` of encoded events, counted as in
    /// [`Store::read_range_within`] (always at least one).
    fn read_before_within(
        &self,
        session_id: &str,
        before_seq: u64,
        limit: usize,
        max_bytes: usize,
        event_cap: usize,
    ) -> Result<Vec<pb::Event>, StoreError> {
        let rows = self.read_before_raw(session_id, before_seq, limit, max_bytes, event_cap)?;
        Ok(decode_rows(session_id, rows))
    }
    /// [`Store::read_range_within`] as the rows hold the events: each
    /// event's seq and its stored bytes (the streamed form, encoded),
    /// undecoded. The streams send these bytes as they are.
    fn read_range_raw(
        &self,
        session_id: &str,
        after_seq: u64,
        limit: usize,
        max_bytes: usize,
        event_cap: usize,
    ) -> Result<Vec<RawEvent>, StoreError>;
    /// [`Store::read_range_raw`] for a reader that goes on reading from
    /// where this read ends (a subscriber catching up): a store that keeps
    /// several events per row may return more than `limit`, to the end of
    /// the row the `limit`-th is in (still within `max_bytes`, and at most
    /// twice `limit`), so that the next read starts at a row's first event
    /// instead of reading that row again. Stores of one event per row read
    /// as [`Store::read_range_raw`].
    fn read_range_onward(
        &self,
        session_id: &str,
        after_seq: u64,
        limit: usize,
        max_bytes: usize,
        event_cap: usize,
    ) -> Result<Vec<RawEvent>, StoreError> {
        self.read_range_raw(session_id, after_seq, limit, max_bytes, event_cap)
    }
    /// [`Store::read_before_within`] as the rows hold the events (see
    /// [`Store::read_range_raw`]), oldest first.
    fn read_before_raw(
        &self,
        session_id: &str,
        before_seq: u64,
        limit: usize,
        max_bytes: usize,
        event_cap: usize,
    ) -> Result<Vec<RawEvent>, StoreError>;
    /// The whole form of event `seq`: as appended in `full` when it was cut
    /// down, else the stored event. `None` when there is no such event.
    fn read_full(&self, session_id: &str, seq: u64) -> Result<Option<pb::Event>, StoreError>;
    /// The whole form of event `seq` as stored, protobuf-encoded: for an
    /// event read back as `unreadable`, the bytes that could not be decoded.
    fn read_full_bytes(&self, session_id: &str, seq: u64) -> Result<Option<Vec<u8>>, StoreError> {
        use prost::Message;
        Ok(self.read_full(session_id, seq)?.map(|e| e.encode_to_vec()))
    }
    /// One session's meta, if it has one, with `head_seq` = the last stored
    /// seq of the session (0 without events) and `updated_ms` = the later of
    /// the row's and the last stored event's time.
    fn meta(&self, session_id: &str) -> Result<Option<SessionMeta>, StoreError>;
    /// Writes one meta durably (its own transaction).
    fn put_meta(&self, meta: &SessionMeta) -> Result<(), StoreError>;
    /// A page of metas ordered by session id: the first `limit` with an id
    /// after `after` (from the first when `None`), each completed as in
    /// [`Store::meta`].
    fn sessions(&self, after: Option<&str>, limit: usize) -> Result<Vec<SessionMeta>, StoreError>;
    /// The sessions whose log names CLI conversation `resume_id` (see
    /// [`conversations`]), ordered by id.
    fn conversation_sessions(&self, resume_id: &str) -> Result<Vec<String>, StoreError>;
    /// The transcript entries stored for `session_id`, in the order
    /// committed (see [`transcript`]).
    fn transcript(&self, session_id: &str) -> Result<Vec<TranscriptEntry>, StoreError>;
    /// Deletes everything stored of one session (its events and their
    /// whole forms, its meta, its receipts, its rows of the conversation
    /// index, its transcript entries, its index row) and writes `receipt` (the deleting call's own), in ONE
    /// durable transaction. False when the session had nothing stored.
    /// Fenced as a commit is (see [`ownership`]): once this node has
    /// joined, [`StoreError::Fenced`] and nothing deleted unless its lease
    /// is live and it owns the session under its epoch.
    fn delete_session(
        &self,
        session_id: &str,
        receipt: Option<&ReceiptWrite>,
    ) -> Result<bool, StoreError>;
    /// How much is stored: sessions (metas), events, and the bytes of the
    /// stored values (events, whole forms, metas, receipts). Walks the
    /// tables: for tests and stats, not for every call.
    fn usage(&self) -> Result<StoreUsage, StoreError>;
    /// How many sessions have a meta (cheap: no walk).
    fn session_count(&self) -> Result<u64, StoreError>;
    /// The index rows of `session_ids`, in the order given: `None` for a
    /// session without one (or whose row does not decode, or is of another
    /// [`index::INDEX_VERSION`]).
    fn index_rows(&self, session_ids: &[String]) -> Result<Vec<Option<IndexRow>>, StoreError>;
    /// Writes index rows durably (one transaction; a rebuild's), each
    /// replacing the stored row unless that one reflects a later head.
    fn put_index(&self, rows: &[IndexRow]) -> Result<(), StoreError>;
    /// A page of the index: the rows passing the query's filters, in its
    /// order, after its place, at most its limit; with how many pass.
    fn list_index(&self, query: &ListQuery) -> Result<ListPage, StoreError>;
    /// A feed of the commits made by every process sharing this store, for
    /// tailing; `None` for a store only this process writes (redb locks its
    /// file). A receiver that lags (`RecvError::Lagged`) must treat it as
    /// [`CommitNotice::Lost`].
    fn commit_notices(&self) -> Option<tokio::sync::broadcast::Receiver<CommitNotice>> {
        None
    }
    /// The last stored seq of each of `session_ids` (0 for one without
    /// events), in the order given.
    fn heads(&self, session_ids: &[String]) -> Result<Vec<u64>, StoreError> {
        session_ids
            .iter()
            .map(|id| Ok(self.meta(id)?.map_or(0, |m| m.head_seq)))
            .collect()
    }
    /// Joins the nodes sharing this store as `node_id` (reached at
    /// `address`) under a new epoch, with a lease of `lease` from the
    /// database's clock; from then on every commit is fenced (see
    /// [`ownership`]). `None` for a store only this process writes.
    fn join_node(
        &self,
        node_id: &str,
        address: &str,
        lease: std::time::Duration,
    ) -> Result<Option<Joined>, StoreError> {
        let _ = (node_id, address, lease);
        Ok(None)
    }
    /// Extends the joined node's lease to `lease` from now (the database's
    /// clock); false when it had already expired or the node's epoch moved
    /// on: the node must stop writing and join again.
    fn renew_node(&self, lease: std::time::Duration) -> Result<bool, StoreError> {
        let _ = lease;
        Ok(true)
    }
    /// Ends the joined node's lease now (a clean shutdown, its runs ended):
    /// other nodes may claim its sessions at once instead of after the
    /// lease.
    fn leave_node(&self) -> Result<(), StoreError> {
        Ok(())
    }
    /// Makes the joined node the owner of `session_id` when it has none or
    /// its owner's lease has expired (see [`Claim`]).
    fn claim_session(&self, session_id: &str) -> Result<Claim, StoreError> {
        let _ = session_id;
        Ok(Claim::Owned)
    }
    /// Up to `limit` sessions owned by nodes whose lease expired more than
    /// `grace` ago, by id: the ones a reaper claims.
    fn orphaned_sessions(
        &self,
        grace: std::time::Duration,
        limit: usize,
    ) -> Result<Vec<String>, StoreError> {
        let _ = (grace, limit);
        Ok(Vec::new())
    }
}

/// One stored event as its row holds it: its seq and its encoded bytes.
pub type RawEvent = (u64, Bytes);

/// Stored rows decoded (see [`decode_event`]).
pub(crate) fn decode_rows(session_id: &str, rows: Vec<RawEvent>) -> Vec<pb::Event> {
    rows.into_iter()
        .map(|(seq, bytes)| decode_event(session_id, seq, &bytes))
        .collect()
}

/// What a [`Store`] holds (see [`Store::usage`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StoreUsage {
    /// Sessions with a meta.
    pub sessions: u64,
    /// Events, over every session.
    pub events: u64,
    /// Bytes of the stored values.
    pub bytes: u64,
}

/// A stored event, decoded; a row that cannot be decoded (JSON nested
/// past the decoder's limit by an older server, a damaged row) becomes an
/// `unreadable` event at its seq instead of an error, so no read of the log
/// (History, Subscribe, the folds, recovery) is ever blocked by one row.
/// What can be read of the row's envelope (run, time, CLI line, cut marks)
/// is kept; prost skips the payload without parsing it.
pub(crate) fn decode_event(session_id: &str, seq: u64, bytes: &[u8]) -> pb::Event {
    use prost::Message;
    let reason = match pb::Event::decode(bytes) {
        Ok(event) => return event,
        Err(e) => elide(&e.to_string(), 120),
    };
    tracing::warn!(session_id, seq, size = bytes.len(), %reason, "stored event cannot be decoded; served as unreadable");
    let envelope = Envelope::decode(bytes).unwrap_or_default();
    pb::Event {
        seq,
        session_id: session_id.to_owned(),
        run_id: envelope.run_id,
        time: envelope.time,
        cli_line: envelope.cli_line,
        truncated: envelope.truncated,
        payload: Some(pb::event::Payload::Unreadable(pb::Unreadable {
            reason,
            size: bytes.len() as u64,
        })),
    }
}

/// `text` with its middle left out when longer than twice `keep` bytes: a
/// decoder's message names every level it went through, and its start and
/// end are what tell.
fn elide(text: &str, keep: usize) -> String {
    if text.len() <= 2 * keep {
        return text.to_owned();
    }
    let mut head = keep;
    while !text.is_char_boundary(head) {
        head -= 1;
    }
    let mut tail = text.len() - keep;
    while !text.is_char_boundary(tail) {
        tail += 1;
    }
    format!("{} … {}", &text[..head], &text[tail..])
}

/// The fields of a stored event around its payload (see [`decode_event`]).
#[derive(Clone, PartialEq, prost::Message)]
struct Envelope {
    #[prost(string, tag = "3")]
    run_id: String,
    #[prost(message, optional, tag = "4")]
    time: Option<pbjson_types::Timestamp>,
    #[prost(string, tag = "5")]
    cli_line: String,
    #[prost(message, optional, tag = "6")]
    truncated: Option<pb::Truncated>,
}

/// An event's time as Unix milliseconds (0 when it has none).
pub(crate) fn event_time_ms(t: Option<&pbjson_types::Timestamp>) -> i64 {
    t.map_or(0, |t| {
        t.seconds.saturating_mul(1000) + i64::from(t.nanos / 1_000_000)
    })
}

/// How many of `events` (in the order given) fit in `max_bytes` of
/// encodings, each counted as at most `event_cap`; at least one when there
/// is one.
fn within<'a>(
    events: impl Iterator<Item = &'a pb::Event>,
    max_bytes: usize,
    event_cap: usize,
) -> usize {
    use prost::Message;
    let mut bytes = 0usize;
    let mut n = 0;
    for e in events {
        bytes = bytes.saturating_add(e.encoded_len().min(event_cap));
        if n > 0 && bytes > max_bytes {
            break;
        }
        n += 1;
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_meta_row_written_before_env_existed_still_loads() {
        let old = r#"{"session_id":"s","head_seq":3,"resume_id":null,"created_ms":1,
            "updated_ms":2,"pid":null,"pid_start_time":null,"cwd":"/tmp"}"#;
        let meta: SessionMeta = serde_json::from_str(old).expect("old row");
        assert!(meta.legacy_env.is_empty() && meta.sealed_env.is_none());
        assert_eq!((meta.created_ms, meta.updated_ms), (1, 2));
        // And no env is not written (rows stay as they were).
        let row = serde_json::to_string(&meta).unwrap();
        assert!(!row.contains("env"), "{row}");
        let with = SessionMeta {
            sealed_env: Some("v1:k:00".into()),
            ..meta
        };
        let back: SessionMeta =
            serde_json::from_str(&serde_json::to_string(&with).unwrap()).unwrap();
        assert_eq!(back, with);
    }

    #[test]
    fn a_meta_row_with_the_copies_derive_owns_loads_and_drops_them() {
        let old = r#"{"session_id":"s","head_seq":3,"resume_id":"conv-1","created_ms":1,
            "updated_ms":2,"pid":7,"pid_start_time":8,"cwd":"/work"}"#;
        let meta: SessionMeta = serde_json::from_str(old).expect("old row");
        assert_eq!((meta.pid, meta.pid_start_time), (Some(7), Some(8)));
        let row = serde_json::to_string(&meta).unwrap();
        assert!(!row.contains("conv-1") && !row.contains("/work"), "{row}");
    }

    #[test]
    fn env_values_in_clear_are_read_but_never_written_again() {
        let old = r#"{"session_id":"s","head_seq":3,"resume_id":null,"created_ms":1,
            "updated_ms":2,"pid":null,"pid_start_time":null,"cwd":null,"env":{"K":"v4lue"}}"#;
        let meta: SessionMeta = serde_json::from_str(old).expect("old row");
        assert_eq!(meta.legacy_env["K"], "v4lue");
        let row = serde_json::to_string(&meta).unwrap();
        assert!(!row.contains("v4lue"), "{row}");
    }
}
