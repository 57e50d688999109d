//! In-memory [`Store`]: the reference implementation for tests and benches.
//!
//! Like a shared database it has a commit feed ([`Store::commit_notices`]):
//! one `MemoryStore` shared by two [`crate::log::EventLogs`] is how the
//! tests play a second process writing the same sessions. And like a
//! primary key on (session, seq), it refuses a commit that repeats a stored
//! seq: a log that numbered from a stale head fails cleanly instead of
//! overwriting another writer's events.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Mutex;

use agent_harness_protocol::pb;

use tokio::sync::broadcast;

use super::{
    Commit, CommitNotice, IndexRow, ListPage, ListQuery, RawEvent, Receipt, ReceiptWrite,
    SessionMeta, Store, StoreError, StoreUsage, TranscriptEntry,
};

/// Events as a row of a real store holds them (this one keeps them
/// decoded, for its tests' sake): encoded.
fn raw(events: Vec<pb::Event>) -> Vec<RawEvent> {
    use prost::Message;
    events
        .into_iter()
        .map(|e| (e.seq, bytes::Bytes::from(e.encode_to_vec())))
        .collect()
}

/// Notices the feed holds for a receiver that has not read them yet; one
/// further behind lags, and treats that as [`CommitNotice::Lost`].
const NOTICE_BACKLOG: usize = 1024;

/// A [`Store`] that keeps everything in process memory (lost on exit).
#[derive(Debug)]
pub struct MemoryStore {
    /// One lock over everything, so a batch is applied atomically.
    inner: Mutex<Inner>,
    /// The commit feed: the sessions of every successful commit.
    notices: broadcast::Sender<CommitNotice>,
}

impl Default for MemoryStore {
    fn default() -> Self {
        Self {
            inner: Mutex::default(),
            notices: broadcast::Sender::new(NOTICE_BACKLOG),
        }
    }
}

#[derive(Debug, Default)]
struct Inner {
    events: HashMap<String, BTreeMap<u64, pb::Event>>,
    /// The whole form of events stored cut down.
    full: HashMap<(String, u64), pb::Event>,
    metas: BTreeMap<String, SessionMeta>,
    /// `(session_id, key) -> receipt`.
    receipts: BTreeMap<(String, String), Receipt>,
    /// `(resume_id, session_id)`: the conversation index.
    conversations: BTreeSet<(String, String)>,
    /// Each session's transcript entries, in commit order.
    transcripts: HashMap<String, Vec<TranscriptEntry>>,
    /// The session index.
    index: BTreeMap<String, IndexRow>,
}

impl Inner {
    /// `meta` with `head_seq` and `updated_ms` taken from the events, as
    /// the trait requires.
    fn with_head(&self, meta: &SessionMeta) -> SessionMeta {
        let last = self
            .events
            .get(&meta.session_id)
            .and_then(|evs| evs.values().next_back());
        SessionMeta {
            head_seq: last.map_or(0, |e| e.seq),
            updated_ms: meta
                .updated_ms
                .max(last.map_or(0, |e| super::event_time_ms(e.time.as_ref()))),
            ..meta.clone()
        }
    }
}

impl Inner {
    /// Writes an index row unless the stored one reflects a later head.
    fn put_row(&mut self, row: &IndexRow) {
        let newer = self
            .index
            .get(&row.session_id)
            .is_some_and(|old| old.head_seq > row.head_seq);
        if !newer {
            self.index.insert(row.session_id.clone(), row.clone());
        }
    }

    fn write_receipt(&mut self, w: &ReceiptWrite) {
        match w {
            ReceiptWrite::Put(r) => {
                let id = (r.session_id.clone(), r.key.clone());
                self.receipts.insert(id, r.clone());
            }
            ReceiptWrite::Remove { session_id, key } => {
                self.receipts.remove(&(session_id.clone(), key.clone()));
            }
        }
    }
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // A panic while holding the lock cannot leave a half-applied batch
        // (batches are applied without fallible steps), so poison is harmless.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Store for MemoryStore {
    fn commit(&self, commit: Commit<'_>) -> Result<(), StoreError> {
        let Commit {
            events: batch,
            encoded: _,
            full,
            metas,
            receipts,
            transcript,
            index,
        } = commit;
        let mut inner = self.lock();
        // Checked before anything is applied, so a refused commit leaves
        // nothing behind.
        if let Some(ev) = batch.iter().find(|ev| {
            inner
                .events
                .get(&ev.session_id)
                .is_some_and(|evs| evs.contains_key(&ev.seq))
        }) {
            return Err(StoreError::Rejected(format!(
                "session {} already has an event {}: refused, nothing written",
                ev.session_id, ev.seq
            )));
        }
        for ev in full {
            if let Some(id) = super::conversations::named(ev) {
                let row = (id.to_owned(), ev.session_id.clone());
                inner.conversations.insert(row);
            }
            inner
                .full
                .insert((ev.session_id.clone(), ev.seq), ev.clone());
        }
        for ev in batch {
            if let Some(id) = super::conversations::named(ev) {
                let row = (id.to_owned(), ev.session_id.clone());
                inner.conversations.insert(row);
            }
            inner
                .events
                .entry(ev.session_id.clone())
                .or_default()
                .insert(ev.seq, ev.clone());
        }
        for m in metas {
            inner.metas.insert(m.session_id.clone(), m.clone());
        }
        for w in receipts {
            inner.write_receipt(w);
        }
        for t in transcript {
            let entries = inner.transcripts.entry(t.session_id.clone()).or_default();
            entries.push(t.clone());
        }
        for row in index {
            inner.put_row(row);
        }
        drop(inner);
        let mut sessions: Vec<String> = batch.iter().map(|e| e.session_id.clone()).collect();
        sessions.extend(metas.iter().map(|m| m.session_id.clone()));
        sessions.sort_unstable();
        sessions.dedup();
        if !sessions.is_empty() {
            // No receiver (no log follows this store) is not an error.
            let _ = self.notices.send(CommitNotice::Sessions(sessions));
        }
        Ok(())
    }

    fn receipt(&self, session_id: &str, key: &str) -> Result<Option<Receipt>, StoreError> {
        let id = (session_id.to_owned(), key.to_owned());
        Ok(self.lock().receipts.get(&id).cloned())
    }

    fn prune_receipts(&self, before_ms: i64, limit: usize) -> Result<usize, StoreError> {
        let mut inner = self.lock();
        let mut expired: Vec<_> = inner
            .receipts
            .iter()
            .filter(|(_, r)| r.created_ms < before_ms)
            .map(|(id, r)| (r.created_ms, id.clone()))
            .collect();
        expired.sort();
        expired.truncate(limit);
        for (_, id) in &expired {
            inner.receipts.remove(id);
        }
        Ok(expired.len())
    }

    fn receipt_count(&self) -> Result<usize, StoreError> {
        Ok(self.lock().receipts.len())
    }

    fn read_range_raw(
        &self,
        session_id: &str,
        after_seq: u64,
        limit: usize,
        max_bytes: usize,
        event_cap: usize,
    ) -> Result<Vec<RawEvent>, StoreError> {
        let inner = self.lock();
        let Some(events) = inner.events.get(session_id) else {
            return Ok(Vec::new());
        };
        let Some(start) = after_seq.checked_add(1) else {
            return Ok(Vec::new());
        };
        let mut out: Vec<pb::Event> = events
            .range(start..)
            .take(limit)
            .map(|(_, e)| e.clone())
            .collect();
        out.truncate(super::within(out.iter(), max_bytes, event_cap));
        Ok(raw(out))
    }

    fn read_before_raw(
        &self,
        session_id: &str,
        before_seq: u64,
        limit: usize,
        max_bytes: usize,
        event_cap: usize,
    ) -> Result<Vec<RawEvent>, StoreError> {
        let inner = self.lock();
        let Some(events) = inner.events.get(session_id) else {
            return Ok(Vec::new());
        };
        let mut out: Vec<pb::Event> = events
            .range(..before_seq)
            .rev()
            .take(limit)
            .map(|(_, e)| e.clone())
            .collect();
        out.truncate(super::within(out.iter(), max_bytes, event_cap));
        out.reverse();
        Ok(raw(out))
    }

    fn read_full(&self, session_id: &str, seq: u64) -> Result<Option<pb::Event>, StoreError> {
        let inner = self.lock();
        if let Some(e) = inner.full.get(&(session_id.to_owned(), seq)) {
            return Ok(Some(e.clone()));
        }
        Ok(inner
            .events
            .get(session_id)
            .and_then(|evs| evs.get(&seq))
            .cloned())
    }

    fn meta(&self, session_id: &str) -> Result<Option<SessionMeta>, StoreError> {
        let inner = self.lock();
        Ok(inner.metas.get(session_id).map(|m| inner.with_head(m)))
    }

    fn put_meta(&self, meta: &SessionMeta) -> Result<(), StoreError> {
        self.lock()
            .metas
            .insert(meta.session_id.clone(), meta.clone());
        Ok(())
    }

    fn sessions(&self, after: Option<&str>, limit: usize) -> Result<Vec<SessionMeta>, StoreError> {
        use std::ops::Bound;
        let inner = self.lock();
        let start = match after {
            Some(a) => Bound::Excluded(a.to_owned()),
            None => Bound::Unbounded,
        };
        Ok(inner
            .metas
            .range((start, Bound::Unbounded))
            .take(limit)
            .map(|(_, m)| inner.with_head(m))
            .collect())
    }

    fn conversation_sessions(&self, resume_id: &str) -> Result<Vec<String>, StoreError> {
        let inner = self.lock();
        Ok(inner
            .conversations
            .range((resume_id.to_owned(), String::new())..)
            .take_while(|(r, _)| r == resume_id)
            .map(|(_, s)| s.clone())
            .collect())
    }

    fn transcript(&self, session_id: &str) -> Result<Vec<TranscriptEntry>, StoreError> {
        let inner = self.lock();
        Ok(inner
            .transcripts
            .get(session_id)
            .cloned()
            .unwrap_or_default())
    }

    fn delete_session(
        &self,
        session_id: &str,
        receipt: Option<&ReceiptWrite>,
    ) -> Result<bool, StoreError> {
        let mut inner = self.lock();
        let had_events = inner.events.remove(session_id).is_some();
        let had_meta = inner.metas.remove(session_id).is_some();
        inner.full.retain(|(s, _), _| s != session_id);
        inner.receipts.retain(|(s, _), _| s != session_id);
        inner.conversations.retain(|(_, s)| s != session_id);
        inner.transcripts.remove(session_id);
        inner.index.remove(session_id);
        if let Some(w) = receipt {
            inner.write_receipt(w);
        }
        Ok(had_events || had_meta)
    }

    fn usage(&self) -> Result<StoreUsage, StoreError> {
        use prost::Message;
        let inner = self.lock();
        let events = inner.events.values().flat_map(|evs| evs.values());
        let (mut count, mut bytes) = (0u64, 0u64);
        for e in events.chain(inner.full.values()) {
            bytes += e.encoded_len() as u64;
            count += 1;
        }
        count -= inner.full.len() as u64;
        for m in inner.metas.values() {
            bytes += serde_json::to_vec(m).map_or(0, |v| v.len() as u64);
        }
        for r in inner.receipts.values() {
            bytes += super::receipt::encode(r).len() as u64;
        }
        Ok(StoreUsage {
            sessions: inner.metas.len() as u64,
            events: count,
            bytes,
        })
    }

    fn session_count(&self) -> Result<u64, StoreError> {
        Ok(self.lock().metas.len() as u64)
    }

    fn index_rows(&self, session_ids: &[String]) -> Result<Vec<Option<IndexRow>>, StoreError> {
        let inner = self.lock();
        Ok(session_ids
            .iter()
            .map(|id| inner.index.get(id).cloned())
            .collect())
    }

    fn put_index(&self, rows: &[IndexRow]) -> Result<(), StoreError> {
        let mut inner = self.lock();
        for row in rows {
            inner.put_row(row);
        }
        Ok(())
    }

    fn list_index(&self, query: &ListQuery) -> Result<ListPage, StoreError> {
        let inner = self.lock();
        Ok(query.select(inner.index.values()))
    }

    fn commit_notices(&self) -> Option<broadcast::Receiver<CommitNotice>> {
        Some(self.notices.subscribe())
    }

    fn heads(&self, session_ids: &[String]) -> Result<Vec<u64>, StoreError> {
        let inner = self.lock();
        Ok(session_ids
            .iter()
            .map(|id| {
                inner
                    .events
                    .get(id)
                    .and_then(|evs| evs.keys().next_back().copied())
                    .unwrap_or(0)
            })
            .collect())
    }
}
