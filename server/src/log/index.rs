//! The session index seen from the log (see [`crate::store::index`]): its
//! rows are folded from the log by the writer thread, in the commit of the
//! events they reflect ([`super::writer`]); here are the fold of a whole
//! log (for a row missing or behind), the start-up rebuild and the reads
//! ListSessions makes.

use std::time::{Duration, Instant};

use crate::store::{IndexFold, ListPage, ListQuery, StoreError};

use super::{EventLogs, LogError, Shared};

/// Events read per page while folding a log for its row.
const FOLD_PAGE: usize = 1000;
/// Sessions checked per page while rebuilding, and rows per transaction.
const REBUILD_PAGE: usize = 500;
/// How often a long rebuild says how far it got.
const PROGRESS_EVERY: Duration = Duration::from_secs(5);

/// The index fold of `session_id`'s log up to `upto`, read from the store
/// in pages, in the form the log serves (cut to the per-event budget), as
/// GetSession's fold reads it.
pub(super) fn fold_log(
    shared: &Shared,
    session_id: &str,
    upto: u64,
) -> Result<IndexFold, StoreError> {
    let mut fold = IndexFold::default();
    let mut after = 0;
    while after < upto {
        let page = shared.store.read_range(session_id, after, FOLD_PAGE)?;
        if page.is_empty() {
            break;
        }
        for e in shared.streamed(page) {
            if e.seq > upto {
                return Ok(fold);
            }
            after = e.seq;
            fold.apply(&e);
        }
    }
    Ok(fold)
}

/// Writes the row of every session whose row is missing or behind its
/// log, folding its log; returns how many. Says how far it got every few
/// seconds, and what it did at the end.
fn rebuild(shared: &Shared) -> Result<usize, StoreError> {
    let started = Instant::now();
    let mut noted = started;
    let (mut seen, mut rebuilt) = (0usize, 0usize);
    let mut after: Option<String> = None;
    loop {
        let metas = shared.store.sessions(after.as_deref(), REBUILD_PAGE)?;
        let Some(last) = metas.last() else { break };
        after = Some(last.session_id.clone());
        let ids: Vec<String> = metas.iter().map(|m| m.session_id.clone()).collect();
        let rows = shared.store.index_rows(&ids)?;
        let mut fresh = Vec::new();
        for (meta, row) in metas.iter().zip(rows) {
            if row.is_some_and(|r| r.head_seq >= meta.head_seq) {
                continue;
            }
            let fold = fold_log(shared, &meta.session_id, meta.head_seq)?;
            fresh.push(fold.row(&meta.session_id));
        }
        seen += metas.len();
        rebuilt += fresh.len();
        if !fresh.is_empty() {
            shared.store.put_index(&fresh)?;
        }
        if rebuilt > 0 && noted.elapsed() >= PROGRESS_EVERY {
            noted = Instant::now();
            tracing::info!(
                sessions_checked = seen,
                rows_rebuilt = rebuilt,
                "rebuilding the session index from the logs"
            );
        }
        if metas.len() < REBUILD_PAGE {
            break;
        }
    }
    if rebuilt > 0 {
        tracing::info!(
            sessions_checked = seen,
            rows_rebuilt = rebuilt,
            took_ms = started.elapsed().as_millis() as u64,
            "session index rebuilt from the logs"
        );
    }
    Ok(rebuilt)
}

impl EventLogs {
    /// Brings the session index up to the logs: writes the row of every
    /// session whose row is missing (a store written before the index
    /// existed, sessions written straight into the store) or behind its log
    /// (a row that did not decode), folding its log. The server runs it at
    /// start-up before serving; a store that is current costs one read of
    /// the metas and rows. Returns how many rows it wrote.
    pub async fn rebuild_index(&self) -> Result<usize, LogError> {
        let shared = self.inner.shared.clone();
        Ok(tokio::task::spawn_blocking(move || rebuild(&shared))
            .await
            .map_err(|_| LogError::Closed)??)
    }

    /// A page of the session index (see [`crate::store::Store::list_index`]).
    pub async fn list_index(&self, query: ListQuery) -> Result<ListPage, LogError> {
        self.inner
            .shared
            .blocking(move |st| st.list_index(&query))
            .await
    }
}
