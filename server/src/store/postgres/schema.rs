//! The tables, as versioned migrations (`server/migrations/postgres/`)
//! applied by refinery when a store opens.
//!
//! Several servers may open one database at once: each takes a session
//! advisory lock first, so one applies the migrations while the others
//! wait and then find nothing left to do. A database holding a migration
//! this binary does not know (a newer server wrote it) is refused before
//! anything is touched, naming the versions: an older binary must not
//! write into a schema it does not understand.
//!
//! The tables live in the first schema of the connection's `search_path`:
//! `public` by default, or the one a URL names with
//! `?options=-c%20search_path%3DNAME`, created when missing, so several
//! deployments (or test servers) can share one database, each in a schema
//! of its own.
//!
//! A change to the schema is a new file (`V2__what.sql`), never an edit of
//! one already released: refinery refuses to start on a database whose
//! applied migration differs from the binary's (name or checksum).

use super::super::StoreError;
use super::connect::StoreUrl;

refinery::embed_migrations!("migrations/postgres");

/// The advisory lock's key: any constant the database's other users do not
/// take ("agent-ha" in ASCII).
const MIGRATION_LOCK: i64 = 0x6167_656e_742d_6861;

/// Brings the database's schema up to this binary's, under the lock.
pub(super) async fn migrate(url: &StoreUrl) -> Result<(), StoreError> {
    let mut client = url.connect().await?;
    let fail = |what: &str, e: &dyn std::fmt::Display| {
        StoreError::Postgres(format!("{what} on {}: {e}", url.redacted))
    };
    client
        .execute("SELECT pg_advisory_lock($1)", &[&MIGRATION_LOCK])
        .await
        .map_err(|e| fail("taking the migration lock", &super::describe(&e)))?;
    let outcome = match ensure_schema(&client, url).await {
        Ok(()) => apply(&mut client, url).await,
        Err(e) => Err(e),
    };
    // Closing the connection releases the lock too; unlocking first lets
    // the next server in at once.
    let _ = client
        .execute("SELECT pg_advisory_unlock($1)", &[&MIGRATION_LOCK])
        .await;
    outcome
}

/// Creates the first schema of the `search_path` when it is missing (see
/// the module docs); `$user` and `public` are left alone.
async fn ensure_schema(client: &tokio_postgres::Client, url: &StoreUrl) -> Result<(), StoreError> {
    let fail = |e: &tokio_postgres::Error| {
        StoreError::Postgres(format!(
            "creating the search_path schema on {}: {}",
            url.redacted,
            super::describe(e)
        ))
    };
    let path: String = client
        .query_one("SHOW search_path", &[])
        .await
        .map_err(|e| fail(&e))?
        .get(0);
    let Some(first) = first_schema(&path) else {
        return Ok(());
    };
    let quoted = format!("\"{}\"", first.replace('"', "\"\""));
    client
        .batch_execute(&format!("CREATE SCHEMA IF NOT EXISTS {quoted}"))
        .await
        .map_err(|e| fail(&e))
}

/// The first schema a `search_path` value names, unquoted; `None` for
/// `$user`, `public` or nothing.
fn first_schema(path: &str) -> Option<String> {
    let first = path.split(',').next()?.trim();
    let name = match first.strip_prefix('"').and_then(|f| f.strip_suffix('"')) {
        Some(quoted) => quoted.replace("\"\"", "\""),
        None => first.to_owned(),
    };
    (!name.is_empty() && name != "$user" && name != "public").then_some(name)
}

async fn apply(client: &mut tokio_postgres::Client, url: &StoreUrl) -> Result<(), StoreError> {
    let runner = migrations::runner();
    let fail = |what: &str, e: &dyn std::fmt::Display| {
        StoreError::Postgres(format!("{what} on {}: {e}", url.redacted))
    };
    let history = client
        .query_one(
            "SELECT to_regclass('refinery_schema_history') IS NOT NULL",
            &[],
        )
        .await
        .map_err(|e| fail("reading the schema version", &super::describe(&e)))?;
    if history.get::<_, bool>(0) {
        let applied = runner
            .get_applied_migrations_async(client)
            .await
            .map_err(|e| fail("reading the schema version", &e))?;
        let known: Vec<i64> = runner
            .get_migrations()
            .iter()
            .map(|m| i64::from(m.version()))
            .collect();
        let unknown: Vec<String> = applied
            .iter()
            .filter(|m| !known.contains(&i64::from(m.version())))
            .map(|m| format!("V{}__{}", m.version(), m.name()))
            .collect();
        if !unknown.is_empty() {
            return Err(StoreError::Postgres(format!(
                "the database at {} has a newer schema than this server knows: it holds \
                 migration(s) {} while this server knows V1..=V{}; run a newer server",
                url.redacted,
                unknown.join(", "),
                known.iter().max().copied().unwrap_or(0),
            )));
        }
    }
    let report = runner
        .run_async(client)
        .await
        .map_err(|e| fail("applying the schema migrations", &e))?;
    for m in report.applied_migrations() {
        tracing::info!(version = m.version(), name = m.name(), store = %url.redacted, "schema migration applied");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::first_schema;

    #[test]
    fn the_first_schema_of_a_search_path() {
        assert_eq!(first_schema("\"$user\", public"), None);
        assert_eq!(first_schema("public"), None);
        assert_eq!(first_schema(""), None);
        assert_eq!(first_schema("t_1, public").as_deref(), Some("t_1"));
        assert_eq!(first_schema("\"we\"\"ird\"").as_deref(), Some("we\"ird"));
    }
}
