//! Spans of a session's events read from the store in the form the streams
//! send them: the rows as stored, cut when over the budget, `unreadable`
//! when they do not decode ([`Shared::streamed_raw`]); read ahead on a
//! blocking thread for a replaying subscriber ([`Shared::store_span`]), or
//! decoded for the manager's folds ([`Shared::read_span_decoded`]).

use std::sync::Arc;
use std::sync::atomic::Ordering;

use agent_harness_protocol::pb;

use super::resident::SessionLog;
use super::{EncodedEvent, LogError, Shared, cut, frame};
use crate::store::{RawEvent, StoreError};

impl Shared {
    /// Events read from the store in their streamed form: rows written
    /// before the budget existed (or under a larger one) are cut now.
    pub(super) fn streamed(&self, mut events: Vec<pb::Event>) -> Vec<pb::Event> {
        let budget = self.budget();
        for e in &mut events {
            if let Some(cut) = cut::fit(e, budget) {
                *e = cut;
            }
        }
        events
    }

    /// Rows read from the store as they are streamed: the stored bytes as
    /// they are, except that a row over the budget (written before it, or
    /// under a larger one) is cut now, and a row that does not decode is
    /// sent as the `unreadable` event a decoded read gives.
    ///
    /// Whether a row decodes is checked once per resident entry: rows up to
    /// `session`'s [`SessionLog::checked`] were found to decode by an
    /// earlier read and are not checked again, and a read that checks the
    /// rows just after it (in seq order, each found to decode) moves it on.
    /// A row that does not decode stops it: that row and those after it are
    /// checked by every read.
    pub(super) fn streamed_raw(
        &self,
        session_id: &str,
        session: Option<&SessionLog>,
        rows: Vec<RawEvent>,
    ) -> Vec<EncodedEvent> {
        let budget = self.budget();
        let known = session.map_or(0, |s| s.checked.load(Ordering::Acquire));
        let mut through = known;
        let mut checked = 0u64;
        let evs = rows
            .into_iter()
            .map(|(seq, bytes)| {
                let raw = EncodedEvent { seq, bytes };
                if raw.bytes.len() <= budget {
                    if seq <= known {
                        return raw;
                    }
                    checked += 1;
                    if frame::decodes(&raw.bytes) {
                        if seq == through + 1 {
                            through = seq;
                        }
                        return raw;
                    }
                }
                let event = raw.decode(session_id);
                match cut::fit(&event, budget) {
                    Some(cut) => EncodedEvent::of(&cut),
                    None => EncodedEvent::of(&event),
                }
            })
            .collect();
        self.rows_checked.fetch_add(checked, Ordering::Relaxed);
        if let Some(s) = session
            && through > known
        {
            s.checked.fetch_max(through, Ordering::AcqRel);
        }
        evs
    }

    /// Events `after+1 ..= upto` from the store (at least one, up to
    /// `max`, or on to the end of the stored row the `max`-th is in; see
    /// [`crate::store::Store::read_range_onward`]) in their streamed form.
    /// The read, and the check of every row ([`Shared::streamed_raw`]), run
    /// on a blocking thread that starts now, not when the answer is
    /// awaited: a replaying subscriber reads its next span while it sends
    /// this one.
    pub(super) fn store_span(
        self: &Arc<Self>,
        session_id: &str,
        session: &Arc<SessionLog>,
        after: u64,
        upto: u64,
        max: usize,
    ) -> StoreSpan {
        let shared = self.clone();
        let session = session.clone();
        let sid = session_id.to_owned();
        let want = usize::try_from(upto.saturating_sub(after))
            .unwrap_or(usize::MAX)
            .min(max);
        let read = tokio::task::spawn_blocking(move || {
            if want == 0 {
                return Ok(Held::new(shared, Vec::new()));
            }
            let budget = shared.budget();
            let rows =
                shared
                    .store
                    .read_range_onward(&sid, after, want, cut::PAGE_BYTES, budget)?;
            let mut evs = shared.streamed_raw(&sid, Some(&session), rows);
            evs.retain(|e| e.seq <= upto);
            Ok(Held::new(shared, evs))
        });
        StoreSpan { after, read }
    }

    /// Events `after+1 ..= upto` (at most `max`), decoded (the manager's
    /// folds): the window's events decoded, the store's rows decoded once.
    pub(super) async fn read_span_decoded(
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
        if let Some(evs) = session.and_then(|s| s.window_span(after, want)) {
            return Ok(evs
                .iter()
                .filter(|e| e.seq <= upto)
                .map(|e| e.decode(session_id))
                .collect());
        }
        let sid = session_id.to_owned();
        let budget = self.budget();
        let evs = self
            .blocking(move |store| {
                store.read_range_within(&sid, after, want, cut::PAGE_BYTES, budget)
            })
            .await?;
        let mut evs = self.streamed(evs);
        evs.retain(|e| e.seq <= upto);
        Ok(evs)
    }
}

/// A read of the store under way (see [`Shared::store_span`]).
pub(super) struct StoreSpan {
    /// The seq the read starts after.
    pub(super) after: u64,
    read: tokio::task::JoinHandle<Result<Held, StoreError>>,
}

impl StoreSpan {
    /// The events read.
    pub(super) async fn events(self) -> Result<Vec<EncodedEvent>, LogError> {
        Ok(self.read.await.map_err(|_| LogError::Closed)??.take())
    }
}

/// Events a read has brought and its stream has not taken yet (a span read
/// ahead that waits, or that no one will take): counted in
/// `LogStats::subscriber_buffered` for as long as they are held.
struct Held {
    shared: Arc<Shared>,
    evs: Vec<EncodedEvent>,
}

impl Held {
    fn new(shared: Arc<Shared>, evs: Vec<EncodedEvent>) -> Self {
        shared.buffered.fetch_add(evs.len(), Ordering::Relaxed);
        Self { shared, evs }
    }

    /// The events, no longer counted here (the stream counts what it
    /// buffers).
    fn take(mut self) -> Vec<EncodedEvent> {
        let evs = std::mem::take(&mut self.evs);
        self.shared.buffered.fetch_sub(evs.len(), Ordering::Relaxed);
        evs
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.shared
            .buffered
            .fetch_sub(self.evs.len(), Ordering::Relaxed);
    }
}
