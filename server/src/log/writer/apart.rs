//! The writer's commands that are never batched: deleting a session, and
//! following the heads another process committed (from the tailing task).
//! Each runs alone on the writer thread, after what was queued before it.

use std::sync::atomic::Ordering;

use super::{Cmd, Writer};
use crate::log::tail::Ahead;
use crate::log::{EncodedEvent, LogError};
use crate::store::ReceiptWrite;

impl Writer {
    /// Runs a command that is never batched (a deletion, a follow).
    pub(super) fn apart(&mut self, cmd: Cmd) {
        match cmd {
            Cmd::Delete {
                session_id,
                receipt,
                reply,
            } => {
                let _ = reply.send(self.delete(&session_id, receipt));
            }
            Cmd::Follow { ahead, reply } => {
                self.follow(ahead);
                let _ = reply.send(());
            }
            Cmd::Commit { .. } | Cmd::Shutdown { .. } => {
                unreachable!("only deletions and follows run apart")
            }
        }
    }

    /// Deletes a session from the store and then from memory: the meta
    /// cache, and its resident entry, whose streams end after what they
    /// hold (see `subscribe`). A loader that read the session's head before
    /// the deletion cannot install it afterwards: the publish counter moves
    /// before the entry goes.
    fn delete(
        &mut self,
        session_id: &str,
        receipt: Option<ReceiptWrite>,
    ) -> Result<bool, LogError> {
        self.clock += 1;
        match self
            .shared
            .store
            .delete_session(session_id, receipt.as_ref())
        {
            Ok(existed) => {
                self.shared
                    .storage_ok
                    .send_if_modified(|ok| !std::mem::replace(ok, true));
                self.metas.remove(session_id);
                self.index.remove(session_id);
                self.shared.published.fetch_add(1, Ordering::SeqCst);
                if let Some(session) = self.shared.resident.remove(session_id) {
                    session.deleted.store(true, Ordering::Release);
                    session.head.send_modify(|_| {});
                }
                Ok(existed)
            }
            Err(e @ crate::store::StoreError::Fenced { .. }) => {
                // Not a storage failure: another node owns the session now.
                tracing::warn!(
                    session_id,
                    "fenced: this node no longer owns the session it was deleting; nothing deleted"
                );
                self.shared.fenced_writes.fetch_add(1, Ordering::Relaxed);
                Err(e.into())
            }
            Err(e) => {
                tracing::error!(session_id, error = %e, "deleting a session failed");
                self.shared
                    .storage_ok
                    .send_if_modified(|ok| std::mem::replace(ok, false));
                Err(e.into())
            }
        }
    }

    /// Brings resident sessions forward to the heads the tailing task
    /// found in the store (committed by another process sharing it): the
    /// cached meta is forgotten (the next append numbers from the store's
    /// head and sees the other writer's meta changes), the window takes the
    /// events read with the head (restarting when they do not follow it),
    /// and the head watch moves, waking the subscribers, who pull what the
    /// window lacks from the store. Run on this thread, between commits, so
    /// it never interleaves with a publish: a head this process published
    /// meanwhile is never moved back, and no event enters a window twice.
    fn follow(&mut self, ahead: Vec<Ahead>) {
        for Ahead {
            session_id,
            head,
            events,
        } in ahead
        {
            if self
                .metas
                .get(&session_id)
                .is_some_and(|(_, m)| m.head_seq < head)
            {
                self.metas.remove(&session_id);
            }
            // Another process moved its log: its row is theirs to fold on.
            self.index.remove(&session_id);
            let Some(session) = self.shared.resident.peek(&session_id) else {
                continue;
            };
            if head <= *session.head.borrow() {
                continue;
            }
            session.has_meta.store(true, Ordering::Release);
            if let Some(last) = events.last() {
                let time = crate::store::event_time_ms(last.time.as_ref());
                session.updated_ms.fetch_max(time, Ordering::Relaxed);
            }
            let evs: Vec<EncodedEvent> = events
                .iter()
                .filter(|e| e.seq <= head)
                .map(EncodedEvent::of)
                .collect();
            if evs.last().is_some_and(|e| e.seq == head) {
                self.shared.resident.extend_window(&session, &evs);
            } else {
                // A window must end at the head: without the events up to
                // it, none (reads go to the store).
                self.shared.resident.clear_window(&session);
            }
            session.head.send_if_modified(|h| {
                let moved = head > *h;
                *h = (*h).max(head);
                moved
            });
        }
        // A reader loading a head from the store meanwhile loads it again.
        self.shared.published.fetch_add(1, Ordering::SeqCst);
        self.shared.resident.enforce_byte_budget();
    }
}
