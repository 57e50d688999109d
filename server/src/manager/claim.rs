//! One owner per session among the nodes sharing a store (see
//! [`crate::node`]): a write RPC claims its session before anything
//! else, and a claim that takes a session over from a dead node first
//! closes the run the log still shows live there.

use super::SessionManager;
use crate::error::{Error, Result};
use crate::store::Claim;

impl SessionManager {
    /// Makes sure this node owns `session_id` before a write: a no-op on a
    /// store only this process writes. Refused with [`Error::NotOwner`]
    /// while this node is fenced, or naming the owner when another node's
    /// lease is live.
    pub async fn claim(&self, session_id: &str) -> Result<()> {
        let Some(node) = &self.inner.opts.node else {
            return Ok(());
        };
        if !node.serving() {
            return Err(Error::NotOwner {
                session_id: session_id.to_owned(),
                owner: None,
            });
        }
        let gate = node.claim_gate(session_id);
        let held = gate.lock().await;
        let outcome = self.claim_gated(session_id, node).await;
        drop(held);
        drop(gate);
        node.release_gate(session_id);
        outcome
    }

    async fn claim_gated(&self, session_id: &str, node: &crate::node::Node) -> Result<()> {
        match self.inner.logs.claim_session(session_id).await? {
            Claim::Owned => Ok(()),
            Claim::Claimed { previous } => {
                self.take_over(session_id, previous.as_deref(), node.id())
                    .await
            }
            Claim::Elsewhere { node_id, address } => Err(Error::NotOwner {
                session_id: session_id.to_owned(),
                owner: Some((node_id, address)),
            }),
        }
    }

    /// Closes the run `session_id`'s log left live on its previous owner
    /// (`run_end{SERVER_RESTART, inferred}`, as start-up recovery does).
    /// Its processes are killed only when that owner was this node under an
    /// earlier epoch: another node's pids mean nothing here, and that node
    /// stopped them when it fenced itself.
    async fn take_over(&self, session_id: &str, previous: Option<&str>, me: &str) -> Result<()> {
        let here = previous == Some(me);
        let kill = move |recorded: Option<(u32, u64)>, run_id: &str| {
            here && crate::supervise::kill_recorded_run(recorded, run_id)
        };
        let recovered =
            crate::recovery::recover_session(&self.inner.logs, &kill, session_id).await?;
        if let Some(r) = recovered {
            tracing::info!(%session_id, previous = ?previous, closed_run = ?r.closed_run, "took the session over");
        }
        Ok(())
    }
}
