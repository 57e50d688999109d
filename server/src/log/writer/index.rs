//! The session index rows a commit writes (see [`crate::store::index`]):
//! each session the batch touches gets its row folded on from the one
//! reflecting the head before the batch, cached here, else stored, else
//! (missing or behind) folded from its log, so the work is O(1) per event
//! except for a row that has to be rebuilt.

use std::collections::HashMap;

use agent_harness_protocol::pb;

use super::{Touched, Writer};
use crate::store::{IndexFold, IndexRow, StoreError};

/// The rows a batch writes, and the folds to cache once it is committed.
pub(super) struct Indexed {
    pub(super) rows: Vec<IndexRow>,
    pub(super) folds: Vec<(String, IndexFold)>,
}

impl Writer {
    /// The index rows of the sessions `touched` after `events` (the batch,
    /// as stored). A session whose row cannot be folded (the store failed
    /// to read) gets none: its row stays behind and is folded again on its
    /// next commit, and a listing is never a reason to refuse a write.
    pub(super) fn index(
        &mut self,
        events: &[pb::Event],
        touched: &HashMap<String, Touched>,
    ) -> Indexed {
        let mut folds: HashMap<&str, (IndexFold, bool)> = HashMap::with_capacity(touched.len());
        for (sid, t) in touched {
            match self.fold_at(sid, t.head_before) {
                Ok((fold, stored)) => {
                    folds.insert(sid.as_str(), (fold, !stored));
                }
                Err(e) => {
                    tracing::warn!(session_id = %sid, error = %e, "index row not updated; it is folded again on the session's next commit");
                }
            }
        }
        for e in events {
            if let Some((fold, write)) = folds.get_mut(e.session_id.as_str()) {
                fold.apply(e);
                *write = true;
            }
        }
        let mut out = Indexed {
            rows: Vec::new(),
            folds: Vec::with_capacity(folds.len()),
        };
        for (sid, (fold, write)) in folds {
            if write {
                out.rows.push(fold.row(sid));
            }
            out.folds.push((sid.to_owned(), fold));
        }
        out
    }

    /// The fold of `session_id` at `head`, and whether its stored row
    /// already says so (nothing to write without new events).
    fn fold_at(&mut self, session_id: &str, head: u64) -> Result<(IndexFold, bool), StoreError> {
        if let Some(fold) = self.index.remove(session_id)
            && fold.head() == head
        {
            return Ok((fold, true));
        }
        if head == 0 {
            return Ok((IndexFold::default(), false));
        }
        let stored = self.shared.store.index_rows(&[session_id.to_owned()])?;
        if let Some(Some(row)) = stored.into_iter().next()
            && row.head_seq == head
        {
            return Ok((row.fold, true));
        }
        tracing::debug!(
            session_id,
            head,
            "index row missing or behind: folding the log"
        );
        Ok((
            crate::log::index::fold_log(&self.shared, session_id, head)?,
            false,
        ))
    }
}
