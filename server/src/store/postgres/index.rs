//! The session index in PostgreSQL (see [`super::super::index`]): the
//! `session_index` table, its filters, orders and pages in SQL (WHERE,
//! ORDER BY over the indexes by activity and by cwd, a keyset as a row
//! comparison over the same keys, LIMIT), so every node
//! sharing the database lists from one table without reading it whole.

use deadpool_postgres::Pool;
use tokio_postgres::types::ToSql;

use super::super::{IndexRow, ListPage, ListQuery, Order, StoreError};
use super::{client, limit_sql, pgerr, seq_sql};

/// Index rows as column arrays, one per session (the last given wins).
#[derive(Default)]
pub(super) struct Rows {
    ids: Vec<String>,
    heads: Vec<i64>,
    cwds: Vec<String>,
    agents: Vec<String>,
    statuses: Vec<i32>,
    updated: Vec<i64>,
    search: Vec<String>,
    bodies: Vec<Vec<u8>>,
}

impl Rows {
    pub(super) fn of(rows: &[IndexRow]) -> Self {
        let mut out = Self::default();
        for r in rows.iter().rev() {
            if out.ids.contains(&r.session_id) {
                continue;
            }
            out.ids.push(r.session_id.clone());
            out.heads.push(seq_sql(r.head_seq));
            out.cwds.push(r.cwd.clone());
            out.agents.push(r.agent.clone());
            out.statuses.push(r.status);
            out.updated.push(r.updated_ns);
            out.search.push(r.haystack());
            out.bodies.push(r.encode());
        }
        out
    }
}

/// Writes `rows` in `txn`, each unless the stored row reflects a later head.
pub(super) async fn put(
    txn: &deadpool_postgres::Transaction<'_>,
    rows: &Rows,
) -> Result<(), StoreError> {
    if rows.ids.is_empty() {
        return Ok(());
    }
    let stmt = txn
        .prepare_cached(
            "INSERT INTO session_index \
               (session_id, head_seq, cwd, agent, status, updated_ns, search, body) \
             SELECT * FROM UNNEST($1::text[], $2::bigint[], $3::text[], $4::text[], \
               $5::int4[], $6::bigint[], $7::text[], $8::bytea[]) \
             ON CONFLICT (session_id) DO UPDATE SET head_seq = EXCLUDED.head_seq, \
               cwd = EXCLUDED.cwd, agent = EXCLUDED.agent, status = EXCLUDED.status, \
               updated_ns = EXCLUDED.updated_ns, search = EXCLUDED.search, body = EXCLUDED.body \
             WHERE session_index.head_seq <= EXCLUDED.head_seq",
        )
        .await
        .map_err(pgerr)?;
    txn.execute(
        &stmt,
        &[
            &rows.ids,
            &rows.heads,
            &rows.cwds,
            &rows.agents,
            &rows.statuses,
            &rows.updated,
            &rows.search,
            &rows.bodies,
        ],
    )
    .await
    .map_err(pgerr)?;
    Ok(())
}

/// [`super::super::Store::put_index`]: its own transaction.
pub(super) async fn put_index(pool: Pool, rows: Rows) -> Result<(), StoreError> {
    let mut client = client(&pool).await?;
    let txn = client.transaction().await.map_err(pgerr)?;
    put(&txn, &rows).await?;
    txn.commit().await.map_err(pgerr)
}

/// The rows of `ids`, in order.
pub(super) async fn rows(
    pool: Pool,
    ids: Vec<String>,
) -> Result<Vec<Option<IndexRow>>, StoreError> {
    let client = client(&pool).await?;
    let stmt = client
        .prepare_cached(
            "SELECT k.id, i.body FROM UNNEST($1::text[]) WITH ORDINALITY AS k(id, n) \
             LEFT JOIN session_index i ON i.session_id = k.id ORDER BY k.n",
        )
        .await
        .map_err(pgerr)?;
    let found = client.query(&stmt, &[&ids]).await.map_err(pgerr)?;
    Ok(found
        .iter()
        .map(|r| {
            let id: &str = r.get(0);
            r.get::<_, Option<&[u8]>>(1)
                .and_then(|b| IndexRow::decode(id, b))
        })
        .collect())
}

/// A page of the index and the number of matches, read in one snapshot.
pub(super) async fn list(pool: Pool, q: ListQuery) -> Result<ListPage, StoreError> {
    let mut params = Args::default();
    let mut filters = vec!["true".to_owned()];
    if !q.text.is_empty() {
        filters.push(format!(
            "strpos(search, {}) > 0",
            params.push(Box::new(q.text.clone()))
        ));
    }
    if !q.statuses.is_empty() {
        filters.push(format!(
            "status = ANY({}::int4[])",
            params.push(Box::new(q.statuses.clone()))
        ));
    }
    if !q.agent.is_empty() {
        filters.push(format!(
            "agent = {}",
            params.push(Box::new(q.agent.clone()))
        ));
    }
    if !q.cwd.is_empty() {
        filters.push(format!("cwd = {}", params.push(Box::new(q.cwd.clone()))));
    }
    let filters = filters.join(" AND ");
    // The count takes the filters' parameters, which come first.
    let counted = params.0.len();
    let keyset = match &q.after {
        None => "true".to_owned(),
        Some(p) if q.order == Order::SessionId => {
            format!(
                "session_id > {}",
                params.push(Box::new(p.session_id.clone()))
            )
        }
        Some(p) => {
            // Row comparisons over the indexed keys: newest first is the
            // negated time ascending, so one index range serves the page.
            let cwd = (q.order == Order::Cwd).then(|| params.push(Box::new(p.cwd.clone())));
            let at = params.push(Box::new(p.updated_ns.saturating_neg()));
            let id = params.push(Box::new(p.session_id.clone()));
            match cwd {
                Some(cwd) => format!("(cwd, -updated_ns, session_id) > ({cwd}, {at}, {id})"),
                None => format!("(-updated_ns, session_id) > ({at}, {id})"),
            }
        }
    };
    let order = match q.order {
        Order::SessionId => "session_id",
        Order::RecentActivity => "-updated_ns, session_id",
        Order::Cwd => "cwd, -updated_ns, session_id",
    };
    let limit = params.push(Box::new(limit_sql(q.limit)));
    let page_sql = format!(
        "SELECT session_id, body FROM session_index WHERE {filters} AND {keyset} \
         ORDER BY {order} LIMIT {limit}"
    );
    let count_sql = format!("SELECT count(*) FROM session_index WHERE {filters}");
    let mut client = client(&pool).await?;
    let txn = client
        .build_transaction()
        .isolation_level(tokio_postgres::IsolationLevel::RepeatableRead)
        .read_only(true)
        .start()
        .await
        .map_err(pgerr)?;
    let refs: Vec<&(dyn ToSql + Sync)> = params
        .0
        .iter()
        .map(|p| p.as_ref() as &(dyn ToSql + Sync))
        .collect();
    let total: i64 = txn
        .query_one(&count_sql, &refs[..counted])
        .await
        .map_err(pgerr)?
        .get(0);
    let found = txn.query(&page_sql, &refs).await.map_err(pgerr)?;
    txn.commit().await.map_err(pgerr)?;
    Ok(ListPage {
        rows: found
            .iter()
            .filter_map(|r| IndexRow::decode_listed(r.get(0), r.get(1)))
            .collect(),
        total: u64::try_from(total).unwrap_or(0),
    })
}

/// The parameters of a statement being built.
#[derive(Default)]
struct Args(Vec<Box<dyn ToSql + Sync + Send>>);

impl Args {
    /// Adds `v`; its placeholder.
    fn push(&mut self, v: Box<dyn ToSql + Sync + Send>) -> String {
        self.0.push(v);
        format!("${}", self.0.len())
    }
}
