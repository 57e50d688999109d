//! A store for tests that observe or break storage: counts commits and
//! reads, fails commits on demand, holds them at a gate, slows them down,
//! makes receipt lookups meet.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use agent_harness_protocol::pb;
use agent_harness_server::store::{
    Commit, MemoryStore, RawEvent, Receipt, ReceiptWrite, SessionMeta, Store, StoreError,
    StoreUsage,
};

/// Wraps a memory store: counts commits and reads, can fail commits, can hold them at a gate,
/// can make each commit slow (a slow disk).
#[derive(Default)]
pub struct Probe {
    pub inner: MemoryStore,
    /// Every commit sleeps this long first.
    pub delay: Duration,
    pub commits: AtomicUsize,
    /// Reads of events (`read_range`, `read_before` calls).
    pub event_reads: AtomicUsize,
    /// Receipt lookups (`receipt` calls).
    pub receipt_lookups: AtomicUsize,
    /// When set, receipt lookups wait for each other: the first reads, then
    /// waits until a second lookup has read too (or 1 s passes), so two
    /// identical keyed calls whose lookups are not serialized both miss,
    /// deterministically; with a per-key gate the second looks up only
    /// after the first committed, and the first lookup times out alone.
    pub rendezvous: bool,
    arrived: Mutex<usize>,
    arrived_cv: std::sync::Condvar,
    /// Reads of metas (`meta`, `sessions` calls).
    pub meta_reads: AtomicUsize,
    /// Metas passed to successful commits (the writer passes only changed ones).
    pub metas_written: AtomicUsize,
    pub fail: AtomicBool,
    /// While `Some`, append_batch waits until it is `None` again.
    gate: Mutex<Option<()>>,
    gate_cv: std::sync::Condvar,
    /// Commits that reached the gate (held or not).
    at_gate: Mutex<usize>,
    at_gate_cv: std::sync::Condvar,
}

impl Probe {
    /// A probe whose receipt lookups meet (see [`Probe::rendezvous`]).
    pub fn rendezvous() -> Self {
        Self {
            rendezvous: true,
            ..Self::default()
        }
    }

    /// A probe whose every commit first sleeps `delay` (a slow disk).
    pub fn slow(delay: Duration) -> Self {
        Self {
            delay,
            ..Self::default()
        }
    }

    pub fn close_gate(&self) {
        *self.gate.lock().unwrap() = Some(());
    }
    pub fn open_gate(&self) {
        *self.gate.lock().unwrap() = None;
        self.gate_cv.notify_all();
    }
    /// Blocks until `n` commits have reached the gate.
    pub fn wait_at_gate(&self, n: usize) {
        let mut g = self.at_gate.lock().unwrap();
        while *g < n {
            g = self.at_gate_cv.wait(g).unwrap();
        }
    }
}

impl Store for Probe {
    fn commit(&self, commit: Commit<'_>) -> Result<(), StoreError> {
        *self.at_gate.lock().unwrap() += 1;
        self.at_gate_cv.notify_all();
        let mut g = self.gate.lock().unwrap();
        while g.is_some() {
            g = self.gate_cv.wait(g).unwrap();
        }
        drop(g);
        std::thread::sleep(self.delay);
        if self.fail.load(Ordering::SeqCst) {
            return Err(StoreError::Rejected("injected: the disk is full".into()));
        }
        self.commits.fetch_add(1, Ordering::SeqCst);
        self.metas_written
            .fetch_add(commit.metas.len(), Ordering::SeqCst);
        self.inner.commit(commit)
    }
    fn receipt(&self, s: &str, k: &str) -> Result<Option<Receipt>, StoreError> {
        self.receipt_lookups.fetch_add(1, Ordering::SeqCst);
        // Read first, then wait: both reads happen before either call can commit.
        let found = self.inner.receipt(s, k);
        if self.rendezvous {
            let mut arrived = self.arrived.lock().unwrap();
            *arrived += 1;
            self.arrived_cv.notify_all();
            let deadline = std::time::Instant::now() + Duration::from_secs(1);
            while *arrived < 2 {
                let left = deadline.saturating_duration_since(std::time::Instant::now());
                if left.is_zero() {
                    break;
                }
                arrived = self.arrived_cv.wait_timeout(arrived, left).unwrap().0;
            }
        }
        found
    }
    fn prune_receipts(&self, before_ms: i64, limit: usize) -> Result<usize, StoreError> {
        self.inner.prune_receipts(before_ms, limit)
    }
    fn receipt_count(&self) -> Result<usize, StoreError> {
        self.inner.receipt_count()
    }
    fn read_full(&self, s: &str, seq: u64) -> Result<Option<pb::Event>, StoreError> {
        self.event_reads.fetch_add(1, Ordering::SeqCst);
        self.inner.read_full(s, seq)
    }
    fn read_range_raw(
        &self,
        s: &str,
        a: u64,
        l: usize,
        max: usize,
        cap: usize,
    ) -> Result<Vec<RawEvent>, StoreError> {
        self.event_reads.fetch_add(1, Ordering::SeqCst);
        self.inner.read_range_raw(s, a, l, max, cap)
    }
    fn read_before_raw(
        &self,
        s: &str,
        b: u64,
        l: usize,
        max: usize,
        cap: usize,
    ) -> Result<Vec<RawEvent>, StoreError> {
        self.event_reads.fetch_add(1, Ordering::SeqCst);
        self.inner.read_before_raw(s, b, l, max, cap)
    }
    fn meta(&self, s: &str) -> Result<Option<SessionMeta>, StoreError> {
        self.meta_reads.fetch_add(1, Ordering::SeqCst);
        self.inner.meta(s)
    }
    fn put_meta(&self, m: &SessionMeta) -> Result<(), StoreError> {
        self.inner.put_meta(m)
    }
    fn sessions(&self, after: Option<&str>, limit: usize) -> Result<Vec<SessionMeta>, StoreError> {
        self.meta_reads.fetch_add(1, Ordering::SeqCst);
        self.inner.sessions(after, limit)
    }
    fn conversation_sessions(&self, resume_id: &str) -> Result<Vec<String>, StoreError> {
        self.inner.conversation_sessions(resume_id)
    }
    fn transcript(
        &self,
        session_id: &str,
    ) -> Result<Vec<agent_harness_server::store::TranscriptEntry>, StoreError> {
        self.inner.transcript(session_id)
    }
    fn delete_session(&self, s: &str, r: Option<&ReceiptWrite>) -> Result<bool, StoreError> {
        self.inner.delete_session(s, r)
    }
    fn usage(&self) -> Result<StoreUsage, StoreError> {
        self.inner.usage()
    }
    fn session_count(&self) -> Result<u64, StoreError> {
        self.inner.session_count()
    }
    fn index_rows(
        &self,
        session_ids: &[String],
    ) -> Result<Vec<Option<agent_harness_server::store::IndexRow>>, StoreError> {
        self.inner.index_rows(session_ids)
    }
    fn put_index(&self, rows: &[agent_harness_server::store::IndexRow]) -> Result<(), StoreError> {
        self.inner.put_index(rows)
    }
    fn list_index(
        &self,
        query: &agent_harness_server::store::ListQuery,
    ) -> Result<agent_harness_server::store::ListPage, StoreError> {
        self.inner.list_index(query)
    }
}
