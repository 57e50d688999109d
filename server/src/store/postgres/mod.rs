//! PostgreSQL-backed [`Store`] (`--store-url postgres://…`): the event log
//! in a database that several servers can share, with the same contract as
//! [`super::RedbStore`].
//!
//! Tables (`server/migrations/postgres/`, applied when the store opens, see
//! [`schema`]): `events` and `full_events` keyed by `(session_id, seq)`,
//! `sessions` (the JSON meta), `receipts` (with an index by age for
//! pruning), `conversations` (with an index by session) and
//! `session_index` (with indexes by activity and by cwd, see [`index`]). Values are
//! stored exactly as redb stores them (prost-encoded events, JSON metas
//! and receipts), so both stores read rows the same way, including rows
//! that do not decode ([`super::decode_event`]). Only plain SQL: text,
//! bigint, bytea, `UNNEST`, no extensions.
//!
//! Every [`Store::commit`] is ONE transaction ([`write`]): the events,
//! their whole forms, the metas, the receipts, the conversation rows and a
//! `pg_notify` naming the sessions, which PostgreSQL delivers only once
//! the transaction has committed. A connection that dies mid-commit rolls
//! the whole transaction back. `head_seq` is read from the events table.
//!
//! **Sync over async.** The [`Store`] trait is synchronous (the log calls
//! it from its writer thread and `spawn_blocking`), the driver is async.
//! The store owns a small runtime of its own and each call spawns its
//! future there and waits for the result on the calling thread: a
//! `Runtime::block_on` would panic when the caller is itself inside a
//! runtime ("Cannot start a runtime from within a runtime"), which a
//! `spawn_blocking` thread or a test's async fn is. The runtime also keeps
//! the connections' driver tasks and the commit feed ([`notices`]) alive
//! whatever runtime the server runs on.
//!
//! **Faults.** A call that cannot reach the database (down, restarting)
//! fails within seconds (connect and pool timeouts, [`OP_TIMEOUT`] for a
//! statement that never answers), the log reports NOT_SERVING as for a full
//! disk, and the pool makes new connections once the database is back.

mod connect;
mod fence;
mod index;
mod notices;
mod read;
mod schema;
mod write;

use std::future::Future;
use std::time::Duration;

use agent_harness_protocol::pb;
use deadpool_postgres::Pool;
use tokio::sync::broadcast;

pub use self::connect::redact;
use self::read::Bound;
use super::{
    Claim, Commit, CommitNotice, IndexRow, Joined, ListPage, ListQuery, RawEvent, Receipt,
    ReceiptWrite, SessionMeta, Store, StoreError, StoreUsage, TranscriptEntry, decode_event,
};

/// The channel every commit notifies on.
const NOTICE_CHANNEL: &str = "agent_harness_commits";
/// PostgreSQL refuses a notice payload of 8000 bytes or more.
const NOTICE_PAYLOAD_MAX: usize = 7900;
/// The longest one call may take before it fails (a statement on a
/// connection whose peer vanished without closing it).
const OP_TIMEOUT: Duration = Duration::from_secs(30);

/// The PostgreSQL [`Store`].
pub struct PostgresStore {
    pool: Pool,
    /// The URL without its password, for messages.
    redacted: String,
    notices: broadcast::Sender<CommitNotice>,
    /// The node this store writes as once joined (see [`fence`]): every
    /// commit is fenced from then on.
    writer: std::sync::Mutex<Option<fence::Writer>>,
    /// `None` only while dropping.
    runtime: Option<tokio::runtime::Runtime>,
}

impl std::fmt::Debug for PostgresStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresStore")
            .field("url", &self.redacted)
            .finish_non_exhaustive()
    }
}

/// Connects to the database at `url` once, without touching its schema,
/// and returns its `server_version` (`agent-harness doctor`). Errors as
/// [`PostgresStore::open`]'s: the host and the URL without its password.
pub async fn probe(url: &str) -> Result<String, StoreError> {
    let url = connect::StoreUrl::parse(url)?;
    let client = url.connect().await?;
    let row = client
        .query_one("SHOW server_version", &[])
        .await
        .map_err(|e| StoreError::Postgres(format!("{}: {}", url.redacted, describe(&e))))?;
    row.try_get(0)
        .map_err(|e| StoreError::Postgres(format!("{}: {}", url.redacted, describe(&e))))
}

impl PostgresStore {
    /// Connects to the database at `url` (`postgres://user:password@host:port/db`,
    /// `sslmode=disable|require|verify-full`), applies the schema's
    /// migrations and starts the commit feed. Fails, naming the host and
    /// the URL without its password, when the URL is bad, the database
    /// cannot be reached, or its schema is newer than this binary's.
    pub fn open(url: &str) -> Result<Self, StoreError> {
        let url = connect::StoreUrl::parse(url)?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("store-postgres")
            .enable_all()
            .build()
            .map_err(|e| StoreError::Postgres(format!("starting the store's runtime: {e}")))?;
        let (notices, _) = broadcast::channel(notices::CAPACITY);
        let pool = url.pool()?;
        let store = Self {
            pool,
            redacted: url.redacted.clone(),
            notices: notices.clone(),
            writer: std::sync::Mutex::new(None),
            runtime: Some(runtime),
        };
        let migrating = url.clone();
        store.run(async move { schema::migrate(&migrating).await })?;
        store.rt().spawn(notices::listen(url, notices));
        tracing::info!(store = %store.redacted, "event store on PostgreSQL");
        Ok(store)
    }

    /// The URL the store was opened with, its password left out.
    pub fn redacted_url(&self) -> &str {
        &self.redacted
    }

    fn writer(&self) -> Option<fence::Writer> {
        self.writer
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    fn rt(&self) -> &tokio::runtime::Runtime {
        // Set from `open` until `drop`.
        self.runtime.as_ref().expect("the store's runtime")
    }

    /// Runs `op` on the store's runtime and waits for it here (see the
    /// module docs for why not `block_on`).
    fn run<T: Send + 'static>(
        &self,
        op: impl Future<Output = Result<T, StoreError>> + Send + 'static,
    ) -> Result<T, StoreError> {
        // The timer is made on the store's runtime (it needs one).
        let task = self
            .rt()
            .spawn(async move { tokio::time::timeout(OP_TIMEOUT, op).await });
        match futures::executor::block_on(task) {
            Ok(Ok(out)) => out,
            Ok(Err(_)) => Err(StoreError::Postgres(format!(
                "the database at {} did not answer within {OP_TIMEOUT:?}",
                self.redacted
            ))),
            Err(e) => Err(StoreError::Postgres(format!("store task failed: {e}"))),
        }
    }
}

impl Drop for PostgresStore {
    fn drop(&mut self) {
        // Dropping a runtime blocks, which panics inside another runtime
        // (where a test or the server may drop the store).
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
    }
}

/// A connection from the pool.
async fn client(pool: &Pool) -> Result<deadpool_postgres::Object, StoreError> {
    pool.get()
        .await
        .map_err(|e| StoreError::Postgres(format!("no database connection: {e}")))
}

/// A driver error with what the database said, or what failed underneath.
fn describe(e: &tokio_postgres::Error) -> String {
    if let Some(db) = e.as_db_error() {
        return format!("{}: {} ({})", db.severity(), db.message(), db.code().code());
    }
    let mut text = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

fn pgerr(e: tokio_postgres::Error) -> StoreError {
    StoreError::Postgres(describe(&e))
}

/// A seq as the bigint column holds it (seqs never come near `i64::MAX`;
/// a bound past it reads as the largest).
fn seq_sql(seq: u64) -> i64 {
    i64::try_from(seq).unwrap_or(i64::MAX)
}

fn limit_sql(limit: usize) -> i64 {
    i64::try_from(limit).unwrap_or(i64::MAX)
}

impl Store for PostgresStore {
    fn commit(&self, commit: Commit<'_>) -> Result<(), StoreError> {
        let batch = write::Batch::of(commit);
        let pool = self.pool.clone();
        self.run(write::commit(pool, batch, self.writer()))
    }

    fn receipt(&self, session_id: &str, key: &str) -> Result<Option<Receipt>, StoreError> {
        let pool = self.pool.clone();
        self.run(read::receipt(pool, session_id.to_owned(), key.to_owned()))
    }

    fn prune_receipts(&self, before_ms: i64, limit: usize) -> Result<usize, StoreError> {
        let pool = self.pool.clone();
        self.run(write::prune_receipts(pool, before_ms, limit_sql(limit)))
    }

    fn receipt_count(&self) -> Result<usize, StoreError> {
        let pool = self.pool.clone();
        let n = self.run(read::count(pool, "SELECT count(*) FROM receipts"))?;
        Ok(usize::try_from(n).unwrap_or(usize::MAX))
    }

    fn read_range_raw(
        &self,
        session_id: &str,
        after_seq: u64,
        limit: usize,
        max_bytes: usize,
        event_cap: usize,
    ) -> Result<Vec<RawEvent>, StoreError> {
        if after_seq >= i64::MAX as u64 {
            return Ok(Vec::new());
        }
        let bound = Bound {
            limit: limit_sql(limit),
            max_bytes,
            event_cap,
        };
        let pool = self.pool.clone();
        let from = seq_sql(after_seq);
        self.run(read::scan(pool, session_id.to_owned(), from, false, bound))
    }

    fn read_before_raw(
        &self,
        session_id: &str,
        before_seq: u64,
        limit: usize,
        max_bytes: usize,
        event_cap: usize,
    ) -> Result<Vec<RawEvent>, StoreError> {
        let bound = Bound {
            limit: limit_sql(limit),
            max_bytes,
            event_cap,
        };
        let pool = self.pool.clone();
        let before = seq_sql(before_seq);
        let mut out = self.run(read::scan(pool, session_id.to_owned(), before, true, bound))?;
        out.reverse();
        Ok(out)
    }

    fn read_full(&self, session_id: &str, seq: u64) -> Result<Option<pb::Event>, StoreError> {
        Ok(self
            .read_full_bytes(session_id, seq)?
            .map(|bytes| decode_event(session_id, seq, &bytes)))
    }

    fn read_full_bytes(&self, session_id: &str, seq: u64) -> Result<Option<Vec<u8>>, StoreError> {
        let pool = self.pool.clone();
        self.run(read::full_bytes(pool, session_id.to_owned(), seq))
    }

    fn meta(&self, session_id: &str) -> Result<Option<SessionMeta>, StoreError> {
        let pool = self.pool.clone();
        self.run(read::meta(pool, session_id.to_owned()))
    }

    fn put_meta(&self, meta: &SessionMeta) -> Result<(), StoreError> {
        self.append_batch(&[], std::slice::from_ref(meta))
    }

    fn sessions(&self, after: Option<&str>, limit: usize) -> Result<Vec<SessionMeta>, StoreError> {
        let pool = self.pool.clone();
        let after = after.map(str::to_owned);
        self.run(read::sessions(pool, after, limit_sql(limit)))
    }

    fn conversation_sessions(&self, resume_id: &str) -> Result<Vec<String>, StoreError> {
        let pool = self.pool.clone();
        self.run(read::conversation_sessions(pool, resume_id.to_owned()))
    }

    fn transcript(&self, session_id: &str) -> Result<Vec<TranscriptEntry>, StoreError> {
        let pool = self.pool.clone();
        self.run(read::transcript(pool, session_id.to_owned()))
    }

    fn delete_session(
        &self,
        session_id: &str,
        receipt: Option<&ReceiptWrite>,
    ) -> Result<bool, StoreError> {
        let pool = self.pool.clone();
        self.run(write::delete_session(
            pool,
            session_id.to_owned(),
            receipt.cloned(),
            self.writer(),
        ))
    }

    fn usage(&self) -> Result<StoreUsage, StoreError> {
        let pool = self.pool.clone();
        self.run(read::usage(pool))
    }

    fn session_count(&self) -> Result<u64, StoreError> {
        let pool = self.pool.clone();
        self.run(read::count(pool, "SELECT count(*) FROM sessions"))
    }

    fn index_rows(&self, session_ids: &[String]) -> Result<Vec<Option<IndexRow>>, StoreError> {
        let pool = self.pool.clone();
        self.run(index::rows(pool, session_ids.to_vec()))
    }

    fn put_index(&self, rows: &[IndexRow]) -> Result<(), StoreError> {
        let pool = self.pool.clone();
        self.run(index::put_index(pool, index::Rows::of(rows)))
    }

    fn list_index(&self, query: &ListQuery) -> Result<ListPage, StoreError> {
        let pool = self.pool.clone();
        self.run(index::list(pool, query.clone()))
    }

    fn commit_notices(&self) -> Option<broadcast::Receiver<CommitNotice>> {
        Some(self.notices.subscribe())
    }

    fn heads(&self, session_ids: &[String]) -> Result<Vec<u64>, StoreError> {
        let pool = self.pool.clone();
        self.run(read::heads(pool, session_ids.to_vec()))
    }

    fn join_node(
        &self,
        node_id: &str,
        address: &str,
        lease: Duration,
    ) -> Result<Option<Joined>, StoreError> {
        let pool = self.pool.clone();
        let (id, addr) = (node_id.to_owned(), address.to_owned());
        let epoch = self.run(fence::join(pool, id, addr, lease))?;
        *self
            .writer
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(fence::Writer {
            node_id: node_id.to_owned(),
            epoch,
        });
        Ok(Some(Joined {
            epoch: u64::try_from(epoch).unwrap_or_default(),
        }))
    }

    fn renew_node(&self, lease: Duration) -> Result<bool, StoreError> {
        let Some(writer) = self.writer() else {
            return Ok(true);
        };
        let pool = self.pool.clone();
        self.run(fence::renew(pool, writer, lease))
    }

    fn leave_node(&self) -> Result<(), StoreError> {
        let Some(writer) = self.writer() else {
            return Ok(());
        };
        let pool = self.pool.clone();
        self.run(fence::leave(pool, writer))
    }

    fn claim_session(&self, session_id: &str) -> Result<Claim, StoreError> {
        let Some(writer) = self.writer() else {
            return Ok(Claim::Owned);
        };
        let pool = self.pool.clone();
        self.run(fence::claim(pool, writer, session_id.to_owned()))
    }

    fn orphaned_sessions(&self, grace: Duration, limit: usize) -> Result<Vec<String>, StoreError> {
        let pool = self.pool.clone();
        self.run(fence::orphaned(pool, grace, limit_sql(limit)))
    }
}
