//! This node's name among the nodes that share one store: `--node-id`, by
//! default the host name and the listen port (`host:50051`), so two nodes
//! on one machine differ. Answers name the node that served them, and the
//! store records which node runs each session under this name.
//!
//! [`Node`] is this node on a shared store (PostgreSQL): its lease, and the
//! ownership of the sessions it writes to (claimed by the manager before
//! every write RPC, see [`crate::store::ownership`]). The tasks that renew
//! the lease and take over the sessions of dead nodes drive the manager,
//! so they live above it, in the `cluster` module.
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

use std::fmt;
use std::net::SocketAddr;

/// The response header every answer names its node in (unary and
/// streaming, gRPC, grpc-web and plain HTTP, errors too), so an operator
/// or a test behind a balancer sees which node served a call.
pub const HEADER: &str = "x-agent-harness-node";

/// Longest node id accepted.
pub const MAX_NODE_ID_LEN: usize = 128;

/// A checked node id (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct NodeId(String);

impl NodeId {
    /// `flag` when given (checked), else this host's name and `listen`'s port.
    pub fn resolve(flag: Option<&str>, listen: SocketAddr) -> Result<Self, String> {
        match flag {
            Some(id) => Self::parse(id),
            None => {
                let host = nix::unistd::gethostname()
                    .ok()
                    .and_then(|h| h.into_string().ok())
                    .filter(|h| !h.is_empty())
                    .unwrap_or_else(|| "localhost".to_owned());
                Self::parse(&format!("{host}:{}", listen.port()))
            }
        }
    }

    /// A node id: 1 to [`MAX_NODE_ID_LEN`] characters of ASCII letters,
    /// digits and `.`, `_`, `-`, `:` (it travels in a header and in logs).
    pub fn parse(id: &str) -> Result<Self, String> {
        let ok_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | ':');
        if id.is_empty() || id.len() > MAX_NODE_ID_LEN || !id.chars().all(ok_char) {
            return Err(format!(
                "--node-id {id:?}: use 1 to {MAX_NODE_ID_LEN} characters of letters, digits, \
                 '.', '_', '-' and ':'"
            ));
        }
        Ok(Self(id.to_owned()))
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The id as the value of [`HEADER`] (its characters are all valid in
    /// a header).
    pub fn header_value(&self) -> http::HeaderValue {
        http::HeaderValue::from_str(&self.0).expect("a node id is a valid header value")
    }
}

impl fmt::Display for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

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
    pub(crate) id: String,
    pub(crate) address: String,
    pub(crate) lease: Duration,
    /// False while fenced (between a lapsed lease and the rejoin).
    pub(crate) serving: watch::Sender<bool>,
    /// When the last successful join or renewal started.
    pub(crate) renewed_at: std::sync::Mutex<tokio::time::Instant>,
    /// Test hook: renewing (and rejoining) is suspended, as in a node
    /// paused past its lease.
    pub(crate) suspended: AtomicBool,
    /// One gate per session being claimed (see [`Node::claim_gate`]).
    pub(crate) gates: std::sync::Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
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

    pub(crate) fn suspended(&self) -> bool {
        self.suspended.load(Ordering::SeqCst)
    }

    /// The latest this node may still trust its lease: the start of the
    /// last successful renewal plus the lease, less a fifth of it (the
    /// statement's way to the database and back, and clock rate error).
    pub(crate) fn deadline(&self) -> tokio::time::Instant {
        let at = *self
            .renewed_at
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        at + self.lease - self.lease / 5
    }

    pub(crate) fn renewed(&self, started: tokio::time::Instant) {
        *self
            .renewed_at
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = started;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_is_the_host_name_and_the_listen_port() {
        let id = NodeId::resolve(None, "127.0.0.1:50123".parse().unwrap()).unwrap();
        assert!(id.as_str().ends_with(":50123"), "{id}");
        assert!(id.as_str().len() > ":50123".len(), "{id}");
    }

    #[test]
    fn a_given_id_is_checked() {
        let listen = "127.0.0.1:1".parse().unwrap();
        assert_eq!(
            NodeId::resolve(Some("node-a"), listen).unwrap().as_str(),
            "node-a"
        );
        for bad in ["", "a b", "a\nb", "ä", &"x".repeat(MAX_NODE_ID_LEN + 1)] {
            let err = NodeId::parse(bad).unwrap_err();
            assert!(err.contains("--node-id"), "{err}");
        }
    }
}
