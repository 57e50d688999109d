//! The reaper: every lease interval, a live node claims the sessions whose
//! owner's lease expired more than a lease ago (a dead node, or this node
//! under an earlier epoch) and closes the run their log left live, even
//! when no client asks about them.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use crate::manager::SessionManager;
use crate::node::Node;

/// Sessions claimed per pass.
const PASS: usize = 100;

/// Reaps until `stop`.
pub async fn reap(node: Arc<Node>, manager: SessionManager, stop: CancellationToken) {
    loop {
        if node.serving() {
            pass(&node, &manager).await;
        }
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(node.lease) => {}
        }
    }
}

/// One pass: claims the orphaned sessions (each claim closes the run the
/// log left live). Run once before the server serves, so the runs a
/// previous instance of this node left live are closed before any client
/// reads them, as recovery does on a store of one node.
pub async fn pass(node: &Node, manager: &SessionManager) {
    let orphans = match manager.logs().orphaned_sessions(node.lease, PASS).await {
        Ok(o) => o,
        Err(e) => {
            tracing::warn!(error = %e, "reaper: listing orphaned sessions failed");
            return;
        }
    };
    for session_id in orphans {
        // Another node may claim it first: then it is theirs, and fine.
        match manager.claim(&session_id).await {
            Ok(()) | Err(crate::error::Error::NotOwner { .. }) => {}
            Err(e) => tracing::warn!(%session_id, error = %e, "reaper: taking over failed"),
        }
    }
}
