//! PostgreSQL with `fsync=on` and `synchronous_commit=on` (checked): the
//! peer of our server on `--store-url`, on the same PostgreSQL server.
//!
//! Appends of the batches our server on PostgreSQL committed (the same
//! sessions, events per commit and payload size), one transaction per
//! batch, into a table of our `events` layout: `(session_id text COLLATE
//! "C", seq bigint, payload bytea)` with the primary key `(session_id,
//! seq)`. Each batch is one `COPY … FROM STDIN (FORMAT binary)`, not a
//! multi-row `INSERT`: COPY is PostgreSQL's bulk path (no statement per
//! row or per batch to parse or plan, values sent in binary, no text
//! escaping of the payload), so the peer is what the database itself
//! allows for this batch shape, the ceiling our store's commit is held
//! against. One connection, one writer, like our server's group commit.
//!
//! The replay reads one session's rows in seq order with one `SELECT`,
//! streamed, on a new connection (cold) then again on it (warm).
//!
//! It connects without TLS: the throwaway server the load tool starts, or
//! a `--store-url` on loopback.

use std::time::Instant;

use futures::{StreamExt, pin_mut};
use tokio_postgres::binary_copy::BinaryCopyInWriter;
use tokio_postgres::types::{ToSql, Type};
use tokio_postgres::{Client, NoTls};

pub use super::Replay;
use super::{session_id, stamp, stamped};
use crate::stats::Rate;

/// The peer's table, dropped and created again by every measurement.
const TABLE: &str = "peer_events";

/// Rows per transaction when writing the rows a replay reads (not timed).
const FILL_BATCH: usize = 10_000;

/// A connection to `url`, its driver task spawned.
async fn connect(url: &str) -> Client {
    let (client, conn) = tokio_postgres::connect(url, NoTls)
        .await
        .unwrap_or_else(|e| panic!("postgres peer: connect: {e}"));
    tokio::spawn(async move {
        if let Err(e) = conn.await {
            eprintln!("postgres peer: connection: {e}");
        }
    });
    client
}

/// How many tables the database at `url` holds in its current schema.
pub async fn tables(url: &str) -> i64 {
    connect(url)
        .await
        .query_one(
            "SELECT count(*) FROM information_schema.tables WHERE table_schema = current_schema()",
            &[],
        )
        .await
        .expect("postgres: count tables")
        .get(0)
}

/// A connection with the durability the peer promises checked, and the
/// peer's table empty.
async fn create(url: &str) -> Client {
    let client = connect(url).await;
    for setting in ["fsync", "synchronous_commit"] {
        let row = client
            .query_one(&format!("SHOW {setting}"), &[])
            .await
            .unwrap_or_else(|e| panic!("postgres peer: SHOW {setting}: {e}"));
        let value: String = row.get(0);
        assert_eq!(value, "on", "postgres peer: {setting} is {value}, not on");
    }
    client
        .batch_execute(&format!(
            "DROP TABLE IF EXISTS {TABLE};
             CREATE TABLE {TABLE} (
                 session_id text COLLATE \"C\" NOT NULL,
                 seq bigint NOT NULL,
                 payload bytea NOT NULL,
                 PRIMARY KEY (session_id, seq)
             );"
        ))
        .await
        .expect("postgres peer: create table");
    client
}

/// Appends `events` rows of `payload` bytes, spread over `sessions`
/// sessions, `batch` rows per transaction (one COPY each): rows round
/// robin over the sessions, each with its session's next seq (from 0).
/// Timed: from the first `BEGIN` to the last `COMMIT` returning.
pub async fn append(url: &str, sessions: usize, batch: usize, events: u64, payload: usize) -> Rate {
    assert!(sessions > 0, "postgres append: no sessions");
    assert!(batch > 0, "postgres append: empty batches");
    let mut client = create(url).await;
    let start = Instant::now();
    write_rows(&mut client, sessions, batch, events, payload).await;
    Rate {
        events,
        secs: start.elapsed().as_secs_f64(),
    }
}

/// Replay of one session's `events` rows in seq order, each row checked
/// as in the SQLite peer: cold (a new connection, after `before_cold` and
/// after the OS page cache was dropped where allowed) and warm (again, on
/// the same connection). Writes the session first (not timed).
pub async fn replay(
    url: &str,
    events: u64,
    payload: usize,
    drop_cache: bool,
    before_cold: impl FnOnce(),
) -> Replay {
    let mut client = create(url).await;
    write_rows(&mut client, 1, FILL_BATCH, events, payload).await;
    drop(client);
    before_cold();
    let cold_dropped_os_cache = drop_cache && crate::os::drop_page_cache();
    let client = connect(url).await;
    let id = session_id(0);
    let cold = read_stream(&client, &id, events, payload).await;
    let warm = read_stream(&client, &id, events, payload).await;
    Replay {
        cold,
        warm,
        cold_dropped_os_cache,
    }
}

/// `events` rows round robin over `sessions` sessions, `batch` rows per
/// transaction (the last one may be shorter).
async fn write_rows(
    client: &mut Client,
    sessions: usize,
    batch: usize,
    events: u64,
    payload: usize,
) {
    let ids: Vec<String> = (0..sessions).map(session_id).collect();
    let mut next = vec![0i64; sessions];
    let mut buf = vec![b'x'; payload];
    let mut written = 0u64;
    let copy = format!("COPY {TABLE} (session_id, seq, payload) FROM STDIN (FORMAT binary)");
    while written < events {
        let n = (batch as u64).min(events - written);
        let txn = client.transaction().await.expect("postgres: begin");
        let sink = txn.copy_in(&copy).await.expect("postgres: COPY");
        let writer = BinaryCopyInWriter::new(sink, &[Type::TEXT, Type::INT8, Type::BYTEA]);
        pin_mut!(writer);
        for _ in 0..n {
            let s = (written % sessions as u64) as usize;
            let seq = next[s];
            next[s] += 1;
            stamp(&mut buf, seq as u64);
            let row: [&(dyn ToSql + Sync); 3] = [&ids[s], &seq, &buf.as_slice()];
            writer
                .as_mut()
                .write(&row)
                .await
                .expect("postgres: COPY row");
            written += 1;
        }
        writer.finish().await.expect("postgres: COPY end");
        txn.commit().await.expect("postgres: commit");
    }
}

/// Reads one session in order, checking every row (seq, size, stamp) and
/// the count.
async fn read_stream(client: &Client, id: &str, events: u64, payload: usize) -> Rate {
    let start = Instant::now();
    let select = format!("SELECT seq, payload FROM {TABLE} WHERE session_id = $1 ORDER BY seq");
    let rows = client
        .query_raw(&select, [id])
        .await
        .expect("postgres: select");
    pin_mut!(rows);
    let mut n = 0u64;
    while let Some(row) = rows.next().await {
        let row = row.expect("postgres: row");
        let seq: i64 = row.get(0);
        assert_eq!(seq as u64, n, "postgres replay: row {n} has seq {seq}");
        let p: &[u8] = row.get(1);
        assert_eq!(p.len(), payload, "postgres replay: row {n} payload size");
        assert_eq!(
            stamped(p),
            stamped(&n.to_le_bytes()[..payload.min(8)]),
            "postgres replay: row {n} carries another row's payload"
        );
        n += 1;
    }
    let secs = start.elapsed().as_secs_f64();
    assert_eq!(
        n, events,
        "postgres replay: {n} rows read, {events} written"
    );
    Rate { events: n, secs }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::OnceLock;

    use agent_harness_pg_temp::Cluster;

    use super::*;

    /// One throwaway server for this test binary.
    fn cluster() -> &'static Cluster {
        static CLUSTER: OnceLock<Cluster> = OnceLock::new();
        CLUSTER.get_or_init(Cluster::start)
    }

    /// Every row of the peer's table, per session: seqs 0, 1, 2… with no
    /// gap, each payload carrying its seq; the row count per session.
    async fn verify(url: &str, payload: usize) -> BTreeMap<String, u64> {
        let client = connect(url).await;
        let rows = client
            .query(
                &format!("SELECT session_id, seq, payload FROM {TABLE} ORDER BY session_id, seq"),
                &[],
            )
            .await
            .unwrap();
        let mut counts = BTreeMap::<String, u64>::new();
        for row in rows {
            let id: String = row.get(0);
            let seq: i64 = row.get(1);
            let p: &[u8] = row.get(2);
            let next = counts.entry(id.clone()).or_default();
            assert_eq!(seq as u64, *next, "session {id}: seq {seq} after {next}");
            assert_eq!(p.len(), payload);
            assert_eq!(stamped(p), stamped(&next.to_le_bytes()[..payload.min(8)]));
            *next += 1;
        }
        counts
    }

    #[tokio::test]
    async fn append_commits_every_row_of_every_batch() {
        let url = cluster().fresh_database();
        // 103 rows in batches of 10: the last, short batch must be committed too.
        for (sessions, batch) in [(1, 1), (7, 10), (3, 103), (10, 1000)] {
            let rate = append(&url, sessions, batch, 103, 100).await;
            assert_eq!(rate.events, 103);
            let counts = verify(&url, 100).await;
            let expected: BTreeMap<String, u64> = (0..sessions)
                .map(|i| {
                    let extra = u64::from((i as u64) < 103 % sessions as u64);
                    (session_id(i), 103 / sessions as u64 + extra)
                })
                .collect();
            assert_eq!(counts, expected, "sessions={sessions} batch={batch}");
        }
    }

    #[tokio::test]
    async fn replay_reads_every_row_in_order_twice() {
        let url = cluster().fresh_database();
        let mut called = false;
        let r = replay(&url, FILL_BATCH as u64 + 7, 64, false, || called = true).await;
        assert!(called);
        assert_eq!(r.cold.events, FILL_BATCH as u64 + 7);
        assert_eq!(r.warm.events, FILL_BATCH as u64 + 7);
        assert!(!r.cold_dropped_os_cache);
    }

    #[tokio::test]
    #[should_panic(expected = "has seq")]
    async fn replay_panics_on_a_lost_row() {
        let url = cluster().fresh_database();
        replay(&url, 50, 16, false, || {}).await;
        let client = connect(&url).await;
        client
            .execute(&format!("DELETE FROM {TABLE} WHERE seq = 20"), &[])
            .await
            .unwrap();
        read_stream(&client, &session_id(0), 50, 16).await;
    }
}
