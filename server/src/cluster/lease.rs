//! Keeping this node's lease: renewal every third of the lease, and
//! self-fencing when a renewal does not succeed in time (see the
//! [module docs](super)).

use std::sync::Arc;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::manager::SessionManager;
use crate::node::Node;

/// Renews `node`'s lease until `stop`; fences the node when the lease is
/// lost and rejoins.
pub async fn keep(node: Arc<Node>, manager: SessionManager, stop: CancellationToken) {
    let logs = manager.logs().clone();
    let period = node.lease / 3;
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(period) => {}
        }
        let deadline = node.deadline();
        let lost = if node.suspended() {
            Instant::now() >= deadline
        } else {
            let started = Instant::now();
            // A database that does not answer must not hold the node past
            // its deadline: the renewal races it.
            match tokio::time::timeout_at(deadline, logs.renew_node(node.lease)).await {
                Ok(Ok(true)) => {
                    node.renewed(started);
                    false
                }
                Ok(Ok(false)) => true,
                Ok(Err(e)) => {
                    tracing::warn!(error = %e, "renewing the node lease failed; retrying");
                    Instant::now() >= deadline
                }
                Err(_) => true,
            }
        };
        if lost {
            fence(&node, &manager).await;
            if !rejoin(&node, &manager, &stop).await {
                return;
            }
        }
    }
}

/// Stops writing: refuses write RPCs and stops every CLI process (each run
/// ends in the log if this node can still write it; else the node that
/// takes the session over writes it).
async fn fence(node: &Node, manager: &SessionManager) {
    tracing::error!(node = %node.id, "node lease lost: fencing (stopping every run, refusing writes)");
    node.serving.send_replace(false);
    manager.stop_all_runs().await;
}

/// Joins again under a new epoch, retrying every third of the lease;
/// false when stopped first.
async fn rejoin(node: &Node, manager: &SessionManager, stop: &CancellationToken) -> bool {
    let logs = manager.logs();
    loop {
        if !node.suspended() {
            let started = Instant::now();
            match logs.join_node(&node.id, &node.address, node.lease).await {
                Ok(joined) => {
                    node.renewed(started);
                    node.serving.send_replace(true);
                    tracing::info!(node = %node.id, epoch = ?joined.map(|j| j.epoch), "rejoined");
                    return true;
                }
                Err(e) => tracing::warn!(error = %e, "rejoining failed; retrying"),
            }
        }
        tokio::select! {
            _ = stop.cancelled() => return false,
            _ = tokio::time::sleep(node.lease / 3) => {}
        }
    }
}
