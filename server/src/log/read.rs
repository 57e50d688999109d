//! Reads of the log: History pages, ranges, whole events, heads, metas,
//! receipts and the store's figures, from the resident window when it holds
//! them and from the store otherwise.

use std::sync::atomic::Ordering;

use agent_harness_protocol::pb;

use super::{EventLogs, HISTORY_DEFAULT_LIMIT, HISTORY_MAX_LIMIT, HistoryPage, LogError, cut};
use crate::store::{Receipt, SessionMeta, StoreUsage, TranscriptEntry};

impl EventLogs {
    /// A History page: the newest `limit` events with `seq < before_seq`,
    /// oldest first, and whether older ones exist. `before_seq == 0` (or past
    /// the head) means from the tail; `limit == 0` means 50; capped at 1000.
    /// The page also holds at most [`cut::PAGE_BYTES`] of events (the
    /// newest that fit, at least one), so its message stays under 4 MiB.
    pub async fn history(
        &self,
        session_id: &str,
        before_seq: u64,
        limit: u32,
    ) -> Result<(Vec<pb::Event>, bool), LogError> {
        let page = self.history_page(session_id, before_seq, limit).await?;
        let events = page.events.iter().map(|e| e.decode(session_id)).collect();
        Ok((events, page.has_more))
    }

    /// [`EventLogs::history`] as the wire sends it: each event's stored
    /// bytes (from the window, or the store's rows), not decoded.
    pub async fn history_page(
        &self,
        session_id: &str,
        before_seq: u64,
        limit: u32,
    ) -> Result<HistoryPage, LogError> {
        let limit = match limit {
            0 => HISTORY_DEFAULT_LIMIT,
            l => l.min(HISTORY_MAX_LIMIT),
        } as u64;
        let shared = &self.inner.shared;
        let session = shared.load(session_id, false).await?;
        let head = session.as_ref().map_or(0, |s| *s.head.borrow());
        let before = if before_seq == 0 || before_seq > head {
            head + 1
        } else {
            before_seq
        };
        if before <= 1 {
            return Ok(HistoryPage::default());
        }
        let first = before.saturating_sub(limit).max(1);
        let window_hit = session
            .as_deref()
            .and_then(|s| s.window_span(first - 1, (before - first) as usize));
        let mut events = match window_hit {
            Some(evs) if evs.first().map(|e| e.seq) == Some(first) => evs,
            _ => {
                let sid = session_id.to_owned();
                let budget = shared.budget();
                let rows = shared
                    .blocking(move |st| {
                        st.read_before_raw(&sid, before, limit as usize, cut::PAGE_BYTES, budget)
                    })
                    .await?;
                shared.streamed_raw(session_id, session.as_deref(), rows)
            }
        };
        // Bounded by bytes too: the newest events that fit, at least one.
        let mut bytes = 0usize;
        let keep = events
            .iter()
            .rev()
            .take_while(|e| {
                bytes += e.wire_len();
                bytes <= cut::PAGE_BYTES
            })
            .count()
            .max(1);
        let drop = events.len().saturating_sub(keep);
        events.drain(..drop);
        let has_more = events.first().is_some_and(|e| e.seq > 1);
        Ok(HistoryPage { events, has_more })
    }

    /// At most `limit` committed events with `seq > after_seq`, oldest
    /// first (from the window when it covers them, else from the store).
    pub async fn read_range(
        &self,
        session_id: &str,
        after_seq: u64,
        limit: usize,
    ) -> Result<Vec<pb::Event>, LogError> {
        let shared = &self.inner.shared;
        let Some(session) = shared.load(session_id, false).await? else {
            return Ok(Vec::new());
        };
        let head = *session.head.borrow();
        shared
            .read_span_decoded(session_id, Some(&session), after_seq, head, limit)
            .await
    }

    /// The whole form of event `seq` (what a `truncated` event left out is
    /// in it); `None` when the session has no such event. An event in the
    /// window that was not cut is answered from memory.
    pub async fn full_event(
        &self,
        session_id: &str,
        seq: u64,
    ) -> Result<Option<pb::Event>, LogError> {
        let shared = &self.inner.shared;
        let session = shared.load(session_id, false).await?;
        let head = session.as_ref().map_or(0, |s| *s.head.borrow());
        if seq == 0 || seq > head {
            return Ok(None);
        }
        if let Some(e) = session
            .and_then(|s| s.window_get(seq))
            .map(|e| e.decode(session_id))
            && e.truncated.is_none()
        {
            return Ok(Some(e));
        }
        let sid = session_id.to_owned();
        shared.blocking(move |st| st.read_full(&sid, seq)).await
    }

    /// The whole form of event `seq` as stored, protobuf-encoded (for an
    /// `unreadable` event, the bytes that could not be decoded); `None`
    /// when the store has no such event.
    pub async fn full_event_bytes(
        &self,
        session_id: &str,
        seq: u64,
    ) -> Result<Option<Vec<u8>>, LogError> {
        let sid = session_id.to_owned();
        self.inner
            .shared
            .blocking(move |st| st.read_full_bytes(&sid, seq))
            .await
    }

    /// The session's committed head seq (0 when it has no events).
    pub async fn head_seq(&self, session_id: &str) -> Result<u64, LogError> {
        let session = self.inner.shared.load(session_id, false).await?;
        Ok(session.map_or(0, |s| *s.head.borrow()))
    }

    /// Whether the session has any event or a stored meta. An unknown id
    /// costs a store lookup and leaves nothing in memory.
    pub async fn exists(&self, session_id: &str) -> Result<bool, LogError> {
        let session = self.inner.shared.load(session_id, false).await?;
        Ok(session.is_some_and(|s| *s.head.borrow() > 0 || s.has_meta.load(Ordering::Acquire)))
    }

    /// A page of stored sessions' metas, ordered by session id: the first
    /// `limit` after `after` (from the first when `None`). Reads only that
    /// page (each meta plus the last key of its events).
    pub async fn sessions(
        &self,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<SessionMeta>, LogError> {
        let after = after.map(str::to_owned);
        let mut metas = self
            .inner
            .shared
            .blocking(move |st| st.sessions(after.as_deref(), limit))
            .await?;
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

    /// The sessions whose log names CLI conversation `resume_id` (a
    /// `run_ready` that announced it, a `run_start` that resumed it, not a
    /// fork's), by id.
    pub async fn conversation_sessions(&self, resume_id: &str) -> Result<Vec<String>, LogError> {
        let id = resume_id.to_owned();
        self.inner
            .shared
            .blocking(move |st| st.conversation_sessions(&id))
            .await
    }

    /// How many sessions are stored.
    pub async fn session_count(&self) -> Result<u64, LogError> {
        self.inner.shared.blocking(|st| st.session_count()).await
    }

    /// What the store holds: sessions, events, bytes (walks the tables).
    pub async fn usage(&self) -> Result<StoreUsage, LogError> {
        self.inner.shared.blocking(|st| st.usage()).await
    }

    /// The stored receipt of `(session_id, key)`, however old.
    pub async fn receipt(&self, session_id: &str, key: &str) -> Result<Option<Receipt>, LogError> {
        let (sid, key) = (session_id.to_owned(), key.to_owned());
        self.inner
            .shared
            .blocking(move |st| st.receipt(&sid, &key))
            .await
    }

    /// The CLI transcript entries stored for `session_id`, in order (see
    /// [`crate::store::transcript`]).
    pub async fn transcript(&self, session_id: &str) -> Result<Vec<TranscriptEntry>, LogError> {
        let sid = session_id.to_owned();
        self.inner
            .shared
            .blocking(move |st| st.transcript(&sid))
            .await
    }

    /// How many receipts the store holds (tests, stats).
    pub async fn receipt_count(&self) -> Result<usize, LogError> {
        self.inner.shared.blocking(|st| st.receipt_count()).await
    }
}
