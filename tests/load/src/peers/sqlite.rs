//! SQLite, WAL mode, `synchronous=FULL`: the embedded-store peer.
//!
//! Set-up of t3code's event store (`journal_mode=WAL`; `synchronous=FULL`
//! set here explicitly, which is also the bundled build's default, so the
//! WAL is fsynced at every commit: every committed row is on disk). The
//! other pragmas t3code sets (`busy_timeout`, `foreign_keys`,
//! `checkpoint_fullfsync`, which is macOS only, and a 32 MiB
//! `journal_size_limit` the WAL never reaches between auto-checkpoints)
//! change nothing for one connection on Linux and are left at their
//! defaults. The bundled SQLite syncs with `fsync`, not `fdatasync`. One
//! connection: SQLite has one writer.
//!
//! The schema is t3code's `orchestration_events` cut down to what our log
//! stores per event: a rowid table (`sequence INTEGER PRIMARY KEY
//! AUTOINCREMENT`, the global order) plus the unique index on
//! `(stream_id, stream_version)` that orders each stream and that a
//! replay of one stream reads. t3code's other columns (event id, type,
//! actor, command, causation and correlation ids, metadata) and their
//! indexes are left out: our server keeps none of them outside the
//! payload. The next `stream_version` of a stream is counted by the writer
//! (one writer, like our server) rather than by t3code's `SELECT
//! max(...) + 1` subquery per insert.
//!
//! Not the `(session, seq) PRIMARY KEY ... WITHOUT ROWID` table, though it
//! is the closest to our redb key layout: SQLite advises WITHOUT ROWID only
//! for rows under about a twentieth of a page (~200 bytes on 4 KiB pages),
//! and ours are ~900 bytes; such a table keeps whole rows in its interior
//! pages too. [`Schema::WithoutRowid`] stays here so the load tool can show
//! the difference.

use std::path::{Path, PathBuf};
use std::time::Instant;

use rusqlite::{Connection, params};

pub use super::Replay;
use super::{session_id, stamp, stamped};
use crate::stats::Rate;

/// The database file, in the `dir` the caller gives.
const DB_FILE: &str = "events.sqlite";

/// Rows per transaction when writing the rows a replay reads (not timed).
const FILL_BATCH: u64 = 10_000;

const INSERT: &str = "INSERT INTO events (stream_id, stream_version, payload) VALUES (?1, ?2, ?3)";
const SELECT_STREAM: &str =
    "SELECT stream_version, payload FROM events WHERE stream_id = ?1 ORDER BY stream_version";

/// Table layouts the peer can run on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Schema {
    /// t3code's event table cut down (the peer's default; see the module doc).
    T3code,
    /// `PRIMARY KEY (stream_id, stream_version) WITHOUT ROWID`: our key layout.
    #[allow(dead_code)] // for comparisons; the load tool runs `T3code`
    WithoutRowid,
}

impl Schema {
    fn sql(self) -> &'static str {
        match self {
            Schema::T3code => {
                "CREATE TABLE events (
                    sequence INTEGER PRIMARY KEY AUTOINCREMENT,
                    stream_id TEXT NOT NULL,
                    stream_version INTEGER NOT NULL,
                    payload BLOB NOT NULL
                );
                CREATE UNIQUE INDEX idx_events_stream_version
                    ON events (stream_id, stream_version);"
            }
            Schema::WithoutRowid => {
                "CREATE TABLE events (
                    stream_id TEXT NOT NULL,
                    stream_version INTEGER NOT NULL,
                    payload BLOB NOT NULL,
                    PRIMARY KEY (stream_id, stream_version)
                ) WITHOUT ROWID;"
            }
        }
    }
}

/// Appends `events` rows of `payload` bytes, spread over `sessions`
/// sessions (each row keyed by session and seq), `batch` rows per
/// transaction: the same batch shape our group commit produced.
///
/// Rows go round robin over the sessions, each with its session's next
/// seq (from 0). `dir` must not hold a database already. Timed: the
/// transactions, from the first `BEGIN` to the last `COMMIT` returning
/// (opening the database and creating the table are not).
pub fn append(dir: &Path, sessions: usize, batch: usize, events: u64, payload: usize) -> Rate {
    append_with(dir, Schema::T3code, sessions, batch, events, payload)
}

/// [`append`] on the given table layout.
pub fn append_with(
    dir: &Path,
    schema: Schema,
    sessions: usize,
    batch: usize,
    events: u64,
    payload: usize,
) -> Rate {
    assert!(sessions > 0, "sqlite append: no sessions");
    assert!(batch > 0, "sqlite append: empty batches");
    let mut conn = create(dir, schema);
    let start = Instant::now();
    write_rows(&mut conn, sessions, batch, events, payload);
    let secs = start.elapsed().as_secs_f64();
    conn.close()
        .map_err(|(_, e)| e)
        .expect("sqlite append: close");
    Rate { events, secs }
}

/// Replay of one session's `events` rows in seq order, decoded: cold (a
/// new connection after the OS page cache was dropped where allowed) and
/// warm (again, on the same connection).
///
/// Writes the session first (transactions of 10,000 rows, not timed) and
/// closes that connection (which checkpoints the WAL into the database
/// file). Each read touches every row: its seq must be the next one, its
/// payload `payload` bytes carrying that seq; a row lost, repeated or out
/// of order panics, as does a count other than `events`.
pub fn replay(dir: &Path, events: u64, payload: usize) -> Replay {
    replay_with(dir, Schema::T3code, events, payload, true)
}

/// [`replay`] on the given table layout; `drop_cache: false` makes the
/// cold read a new connection only (what the unit tests use, so that they
/// do not empty the page cache of a shared machine).
pub fn replay_with(
    dir: &Path,
    schema: Schema,
    events: u64,
    payload: usize,
    drop_cache: bool,
) -> Replay {
    let mut conn = create(dir, schema);
    write_rows(&mut conn, 1, FILL_BATCH as usize, events, payload);
    conn.close()
        .map_err(|(_, e)| e)
        .expect("sqlite replay: close after writing");

    let cold_dropped_os_cache = drop_cache && crate::os::drop_page_cache();
    let conn = open(&db_path(dir));
    let id = session_id(0);
    let cold = read_stream(&conn, &id, events, payload);
    let warm = read_stream(&conn, &id, events, payload);
    Replay {
        cold,
        warm,
        cold_dropped_os_cache,
    }
}

fn db_path(dir: &Path) -> PathBuf {
    dir.join(DB_FILE)
}

/// Opens the database with the peer's settings, checking they took.
fn open(path: &Path) -> Connection {
    let conn = Connection::open(path).expect("sqlite: open");
    let mode: String = conn
        .query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))
        .expect("sqlite: journal_mode");
    assert_eq!(mode, "wal", "sqlite: WAL mode refused");
    conn.pragma_update(None, "synchronous", "FULL")
        .expect("sqlite: synchronous");
    let sync: i64 = conn
        .pragma_query_value(None, "synchronous", |r| r.get(0))
        .expect("sqlite: synchronous");
    assert_eq!(sync, 2, "sqlite: synchronous is not FULL");
    conn
}

/// A new database in `dir` with the table of `schema`.
fn create(dir: &Path, schema: Schema) -> Connection {
    let path = db_path(dir);
    assert!(
        !path.exists(),
        "sqlite: {} exists already; give each run its own directory",
        path.display()
    );
    let conn = open(&path);
    conn.execute_batch(schema.sql())
        .expect("sqlite: create table");
    conn
}

/// `events` rows round robin over `sessions` sessions, `batch` rows per
/// transaction (the last one may be shorter).
fn write_rows(conn: &mut Connection, sessions: usize, batch: usize, events: u64, payload: usize) {
    let ids: Vec<String> = (0..sessions).map(session_id).collect();
    let mut next = vec![0u64; sessions];
    let mut buf = vec![b'x'; payload];
    let mut written = 0u64;
    while written < events {
        let n = (batch as u64).min(events - written);
        let tx = conn.transaction().expect("sqlite: begin");
        {
            let mut insert = tx.prepare_cached(INSERT).expect("sqlite: prepare insert");
            for _ in 0..n {
                let s = (written % sessions as u64) as usize;
                let seq = next[s];
                next[s] += 1;
                stamp(&mut buf, seq);
                insert
                    .execute(params![ids[s], seq as i64, buf])
                    .expect("sqlite: insert");
                written += 1;
            }
        }
        tx.commit().expect("sqlite: commit");
    }
}

/// Reads one stream in order, checking every row; see [`replay`].
fn read_stream(conn: &Connection, id: &str, events: u64, payload: usize) -> Rate {
    let start = Instant::now();
    let mut select = conn
        .prepare_cached(SELECT_STREAM)
        .expect("sqlite: prepare select");
    let mut rows = select.query([id]).expect("sqlite: select");
    let mut n = 0u64;
    let mut bytes = 0u64;
    while let Some(row) = rows.next().expect("sqlite: step") {
        let seq: i64 = row.get(0).expect("sqlite: stream_version");
        assert_eq!(seq as u64, n, "sqlite replay: row {n} has seq {seq}");
        let p = row
            .get_ref(1)
            .expect("sqlite: payload")
            .as_blob()
            .expect("sqlite: payload is not a blob");
        assert_eq!(p.len(), payload, "sqlite replay: row {n} payload size");
        assert_eq!(
            stamped(p),
            stamped(&n.to_le_bytes()[..payload.min(8)]),
            "sqlite replay: row {n} carries another row's payload"
        );
        bytes += p.len() as u64;
        n += 1;
    }
    let secs = start.elapsed().as_secs_f64();
    assert_eq!(n, events, "sqlite replay: {n} rows read, {events} written");
    assert_eq!(bytes, events * payload as u64);
    Rate { events: n, secs }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    /// Every row in the database, per session: checks each session's seqs
    /// run 0, 1, 2… with no gap and each payload carries its seq; returns
    /// the row count per session.
    fn verify(dir: &Path, payload: usize) -> BTreeMap<String, u64> {
        let conn = open(&db_path(dir));
        let mut stmt = conn
            .prepare(
                "SELECT stream_id, stream_version, payload FROM events \
                 ORDER BY stream_id, stream_version",
            )
            .unwrap();
        let mut rows = stmt.query([]).unwrap();
        let mut counts = BTreeMap::<String, u64>::new();
        while let Some(row) = rows.next().unwrap() {
            let id: String = row.get(0).unwrap();
            let seq: i64 = row.get(1).unwrap();
            let p: Vec<u8> = row.get(2).unwrap();
            let next = counts.entry(id.clone()).or_default();
            assert_eq!(
                seq as u64, *next,
                "session {id}: seq {seq} after {next} rows"
            );
            assert_eq!(p.len(), payload);
            assert_eq!(stamped(&p), stamped(&next.to_le_bytes()[..payload.min(8)]));
            *next += 1;
        }
        counts
    }

    /// Rows spread round robin: `events / sessions` each, the first
    /// `events % sessions` sessions one more.
    fn expected(sessions: usize, events: u64) -> BTreeMap<String, u64> {
        (0..sessions)
            .map(|i| {
                let extra = u64::from((i as u64) < events % sessions as u64);
                (session_id(i), events / sessions as u64 + extra)
            })
            .collect()
    }

    #[test]
    fn append_commits_every_row_of_every_batch() {
        // 103 rows in batches of 10: the last, short batch must be committed too.
        for schema in [Schema::T3code, Schema::WithoutRowid] {
            for (sessions, batch) in [(1, 1), (7, 10), (3, 103), (10, 1000)] {
                let dir = tempfile::tempdir().unwrap();
                let rate = append_with(dir.path(), schema, sessions, batch, 103, 100);
                assert_eq!(rate.events, 103);
                assert_eq!(
                    verify(dir.path(), 100),
                    expected(sessions, 103),
                    "{schema:?} sessions={sessions} batch={batch}"
                );
            }
        }
    }

    #[test]
    fn append_is_durable_in_wal_mode() {
        let dir = tempfile::tempdir().unwrap();
        append(dir.path(), 2, 5, 20, 900);
        // The mode is persistent: a fresh connection that does not set it finds WAL.
        let conn = Connection::open(db_path(dir.path())).unwrap();
        let mode: String = conn
            .pragma_query_value(None, "journal_mode", |r| r.get(0))
            .unwrap();
        assert_eq!(mode, "wal");
        drop(conn);
        assert_eq!(verify(dir.path(), 900), expected(2, 20));
    }

    #[test]
    #[should_panic(expected = "exists already")]
    fn append_refuses_a_used_directory() {
        let dir = tempfile::tempdir().unwrap();
        append(dir.path(), 1, 1, 1, 10);
        append(dir.path(), 1, 1, 1, 10);
    }

    #[test]
    fn tiny_payloads_still_carry_their_seq() {
        let dir = tempfile::tempdir().unwrap();
        append(dir.path(), 2, 3, 11, 3);
        assert_eq!(verify(dir.path(), 3), expected(2, 11));
    }

    #[test]
    fn replay_reads_every_row_in_order_twice() {
        for schema in [Schema::T3code, Schema::WithoutRowid] {
            // More than one fill transaction.
            let dir = tempfile::tempdir().unwrap();
            let r = replay_with(dir.path(), schema, FILL_BATCH + 7, 64, false);
            assert_eq!(r.cold.events, FILL_BATCH + 7);
            assert_eq!(r.warm.events, FILL_BATCH + 7);
            assert!(!r.cold_dropped_os_cache);
        }
    }

    /// Deletes row `seq` of the replayed session and reads it again.
    fn read_after_deleting(seq: i64) {
        let dir = tempfile::tempdir().unwrap();
        replay_with(dir.path(), Schema::T3code, 50, 16, false);
        let conn = open(&db_path(dir.path()));
        let gone = conn
            .execute("DELETE FROM events WHERE stream_version = ?1", [seq])
            .unwrap();
        assert_eq!(gone, 1);
        read_stream(&conn, &session_id(0), 50, 16);
    }

    #[test]
    #[should_panic(expected = "has seq")]
    fn replay_panics_on_a_lost_row() {
        read_after_deleting(20);
    }

    #[test]
    #[should_panic(expected = "rows read")]
    fn replay_panics_on_a_lost_last_row() {
        read_after_deleting(49);
    }

    #[test]
    #[should_panic]
    fn replay_panics_on_a_payload_that_is_not_its_rows() {
        let dir = tempfile::tempdir().unwrap();
        replay_with(dir.path(), Schema::T3code, 50, 16, false);
        let conn = open(&db_path(dir.path()));
        // Rows 3 and 4 swap payloads: seqs stay in order, payloads do not.
        conn.execute_batch(
            "UPDATE events SET payload = (SELECT payload FROM events WHERE stream_version = 4)
                 WHERE stream_version = 3;",
        )
        .unwrap();
        read_stream(&conn, &session_id(0), 50, 16);
    }
}
