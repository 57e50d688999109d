//! A real PostgreSQL for the tests: one server per test binary
//! ([`agent_harness_pg_temp::Cluster`], started on first use) and a fresh
//! database for each test.
//!
//! `AGENT_HARNESS_TEST_STORE=postgres` makes [`crate::support::server`]
//! hand out [`PostgresStore`]s instead of `MemoryStore`s.

use std::sync::{Arc, OnceLock};

pub use agent_harness_pg_temp::Cluster;
use agent_harness_server::store::{PostgresStore, Store};

/// Whether the RPC support should use PostgreSQL (see the module docs).
pub fn selected() -> bool {
    std::env::var("AGENT_HARNESS_TEST_STORE").is_ok_and(|v| v == "postgres")
}

static CLUSTER: OnceLock<Cluster> = OnceLock::new();

/// The shared server, started on first call.
pub fn cluster() -> &'static Cluster {
    CLUSTER.get_or_init(Cluster::start)
}

/// A store on a fresh database.
pub fn store() -> PostgresStore {
    let url = cluster().fresh_database();
    PostgresStore::open(&url).unwrap_or_else(|e| panic!("opening {url}: {e}"))
}

/// [`store`] as the support's servers take it.
pub fn shared_store() -> Arc<dyn Store> {
    Arc::new(store())
}
