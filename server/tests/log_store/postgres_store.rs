//! What only the PostgreSQL store has (the shared contract is in
//! `store_contract`): migrations under the lock, a newer schema refused,
//! URLs and errors without passwords, the commit feed, one transaction per
//! commit, rows that do not decode, and a database restarted under it.

use crate::support::log::{event, seqs};
use crate::support::postgres::{Cluster, cluster, store};

use std::time::Duration;

use agent_harness_protocol::pb::event::Payload;
use agent_harness_server::store::{
    Commit, CommitNotice, PostgresStore, Receipt, ReceiptWrite, SessionMeta, Store,
};

fn append(store: &dyn Store, id: &str, from: u64, to: u64) {
    let batch: Vec<_> = (from..=to).map(|s| event(id, s)).collect();
    store
        .append_batch(&batch, &[SessionMeta::new(id, 1)])
        .unwrap();
}

/// A URL naming a `search_path` schema keeps its tables there, created on
/// first open: two stores on one database in two schemas see nothing of
/// each other, and the default schema stays empty.
#[test]
fn a_search_path_schema_in_the_url_holds_a_store_of_its_own() {
    let url = cluster().fresh_database();
    let in_schema = |name: &str| format!("{url}?options=-c%20search_path%3D{name}");
    let a = PostgresStore::open(&in_schema("deploy_a")).unwrap();
    let b = PostgresStore::open(&in_schema("deploy_b")).unwrap();
    append(&a, "s", 1, 3);
    append(&b, "s", 1, 1);
    assert_eq!(seqs(&a.read_range("s", 0, 10).unwrap()), vec![1, 2, 3]);
    assert_eq!(seqs(&b.read_range("s", 0, 10).unwrap()), vec![1]);
    let public = PostgresStore::open(&url).unwrap();
    assert!(public.read_range("s", 0, 10).unwrap().is_empty());
    // Opened again: the schema is there, the events too.
    drop(a);
    let again = PostgresStore::open(&in_schema("deploy_a")).unwrap();
    assert_eq!(seqs(&again.read_range("s", 0, 10).unwrap()), vec![1, 2, 3]);
}

#[test]
fn two_servers_opening_one_empty_database_at_once_both_start() {
    let url = cluster().fresh_database();
    let opens: Vec<_> = (0..3)
        .map(|_| {
            let url = url.clone();
            std::thread::spawn(move || PostgresStore::open(&url))
        })
        .collect();
    let stores: Vec<PostgresStore> = opens
        .into_iter()
        .map(|t| t.join().unwrap().expect("every concurrent open succeeds"))
        .collect();
    append(&stores[0], "s", 1, 3);
    assert_eq!(
        seqs(&stores[2].read_range("s", 0, 10).unwrap()),
        vec![1, 2, 3]
    );
}

#[test]
fn a_database_with_a_newer_schema_is_a_clear_start_up_error() {
    let url = cluster().fresh_database();
    drop(PostgresStore::open(&url).unwrap());
    let db = url.rsplit('/').next().unwrap();
    cluster().sql(
        db,
        "INSERT INTO refinery_schema_history (version, name, applied_on, checksum) \
         VALUES (99, 'from_the_future', '2030-01-01T00:00:00Z', '1')",
    );
    let err = PostgresStore::open(&url).expect_err("a newer schema is refused");
    let text = err.to_string();
    assert!(text.contains("V99__from_the_future"), "{text}");
    assert!(text.contains("newer schema"), "{text}");
    assert!(text.contains("V1"), "{text}");
}

#[test]
fn an_unreachable_database_is_an_error_naming_the_host_without_the_password() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let url = format!("postgres://app:s3cret@127.0.0.1:{port}/log");
    let err = PostgresStore::open(&url).expect_err("nothing listens there");
    let text = err.to_string();
    assert!(text.contains(&format!("127.0.0.1:{port}")), "{text}");
    assert!(!text.contains("s3cret"), "{text}");
    assert!(text.contains("app:***@"), "{text}");
}

#[test]
fn a_commit_that_fails_midway_leaves_nothing() {
    let store = store();
    append(&store, "s", 1, 2);
    // A receipt PostgreSQL refuses (a NUL in text), after the events and
    // metas of the same commit were written in its transaction.
    let bad = Receipt::encoded("s\0", "k", 1, "f", "Send", vec![]);
    let failed = store.commit(Commit {
        events: &[event("s", 3), event("t", 1)],
        metas: &[SessionMeta::new("t", 1)],
        receipts: &[ReceiptWrite::Put(bad)],
        ..Commit::default()
    });
    assert!(failed.is_err());
    assert_eq!(seqs(&store.read_range("s", 0, 10).unwrap()), vec![1, 2]);
    assert!(store.read_range("t", 0, 10).unwrap().is_empty());
    assert_eq!(store.meta("t").unwrap(), None);
    assert_eq!(store.meta("s").unwrap().unwrap().head_seq, 2);
}

/// Waits until `rx`'s feed is listening: commits of `writer` until one is
/// noticed (the feed connects in the background after the store opens).
fn until_listening(
    rt: &tokio::runtime::Runtime,
    writer: &dyn Store,
    rx: &mut tokio::sync::broadcast::Receiver<CommitNotice>,
) {
    for seq in 1..=100 {
        writer.append_batch(&[event("warm-up", seq)], &[]).unwrap();
        let deadline = Duration::from_millis(200);
        while let Ok(Ok(n)) = rt.block_on(async { tokio::time::timeout(deadline, rx.recv()).await })
        {
            if n == CommitNotice::Sessions(vec!["warm-up".into()]) {
                return;
            }
        }
    }
    panic!("the commit feed never listened");
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

#[test]
fn commits_of_another_store_on_the_database_are_noticed_and_heads_read() {
    let url = cluster().fresh_database();
    let reader = PostgresStore::open(&url).unwrap();
    let writer = PostgresStore::open(&url).unwrap();
    let mut notices = reader.commit_notices().expect("a shared store has a feed");
    let rt = runtime();
    until_listening(&rt, &writer, &mut notices);
    let next = |rx: &mut tokio::sync::broadcast::Receiver<CommitNotice>| {
        rt.block_on(async { tokio::time::timeout(Duration::from_secs(10), rx.recv()).await })
            .expect("a notice within 10 s")
            .expect("the feed is open")
    };
    append(&writer, "a", 1, 2);
    writer
        .append_batch(&[event("b", 1), event("c", 1)], &[])
        .unwrap();
    assert_eq!(next(&mut notices), CommitNotice::Sessions(vec!["a".into()]));
    assert_eq!(
        next(&mut notices),
        CommitNotice::Sessions(vec!["b".into(), "c".into()])
    );
    // A meta alone has no events to tail: no notice.
    writer.put_meta(&SessionMeta::new("d", 1)).unwrap();
    // Too many ids to name: an empty notice, read as Lost.
    let many: Vec<_> = (0..400)
        .map(|i| event(&format!("session-{i:04}-long-id"), 1))
        .collect();
    writer.append_batch(&many, &[]).unwrap();
    assert_eq!(next(&mut notices), CommitNotice::Lost);
    let ids = ["a", "x", "c", "session-0007-long-id"].map(String::from);
    assert_eq!(reader.heads(&ids).unwrap(), vec![2, 0, 1, 1]);
}

#[test]
fn rows_that_cannot_be_decoded_read_as_unreadable_or_empty() {
    let url = cluster().fresh_database();
    let store = PostgresStore::open(&url).unwrap();
    append(&store, "s1", 1, 5);
    append(&store, "s2", 1, 2);
    let db = url.rsplit('/').next().unwrap();
    cluster().sql(
        db,
        "UPDATE events SET event = '\\xffffff0f2a'::bytea WHERE session_id = 's1' AND seq = 3; \
         UPDATE sessions SET meta = convert_to('{not json', 'UTF8') WHERE session_id = 's2'",
    );
    let all = store.read_range("s1", 0, usize::MAX).unwrap();
    assert_eq!(seqs(&all), vec![1, 2, 3, 4, 5]);
    assert!(
        matches!(all[2].payload, Some(Payload::Unreadable(_))),
        "{:?}",
        all[2]
    );
    assert_eq!(all[3], event("s1", 4));
    assert_eq!(
        store.read_full_bytes("s1", 3).unwrap().as_deref(),
        Some(&[0xff, 0xff, 0xff, 0x0f, 0x2a][..])
    );
    let s2 = store.meta("s2").unwrap().expect("still a session");
    assert_eq!(s2.head_seq, 2);
}

/// The database killed (as a crash would) and started again on the same
/// port: calls fail meanwhile, within seconds, and the same store works
/// again after, with everything committed before still there.
#[test]
fn the_store_reconnects_after_the_database_restarts() {
    let own = Cluster::start();
    let db = "restart";
    own.sql("postgres", &format!("CREATE DATABASE {db}"));
    let store = PostgresStore::open(&own.url(db)).unwrap();
    let mut notices = store.commit_notices().unwrap();
    let rt = runtime();
    until_listening(&rt, &store, &mut notices);
    append(&store, "s", 1, 3);
    own.kill_server();
    let started = std::time::Instant::now();
    assert!(store.append_batch(&[event("s", 4)], &[]).is_err());
    assert!(store.read_range("s", 0, 10).is_err());
    assert!(started.elapsed() < Duration::from_secs(40));
    own.start_server();
    let mut back = false;
    for _ in 0..100 {
        if store.append_batch(&[event("s", 4)], &[]).is_ok() {
            back = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(back, "the store reconnects by itself");
    assert_eq!(
        seqs(&store.read_range("s", 0, 10).unwrap()),
        vec![1, 2, 3, 4]
    );
    // The feed reconnected too, and said notices may have been lost.
    let saw_lost = rt.block_on(async {
        tokio::time::timeout(Duration::from_secs(15), async {
            loop {
                match notices.recv().await {
                    Ok(CommitNotice::Lost) => return true,
                    Ok(_) => {}
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => return true,
                    Err(_) => return false,
                }
            }
        })
        .await
        .unwrap_or(false)
    });
    assert!(saw_lost);
}

/// TLS where the URL asks for it: `require` encrypts, `verify-full`
/// checks the certificate (against `sslrootcert`, else the web PKI roots,
/// which do not know a self-signed one) and the host name.
#[test]
fn tls_is_used_where_the_url_asks_and_verify_full_checks_the_certificate() {
    let (own, ca) = Cluster::start_tls();
    own.sql("postgres", "CREATE DATABASE tls");
    let base = format!("postgres://postgres:pw@localhost:{}/tls", own.port);
    let encrypted = |store: &PostgresStore, name: &str| {
        append(store, name, 1, 1);
        let got = store.read_range(name, 0, 10).unwrap();
        assert_eq!(seqs(&got), vec![1]);
    };
    let required = PostgresStore::open(&format!("{base}?sslmode=require")).expect("require");
    encrypted(&required, "req");
    let verified = PostgresStore::open(&format!(
        "{base}?sslmode=verify-full&sslrootcert={}",
        ca.display()
    ))
    .expect("verify-full against the certificate's own root");
    encrypted(&verified, "ver");
    // Every connection of the stores above is encrypted; the plain one is not.
    let plain = PostgresStore::open(&format!("{base}?sslmode=disable")).expect("disable");
    encrypted(&plain, "plain");
    let err = PostgresStore::open(&format!("{base}?sslmode=verify-full"))
        .expect_err("a self-signed certificate is not in the web PKI");
    let text = err.to_string();
    assert!(text.contains(&format!("localhost:{}", own.port)), "{text}");
    assert!(!text.contains(":pw@"), "{text}");
    // Which of the server's connections used TLS, by the user of each store
    // above (all connect as postgres): some did and some did not.
    let check = "DO $$ BEGIN \
          IF (SELECT count(*) FROM pg_stat_ssl WHERE ssl) = 0 THEN RAISE 'no TLS connection'; END IF; \
          IF (SELECT count(*) FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid) \
              WHERE NOT s.ssl AND a.application_name = 'agent-harness') = 0 \
             THEN RAISE 'no plain connection'; END IF; END $$";
    own.sql("tls", check);
}

/// A connection that dies in the middle of a commit (its backend
/// terminated while the batch is being written) leaves all of the batch or
/// none of it: never a part.
#[test]
fn a_connection_killed_mid_commit_leaves_the_whole_batch_or_nothing() {
    let url = cluster().fresh_database();
    let db = url.rsplit('/').next().unwrap().to_owned();
    let store = PostgresStore::open(&url).unwrap();
    append(&store, "s", 1, 1);
    let big = "x".repeat(2048);
    let batch: Vec<_> = (2..=20_001)
        .map(|seq| agent_harness_protocol::pb::Event {
            cli_line: big.clone(),
            ..event(if seq % 2 == 0 { "s" } else { "t" }, seq)
        })
        .collect();
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let killer = {
        let (done, db) = (done.clone(), db.clone());
        std::thread::spawn(move || {
            while !done.load(std::sync::atomic::Ordering::Acquire) {
                // Every connection of the store inside a transaction (the
                // test's own admin connection has another application name),
                // in this test's database only: the server is shared with
                // the tests running beside it.
                cluster().sql(
                    &db,
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
                     WHERE application_name = 'agent-harness' AND xact_start IS NOT NULL \
                       AND datname = current_database() AND pid <> pg_backend_pid()",
                );
                std::thread::sleep(Duration::from_millis(5));
            }
        })
    };
    let committed = store.append_batch(&batch, &[]);
    done.store(true, std::sync::atomic::Ordering::Release);
    killer.join().unwrap();
    let stored = |id: &str| {
        let mut n = 0;
        for _ in 0..50 {
            match store.read_range(id, 0, usize::MAX) {
                Ok(events) => return events.len(),
                // The pool may hand out a connection that was killed.
                Err(_) => n += 1,
            }
        }
        panic!("{n} reads failed")
    };
    let (s, t) = (stored("s"), stored("t"));
    match committed {
        Ok(()) => assert_eq!((s, t), (10_001, 10_000), "acknowledged: all of it"),
        Err(e) => assert_eq!((s, t), (1, 0), "failed ({e}): none of it"),
    }
}
