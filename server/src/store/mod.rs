//! Durable storage behind the event log: a small synchronous trait with an
//! in-memory implementation (tests, benches) and a redb one (the server).
//!
//! The trait is deliberately narrow: the [`crate::log`] layer owns sequence
//! numbers, windows and subscribers, and only asks storage to commit a batch
//! atomically and to read ranges back. Both implementations pass the same
//! contract suite (`server/tests/store_contract.rs`).

mod memory;
mod redb;

pub use self::memory::MemoryStore;
pub use self::redb::RedbStore;

use agent_harness_client::pb;
use serde::{Deserialize, Serialize};

/// What the server remembers about a session besides its events.
///
/// Written in the same transaction as the events that move `head_seq`, so the
/// head stored here never disagrees with the events table after a crash.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionMeta {
    /// The session id (the key).
    pub session_id: String,
    /// Highest committed seq (0 = no events yet).
    pub head_seq: u64,
    /// The CLI's session id for `--resume`, once a run announced one.
    pub resume_id: Option<String>,
    /// Creation time, Unix milliseconds.
    pub created_ms: i64,
    /// Last change (append or meta update), Unix milliseconds.
    pub updated_ms: i64,
    /// Pid of the live CLI process group leader, so recovery can kill an orphan.
    pub pid: Option<u32>,
    /// Start time of that pid (clock ticks since boot), so a reused pid is never hit.
    pub pid_start_time: Option<u64>,
    /// Working directory of the last run.
    pub cwd: Option<String>,
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
}

/// Errors from a [`Store`].
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The redb database failed (I/O, corruption, transaction).
    #[error("storage: {0}")]
    Redb(#[from] ::redb::Error),
    /// A stored value could not be decoded.
    #[error("corrupt stored value for session {session_id}: {reason}")]
    Corrupt {
        /// The session whose row failed to decode.
        session_id: String,
        /// What went wrong.
        reason: String,
    },
    /// An injected fault (crash tests) or an invariant the caller broke.
    #[error("{0}")]
    Rejected(String),
}

/// Durable storage for every session's events and meta.
///
/// Synchronous on purpose: redb is synchronous, and the log calls it from
/// its writer thread or `spawn_blocking`, never from an async task directly.
pub trait Store: Send + Sync + 'static {
    /// Commits `batch` (events of any sessions) and `metas` in ONE atomic,
    /// durable transaction: after `Ok` everything survives a crash, after an
    /// error or a crash nothing of it is visible.
    fn append_batch(&self, batch: &[pb::Event], metas: &[SessionMeta]) -> Result<(), StoreError>;
    /// Events with `seq > after_seq`, ascending, at most `limit`.
    fn read_range(
        &self,
        session_id: &str,
        after_seq: u64,
        limit: usize,
    ) -> Result<Vec<pb::Event>, StoreError>;
    /// The newest `limit` events with `seq < before_seq`, returned oldest-first.
    fn read_before(
        &self,
        session_id: &str,
        before_seq: u64,
        limit: usize,
    ) -> Result<Vec<pb::Event>, StoreError>;
    /// One session's meta, if it has one.
    fn meta(&self, session_id: &str) -> Result<Option<SessionMeta>, StoreError>;
    /// Writes one meta durably (its own transaction).
    fn put_meta(&self, meta: &SessionMeta) -> Result<(), StoreError>;
    /// Every session's meta, ordered by session id.
    fn sessions(&self) -> Result<Vec<SessionMeta>, StoreError>;
}
