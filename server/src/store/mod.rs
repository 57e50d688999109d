//! Durable storage behind the event log: a small synchronous trait with an
//! in-memory implementation (tests, benches) and a redb one (the server).
//!
//! The trait is deliberately narrow: the [`crate::log`] layer owns sequence
//! numbers, windows and subscribers, and only asks storage to commit a batch
//! atomically and to read ranges back. Besides events and metas it keeps the
//! receipts of keyed calls ([`receipt`]), committed in the same transaction
//! as the events of their call. Both implementations pass the same contract
//! suite (`server/tests/log_store/store_contract.rs`).

mod memory;
pub mod receipt;
mod redb;

pub use self::memory::MemoryStore;
pub use self::receipt::{Outcome, Receipt, ReceiptWrite};
pub use self::redb::RedbStore;

use std::collections::BTreeMap;

use agent_harness_client::pb;
use serde::{Deserialize, Serialize};

/// What the server remembers about a session besides its events.
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
    /// The CLI's session id for `--resume`, once a run announced one.
    pub resume_id: Option<String>,
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
    /// Working directory of the last run.
    pub cwd: Option<String>,
    /// The environment a client gave the last run that spawned (`StartConfig.env`),
    /// values included. Kept here, never in the event log (whose `run_start`
    /// records the names only), so a Send that respawns the session (even after
    /// a server restart) starts it with the same variables. Never sent to a
    /// client. Rows written before this field existed load with none.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
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
    /// Commits `batch` (events of any sessions), `metas` (the metas that
    /// changed; usually none) and `receipts` (of the keyed calls whose events
    /// these are; usually none) in ONE atomic, durable transaction: after
    /// `Ok` everything survives a crash, after an error or a crash nothing
    /// of it is visible.
    fn commit(
        &self,
        batch: &[pb::Event],
        metas: &[SessionMeta],
        receipts: &[ReceiptWrite],
    ) -> Result<(), StoreError>;
    /// [`Store::commit`] without receipts.
    fn append_batch(&self, batch: &[pb::Event], metas: &[SessionMeta]) -> Result<(), StoreError> {
        self.commit(batch, metas, &[])
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
    ) -> Result<Vec<pb::Event>, StoreError>;
    /// The newest `limit` events with `seq < before_seq`, returned oldest-first.
    fn read_before(
        &self,
        session_id: &str,
        before_seq: u64,
        limit: usize,
    ) -> Result<Vec<pb::Event>, StoreError>;
    /// One session's meta, if it has one, with `head_seq` = the last stored
    /// seq of the session (0 without events).
    fn meta(&self, session_id: &str) -> Result<Option<SessionMeta>, StoreError>;
    /// Writes one meta durably (its own transaction).
    fn put_meta(&self, meta: &SessionMeta) -> Result<(), StoreError>;
    /// Every session's meta, ordered by session id, each with `head_seq`
    /// derived as in [`Store::meta`].
    fn sessions(&self) -> Result<Vec<SessionMeta>, StoreError>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_meta_row_written_before_env_existed_still_loads() {
        let old = r#"{"session_id":"s","head_seq":3,"resume_id":null,"created_ms":1,
            "updated_ms":2,"pid":null,"pid_start_time":null,"cwd":"/tmp"}"#;
        let meta: SessionMeta = serde_json::from_str(old).expect("old row");
        assert!(meta.env.is_empty());
        assert_eq!(meta.cwd.as_deref(), Some("/tmp"));
        // And an empty env is not written (rows stay as they were).
        let row = serde_json::to_string(&meta).unwrap();
        assert!(!row.contains("env"), "{row}");
        let with = SessionMeta {
            env: [("K".to_owned(), "v".to_owned())].into(),
            ..meta
        };
        let back: SessionMeta =
            serde_json::from_str(&serde_json::to_string(&with).unwrap()).unwrap();
        assert_eq!(back, with);
    }
}
