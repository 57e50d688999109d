//! Many nodes on one shared store (PostgreSQL): this node's lease
//! ([`lease`]), the ownership of the sessions it writes to (claimed by the
//! manager before every write RPC, see [`crate::store::ownership`]), and the
//! reaper that takes over the sessions of dead nodes ([`reaper`]).
//!
//! A node joins the store at start-up under a new epoch and renews its
//! lease every third of it, against the database's clock. When it cannot
//! renew before its own conservative deadline (the start of its last
//! successful renewal plus the lease, less a margin, on its monotonic
//! clock, which a paused or partitioned node reaches no later than the
//! database ends the lease) it fences itself: it stops its CLI processes,
//! refuses writes, and rejoins under a new epoch. Whatever it still tries
//! to commit under the old epoch the store refuses.
//!
//! A store only this process writes (redb, memory) never joins: there is
//! no [`Node`], and nothing here runs.

pub mod lease;
pub mod reaper;

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::sync::watch;

use crate::store::{Store, StoreError};

/// Default of `--node-lease`.
pub const DEFAULT_NODE_LEASE: Duration = Duration::from_secs(10);

/// This node among the nodes sharing the store.
#[derive(Debug)]
pub struct Node {
    id: String,
    address: String,
    lease: Duration,
    /// False while fenced (between a lapsed lease and the rejoin).
    serving: watch::Sender<bool>,
    /// When the last successful join or renewal started.
    renewed_at: std::sync::Mutex<tokio::time::Instant>,
    /// Test hook: renewing (and rejoining) is suspended, as in a node
    /// paused past its lease.
    suspended: AtomicBool,
    /// One gate per session being claimed (see [`Node::claim_gate`]).
    gates: std::sync::Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
}

impl Node {
    /// Joins `store` as `id`, reached at `address`, with a lease of
    /// `lease`; `None` when the store is not shared.
    pub async fn join(
        store: Arc<dyn Store>,
        id: &str,
        address: &str,
        lease: Duration,
    ) -> Result<Option<Arc<Self>>, StoreError> {
        let started = tokio::time::Instant::now();
        let (i, a) = (id.to_owned(), address.to_owned());
        let joined = tokio::task::spawn_blocking(move || store.join_node(&i, &a, lease))
            .await
            .map_err(|e| StoreError::Rejected(format!("joining the store: {e}")))??;
        let Some(joined) = joined else {
            return Ok(None);
        };
        tracing::info!(
            node = id,
            epoch = joined.epoch,
            ?lease,
            "joined the nodes sharing the store"
        );
        Ok(Some(Arc::new(Self {
            id: id.to_owned(),
            address: address.to_owned(),
            lease,
            serving: watch::Sender::new(true),
            renewed_at: std::sync::Mutex::new(started),
            suspended: AtomicBool::new(false),
            gates: std::sync::Mutex::new(HashMap::new()),
        })))
    }

    /// The node id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The lease.
    pub fn lease(&self) -> Duration {
        self.lease
    }

    /// Whether this node may write now (its lease is live).
    pub fn serving(&self) -> bool {
        *self.serving.borrow()
    }

    /// Follows [`Node::serving`].
    pub fn watch_serving(&self) -> watch::Receiver<bool> {
        self.serving.subscribe()
    }

    /// Test hook: stops (true) or resumes (false) renewing the lease, as a
    /// node paused past its lease would.
    pub fn suspend_renewing(&self, suspended: bool) {
        self.suspended.store(suspended, Ordering::SeqCst);
    }

    /// The gate a claim of `session_id` holds until its takeover is done,
    /// so no other call of this node (nor the reaper) acts on the session
    /// while its previous owner's run is still being closed.
    pub fn claim_gate(&self, session_id: &str) -> Arc<tokio::sync::Mutex<()>> {
        let mut gates = self
            .gates
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        gates.entry(session_id.to_owned()).or_default().clone()
    }

    /// Forgets `session_id`'s gate when no claim holds it any more.
    pub fn release_gate(&self, session_id: &str) {
        let mut gates = self
            .gates
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if gates
            .get(session_id)
            .is_some_and(|g| Arc::strong_count(g) == 1)
        {
            gates.remove(session_id);
        }
    }

    fn suspended(&self) -> bool {
        self.suspended.load(Ordering::SeqCst)
    }

    /// The latest this node may still trust its lease: the start of the
    /// last successful renewal plus the lease, less a fifth of it (the
    /// statement's way to the database and back, and clock rate error).
    fn deadline(&self) -> tokio::time::Instant {
        let at = *self
            .renewed_at
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        at + self.lease - self.lease / 5
    }

    fn renewed(&self, started: tokio::time::Instant) {
        *self
            .renewed_at
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = started;
    }
}
