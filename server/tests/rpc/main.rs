//! The gRPC service against stand-in processes: sessions, derived state, timers on paused time, idempotency keys, launch policy, limits, shutdown, storage faults (a full disk, a database killed), the store URL, transport security, metrics, the web console, recovery, fuzz.
//!
//! One test binary per concern (build and link once); each module below
//! was its own binary before.

#[path = "../support/mod.rs"]
mod support;

mod agents;
mod cluster;
mod connections;
mod console;
mod deletion;
mod derived;
mod export;
mod files;
mod full_disk;
mod fuzz;
mod idempotency;
mod idle_evict;
mod input_policy;
mod launch_policy;
mod limits;
mod list;
mod list_agents;
mod memory;
mod metrics;
mod ownership;
mod poisoned;
mod recovery_restart;
mod routing;
mod session;
mod shared_store;
mod shutdown;
mod size;
mod storage_faults;
mod store_url;
mod timers;
mod title;
mod transport;
mod upgrade;
