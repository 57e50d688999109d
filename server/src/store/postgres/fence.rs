//! Node leases, session ownership and the fence every commit passes
//! through (see [`crate::store::ownership`]), in the `nodes` and `owners`
//! tables. Leases are judged by the database's clock (`now()`) only: the
//! nodes' clocks may disagree, the database's is the one they share.
//!
//! A commit is fenced by two checks in its own transaction, both needed:
//! the writer's node row still has the epoch it joined with and a live
//! lease (else a stale owner that paused past its lease could alternate
//! commits with the new owner), and a compare-and-set of each session's
//! `owners.head_seq` from the head this writer numbered from to the new
//! one, under its node and epoch (else two writers could both append after
//! the same head: a duplicate or a gap). A deletion passes the same two
//! checks without the head ([`owns`]).

use std::time::Duration;

use deadpool_postgres::Pool;

use super::super::{Claim, StoreError};
use super::{client, pgerr};

/// Who this store writes as, once it has joined.
#[derive(Debug, Clone)]
pub(super) struct Writer {
    pub(super) node_id: String,
    pub(super) epoch: i64,
}

/// A lease as an interval PostgreSQL adds to `now()`, in microseconds.
fn lease_micros(lease: Duration) -> i64 {
    i64::try_from(lease.as_micros()).unwrap_or(i64::MAX)
}

/// Joins: a new epoch (one more than the node's last) and a lease from now.
pub(super) async fn join(
    pool: Pool,
    node_id: String,
    address: String,
    lease: Duration,
) -> Result<i64, StoreError> {
    let client = client(&pool).await?;
    let row = client
        .query_one(
            "INSERT INTO nodes (node_id, epoch, lease_until, address) \
             VALUES ($1, 1, now() + $2::bigint * interval '1 microsecond', $3) \
             ON CONFLICT (node_id) DO UPDATE SET epoch = nodes.epoch + 1, \
               lease_until = EXCLUDED.lease_until, address = EXCLUDED.address \
             RETURNING epoch",
            &[&node_id, &lease_micros(lease), &address],
        )
        .await
        .map_err(pgerr)?;
    Ok(row.get(0))
}

/// Renews the lease if it is still live under `writer`'s epoch.
pub(super) async fn renew(pool: Pool, writer: Writer, lease: Duration) -> Result<bool, StoreError> {
    let client = client(&pool).await?;
    let n = client
        .execute(
            "UPDATE nodes SET lease_until = now() + $3::bigint * interval '1 microsecond' \
             WHERE node_id = $1 AND epoch = $2 AND lease_until > now()",
            &[&writer.node_id, &writer.epoch, &lease_micros(lease)],
        )
        .await
        .map_err(pgerr)?;
    Ok(n == 1)
}

/// Ends the lease now, if it is still `writer`'s.
pub(super) async fn leave(pool: Pool, writer: Writer) -> Result<(), StoreError> {
    let client = client(&pool).await?;
    client
        .execute(
            "UPDATE nodes SET lease_until = least(lease_until, now()) \
             WHERE node_id = $1 AND epoch = $2",
            &[&writer.node_id, &writer.epoch],
        )
        .await
        .map_err(pgerr)?;
    Ok(())
}

/// Claims `session_id` for `writer` in one statement: a new row (its head
/// taken from the events), or the row of an owner whose lease has expired
/// (its head kept: every fenced commit kept it exact). Nothing when the
/// writer's own lease is not live.
const CLAIM: &str = "WITH me AS (SELECT 1 FROM nodes WHERE node_id = $2 AND epoch = $3 \
       AND lease_until > now()), \
     prev AS (SELECT node_id FROM owners WHERE session_id = $1) \
     INSERT INTO owners (session_id, node_id, epoch, head_seq) \
     SELECT $1, $2, $3, (SELECT coalesce(max(seq), 0) FROM events WHERE session_id = $1) \
     FROM me \
     ON CONFLICT (session_id) DO UPDATE SET node_id = EXCLUDED.node_id, epoch = EXCLUDED.epoch \
     WHERE (owners.node_id, owners.epoch) <> ($2, $3) AND NOT EXISTS ( \
       SELECT 1 FROM nodes n WHERE n.node_id = owners.node_id AND n.epoch = owners.epoch \
       AND n.lease_until > now()) \
     RETURNING (SELECT node_id FROM prev)";

pub(super) async fn claim(
    pool: Pool,
    writer: Writer,
    session_id: String,
) -> Result<Claim, StoreError> {
    let client = client(&pool).await?;
    let claimed = client
        .query_opt(CLAIM, &[&session_id, &writer.node_id, &writer.epoch])
        .await
        .map_err(pgerr)?;
    if let Some(row) = claimed {
        let previous: Option<String> = row.get(0);
        return Ok(Claim::Claimed { previous });
    }
    let owner = client
        .query_opt(
            "SELECT o.node_id, o.epoch, coalesce(n.address, ''), EXISTS (SELECT 1 FROM nodes \
               WHERE node_id = $2 AND epoch = $3 AND lease_until > now()) \
             FROM owners o LEFT JOIN nodes n ON n.node_id = o.node_id WHERE o.session_id = $1",
            &[&session_id, &writer.node_id, &writer.epoch],
        )
        .await
        .map_err(pgerr)?;
    match owner {
        // This node's own lease has lapsed: whoever owns the session, this
        // node may not write.
        Some(row) if !row.get::<_, bool>(3) => Err(StoreError::Fenced {
            sessions: vec![session_id],
        }),
        Some(row) => {
            let (node_id, epoch): (String, i64) = (row.get(0), row.get(1));
            if node_id == writer.node_id && epoch == writer.epoch {
                Ok(Claim::Owned)
            } else {
                Ok(Claim::Elsewhere {
                    node_id,
                    address: row.get(2),
                })
            }
        }
        // No row and none inserted: this node's own lease is not live.
        None => Err(StoreError::Fenced {
            sessions: vec![session_id],
        }),
    }
}

/// Sessions whose owner's lease expired more than `grace` ago.
pub(super) async fn orphaned(
    pool: Pool,
    grace: Duration,
    limit: i64,
) -> Result<Vec<String>, StoreError> {
    let client = client(&pool).await?;
    let rows = client
        .query(
            "SELECT o.session_id FROM owners o LEFT JOIN nodes n ON n.node_id = o.node_id \
             WHERE n.node_id IS NULL OR n.epoch <> o.epoch \
               OR n.lease_until < now() - $1::bigint * interval '1 microsecond' \
             ORDER BY o.session_id LIMIT $2",
            &[&lease_micros(grace), &limit],
        )
        .await
        .map_err(pgerr)?;
    Ok(rows.iter().map(|r| r.get(0)).collect())
}

/// The sessions a commit writes to, each with the head the writer numbered
/// from and the head it commits (equal for a meta change alone).
#[derive(Debug, Default)]
pub(super) struct Heads {
    pub(super) sessions: Vec<String>,
    pub(super) old: Vec<i64>,
    pub(super) new: Vec<i64>,
}

/// The fence, inside a commit's transaction: the sessions of `heads` that
/// `writer` may NOT write (empty when all pass).
pub(super) async fn check(
    txn: &deadpool_postgres::Transaction<'_>,
    writer: &Writer,
    heads: &Heads,
) -> Result<Vec<String>, StoreError> {
    if heads.sessions.is_empty() {
        return Ok(Vec::new());
    }
    // Locks the node row against a rejoin until this commit ends.
    let live = txn
        .query_opt(
            "SELECT 1 FROM nodes WHERE node_id = $1 AND epoch = $2 AND lease_until > now() \
             FOR SHARE",
            &[&writer.node_id, &writer.epoch],
        )
        .await
        .map_err(pgerr)?;
    if live.is_none() {
        return Ok(heads.sessions.clone());
    }
    let stmt = txn
        .prepare_cached(
            "UPDATE owners o SET head_seq = b.new \
             FROM UNNEST($3::text[], $4::bigint[], $5::bigint[]) AS b(session_id, old, new) \
             WHERE o.session_id = b.session_id AND o.node_id = $1 AND o.epoch = $2 \
               AND o.head_seq = b.old \
             RETURNING o.session_id",
        )
        .await
        .map_err(pgerr)?;
    let passed: Vec<String> = txn
        .query(
            &stmt,
            &[
                &writer.node_id,
                &writer.epoch,
                &heads.sessions,
                &heads.old,
                &heads.new,
            ],
        )
        .await
        .map_err(pgerr)?
        .iter()
        .map(|r| r.get(0))
        .collect();
    Ok(heads
        .sessions
        .iter()
        .filter(|s| !passed.contains(s))
        .cloned()
        .collect())
}

/// The fence of a deletion, inside its transaction: whether `writer`'s
/// lease is live under the epoch it joined with and it owns `session_id`
/// under that epoch. Locks the node row against a rejoin and the owner row
/// against another node's claim until the transaction ends.
pub(super) async fn owns(
    txn: &deadpool_postgres::Transaction<'_>,
    writer: &Writer,
    session_id: &str,
) -> Result<bool, StoreError> {
    let row = txn
        .query_opt(
            "SELECT 1 FROM nodes n JOIN owners o ON o.node_id = n.node_id AND o.epoch = n.epoch \
             WHERE n.node_id = $1 AND n.epoch = $2 AND n.lease_until > now() \
               AND o.session_id = $3 \
             FOR SHARE OF n FOR UPDATE OF o",
            &[&writer.node_id, &writer.epoch, &session_id],
        )
        .await
        .map_err(pgerr)?;
    Ok(row.is_some())
}
