//! Deleting sessions, so that what the server stores stays bounded:
//! DeleteSession, and the retention pass that deletes idle sessions past
//! `--retention-days` or `--max-sessions`.
//!
//! A deletion takes the session's claim like any other writer: a live run
//! is first ended through its stop ladder (its `run_end` is committed
//! before anything is deleted), then, with the claim held so nothing else
//! appends, the log deletes the session in one transaction and forgets it
//! in memory, and the slot's fold is reset. A call racing it either went
//! first, or finds the session gone (NOT_FOUND), or (a Start) creates it
//! anew. The retention pass never waits for a run: a session with a live
//! run is skipped.
//!
//! On a store several nodes share, the deletion's transaction is fenced as
//! a commit is: a node that lost the session after its claim (paused past
//! its lease while another node took the session over) deletes nothing and
//! is answered as a fenced write is, naming the owner where it is known.

use agent_harness_protocol::pb;

use super::receipts::{Keyed, KeyedExt};
use super::run::RunCmd;
use super::slot::{Claim, Entry, Slot};
use super::{RetentionOptions, SessionManager};
use crate::error::{Error, Result};
use crate::store::ReceiptWrite;
use std::sync::Arc;

/// Sessions read per page when the retention pass lists them.
const LIST_PAGE: usize = 1000;

impl SessionManager {
    /// Deletes a session (see the module docs). [`Error::UnknownSession`]
    /// when it does not exist. A repeat of a deletion that succeeded with
    /// the same `idempotency_key` succeeds again (its receipt is written in
    /// the deletion's own transaction) instead of NOT_FOUND.
    pub async fn delete(
        &self,
        request: pb::DeleteSessionRequest,
    ) -> Result<pb::DeleteSessionResponse> {
        self.check_open()?;
        let session_id = request.session_id.as_str();
        self.idempotent(&request, |keyed| async move {
            self.delete_inner(session_id, keyed.as_ref()).await?;
            Ok(pb::DeleteSessionResponse {})
        })
        .await
    }

    async fn delete_inner(&self, session_id: &str, keyed: Option<&Keyed>) -> Result<()> {
        let Some(slot) = self.known_slot(session_id).await? else {
            return Err(Error::unknown_session(session_id));
        };
        let claim = loop {
            self.check_open()?;
            match slot.enter() {
                Entry::Free(claim) => break claim,
                Entry::Occupied(run) => {
                    // The stop ladder, then wait for the run_end's commit
                    // (the run task releases the claim after it).
                    run.tell(RunCmd::Delete).await;
                    self.wait_released(session_id, &run.ended).await?;
                }
            }
        };
        let receipt = keyed.put(|| pb::DeleteSessionResponse {});
        match self
            .remove(session_id, &slot, claim, receipt, "client")
            .await
        {
            Ok(true) => Ok(()),
            Ok(false) => Err(Error::unknown_session(session_id)),
            // Fenced in the store: this node lost the session after its
            // claim. Claiming again names the node that holds it now.
            Err(fenced @ Error::NotOwner { owner: None, .. }) => {
                Err(self.claim(session_id).await.err().unwrap_or(fenced))
            }
            Err(e) => Err(e),
        }
    }

    /// With the session's claim held: deletes it from the store and from
    /// memory. False when it had nothing stored (deleted meanwhile).
    async fn remove(
        &self,
        session_id: &str,
        slot: &Arc<Slot>,
        claim: Claim,
        receipt: Option<ReceiptWrite>,
        by: &str,
    ) -> Result<bool> {
        let head = self.inner.logs.head_seq(session_id).await?;
        let existed = self.inner.logs.delete_session(session_id, receipt).await?;
        slot.fold.reset();
        drop(claim);
        self.inner.slots.remove_unused(session_id, slot);
        if existed {
            tracing::info!(session_id, events = head, by, "session deleted");
        }
        Ok(existed)
    }

    /// Deletes idle sessions past the retention options: those whose last
    /// activity is older than `max_age`, then the least recently active
    /// ones past `max_sessions`. A session with a live run (or a call
    /// holding it) is skipped. Returns how many were deleted. The server
    /// runs it every minute; a Start that creates a session at the cap
    /// runs it first (see [`SessionManager::make_room`]).
    pub async fn retain(&self) -> Result<usize> {
        let RetentionOptions {
            max_age,
            max_sessions,
        } = self.inner.opts.retention;
        self.retain_to(max_age, max_sessions).await
    }

    async fn retain_to(
        &self,
        max_age: Option<std::time::Duration>,
        max_sessions: Option<usize>,
    ) -> Result<usize> {
        if max_age.is_none() && max_sessions.is_none() {
            return Ok(0);
        }
        let now = self.inner.opts.idempotency.clock.now_ms();
        let cutoff = max_age
            .map(|age| now.saturating_sub(i64::try_from(age.as_millis()).unwrap_or(i64::MAX)));
        // Every session's last activity, oldest first.
        let mut all = Vec::new();
        let mut after: Option<String> = None;
        loop {
            let page = self
                .inner
                .logs
                .sessions(after.as_deref(), LIST_PAGE)
                .await?;
            let full = page.len() == LIST_PAGE;
            after = page.last().map(|m| m.session_id.clone());
            all.extend(page.into_iter().map(|m| (m.updated_ms, m.session_id)));
            if !full {
                break;
            }
        }
        all.sort_unstable();
        let mut excess = max_sessions.map_or(0, |cap| all.len().saturating_sub(cap));
        let mut deleted = 0;
        for (updated_ms, session_id) in all {
            let expired = cutoff.is_some_and(|c| updated_ms < c);
            if !expired && excess == 0 {
                break; // the rest are newer
            }
            if self.delete_idle(&session_id).await? {
                deleted += 1;
                excess = excess.saturating_sub(1);
            }
        }
        if deleted > 0 {
            tracing::info!(deleted, "retention deleted idle sessions");
        }
        Ok(deleted)
    }

    /// Deletes one session unless its slot is occupied; false then. A free
    /// slot means no live run: a run task occupies the slot from before its
    /// `run_start` until after its `run_end`, and start-up recovery closed
    /// every run a previous server left open. So the log is not read.
    ///
    /// On a store several nodes share, only the session's owner deletes
    /// it: a session another node holds (or any, while this node is
    /// fenced) is left, as one with a live run is.
    async fn delete_idle(&self, session_id: &str) -> Result<bool> {
        match self.claim(session_id).await {
            Err(Error::NotOwner { .. }) => return Ok(false),
            other => other?,
        }
        let slot = self.slot(session_id);
        let Entry::Free(claim) = slot.enter() else {
            return Ok(false);
        };
        match self
            .remove(session_id, &slot, claim, None, "retention")
            .await
        {
            Err(Error::NotOwner { .. }) => Ok(false),
            other => other,
        }
    }

    /// Before a Start creates a new session: with `--max-sessions` and the
    /// store at the cap, deletes the least recently active idle sessions
    /// down to nine tenths of it (so the listing runs once per tenth of the
    /// cap of new sessions, not on every Start). RESOURCE_EXHAUSTED when
    /// no idle session can go (every stored session has a live run).
    pub(super) async fn make_room(&self) -> Result<()> {
        let Some(cap) = self.inner.opts.retention.max_sessions else {
            return Ok(());
        };
        let stored = self.inner.logs.session_count().await?;
        if stored < cap as u64 {
            return Ok(());
        }
        let keep = (cap - cap / 10).min(cap.saturating_sub(1));
        self.retain_to(None, Some(keep)).await?;
        if self.inner.logs.session_count().await? >= cap as u64 {
            return Err(Error::ResourceLimit(format!(
                "{cap} sessions are stored, the most this server keeps (--max-sessions), and \
                 none is idle; delete one (DeleteSession) or retry when a run has ended"
            )));
        }
        Ok(())
    }
}
