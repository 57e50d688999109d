//! Tailing: a log on a store other processes write too follows their
//! commits. Two `EventLogs` over one `MemoryStore` play two processes; a
//! store wrapper whose feed the test controls plays lost notices.

use std::sync::Arc;
use std::time::Duration;

use agent_harness_protocol::pb;
use agent_harness_protocol::pb::subscribe_response::Kind;
use agent_harness_server::log::{
    self as event_log, EventLogs, LogError, LogOptions, SUBSCRIBER_CHUNK,
};
use agent_harness_server::store::{
    Commit, CommitNotice, MemoryStore, RawEvent, Receipt, ReceiptWrite, SessionMeta, Store,
    StoreError, StoreUsage,
};
use futures::{Stream, StreamExt};
use tokio::sync::broadcast;

use crate::support::log::{new_event, seqs};

fn open(store: Arc<dyn Store>, opts: LogOptions) -> EventLogs {
    EventLogs::open(store, opts).unwrap()
}

/// What a stream delivered: the events' seqs in order, and the head each
/// `caught_up` named.
#[derive(Default, Debug)]
struct Seen {
    events: Vec<u64>,
    caught_up: Vec<u64>,
}

/// Reads `s` until it delivered event `last` and `caught_up`, asserting
/// the header comes first; on the clock of the test (paused or not), at
/// most `within`.
async fn read_until(
    s: &mut (impl Stream<Item = pb::SubscribeResponse> + Unpin),
    seen: &mut Seen,
    last: u64,
    within: Duration,
) {
    let deadline = tokio::time::Instant::now() + within;
    while seen.caught_up.is_empty() || seen.events.last().copied().unwrap_or(0) < last {
        let msg = tokio::time::timeout_at(deadline, s.next())
            .await
            .unwrap_or_else(|_| panic!("stalled waiting for {last}: {seen:?}"))
            .expect("stream ended");
        match msg.kind.expect("empty response") {
            Kind::Replay(h) => {
                assert!(seen.events.is_empty() && seen.caught_up.is_empty(), "{h:?}");
            }
            Kind::Event(e) => seen.events.push(e.seq),
            Kind::CaughtUp(c) => seen.caught_up.push(c.head_seq),
            Kind::Heartbeat(_) => {}
            other => panic!("unexpected {other:?}"),
        }
    }
}

/// Every event from 1 to `last` exactly once, in order, and `caught_up`
/// once, naming a head the stream had delivered.
fn assert_gapless(seen: &Seen, last: u64) {
    assert_eq!(seen.events, (1..=last).collect::<Vec<_>>(), "{seen:?}");
    assert_eq!(seen.caught_up.len(), 1, "{seen:?}");
    assert!(seen.caught_up[0] <= last, "{seen:?}");
}

async fn append_n(logs: &EventLogs, sid: &str, sizes: &[u64]) {
    for &n in sizes {
        logs.commit(
            sid,
            event_log::Commit::events((0..n).map(new_event).collect()),
        )
        .await
        .unwrap();
    }
}

const REAL: Duration = Duration::from_secs(10);

#[tokio::test]
async fn a_subscriber_sees_what_another_log_appends_gapless_and_once() {
    let store = Arc::new(MemoryStore::new());
    let a = open(store.clone(), LogOptions::default());
    let b = open(store.clone(), LogOptions::default());
    // A follows the session before it exists; B writes it.
    let mut early = Box::pin(a.subscribe("s", 0).await.unwrap());
    let mut seen_early = Seen::default();
    read_until(&mut early, &mut seen_early, 0, REAL).await;
    append_n(&b, "s", &[1]).await;
    read_until(&mut early, &mut seen_early, 1, REAL).await;
    // Appended by B while no second subscriber was there: a late one on
    // A (the session resident there) replays them.
    append_n(&b, "s", &[2, 3]).await;
    let mut late = Box::pin(a.subscribe("s", 0).await.unwrap());
    let mut seen_late = Seen::default();
    read_until(&mut late, &mut seen_late, 6, REAL).await;
    // A long burst across the subscriber's chunk sizes, in appends of
    // every size, while both streams are live.
    let burst = [
        1,
        17,
        SUBSCRIBER_CHUNK as u64 + 3,
        997,
        2,
        3 * SUBSCRIBER_CHUNK as u64,
    ];
    let last = 6 + burst.iter().sum::<u64>();
    append_n(&b, "s", &burst).await;
    read_until(&mut early, &mut seen_early, last, REAL).await;
    read_until(&mut late, &mut seen_late, last, REAL).await;
    assert_gapless(&seen_early, last);
    assert_gapless(&seen_late, last);
    // History on A reads the same log (its resident head moved too).
    assert_eq!(a.head_seq("s").await.unwrap(), last);
    let (page, _) = a.history("s", 0, 1000).await.unwrap();
    assert_eq!(seqs(&page).last(), Some(&last));
    a.shutdown().await;
    b.shutdown().await;
}

#[tokio::test]
async fn a_log_that_follows_numbers_its_next_append_after_the_other_writers() {
    let store = Arc::new(MemoryStore::new());
    let a = open(store.clone(), LogOptions::default());
    let b = open(store.clone(), LogOptions::default());
    let mut sub = Box::pin(a.subscribe("s", 0).await.unwrap());
    let mut seen = Seen::default();
    append_n(&a, "s", &[1]).await;
    append_n(&b, "s", &[2]).await;
    read_until(&mut sub, &mut seen, 3, REAL).await;
    // A saw B's commit: its next append follows it, no refusal.
    let mine = a
        .commit("s", event_log::Commit::events(vec![new_event(9)]))
        .await
        .unwrap();
    assert_eq!(seqs(&mine), [4]);
    read_until(&mut sub, &mut seen, 4, REAL).await;
    assert_gapless(&seen, 4);
    a.shutdown().await;
    b.shutdown().await;
}

#[tokio::test]
async fn appending_from_a_stale_head_fails_cleanly_then_numbers_afresh() {
    // No feed: A does not tail, so it numbers from the head it cached.
    let store = Arc::new(MemoryStore::new());
    let a = open(
        Arc::new(Wrapper::new(store.clone(), false)),
        LogOptions::default(),
    );
    let b = open(store.clone(), LogOptions::default());
    append_n(&a, "s", &[1]).await;
    append_n(&b, "s", &[2]).await;
    let before = store.read_range("s", 0, 100).unwrap();
    let err = a
        .commit("s", event_log::Commit::events(vec![new_event(7)]))
        .await
        .unwrap_err();
    assert!(matches!(err, LogError::Store(_)), "{err:?}");
    // Refused whole: B's events are as B wrote them.
    assert_eq!(store.read_range("s", 0, 100).unwrap(), before);
    // The next append reads the fresh head.
    let mine = a
        .commit("s", event_log::Commit::events(vec![new_event(7)]))
        .await
        .unwrap();
    assert_eq!(seqs(&mine), [4]);
    assert_eq!(seqs(&store.read_range("s", 0, 100).unwrap()), [1, 2, 3, 4]);
    a.shutdown().await;
    b.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn a_session_held_without_a_stream_follows_too() {
    let store = Arc::new(MemoryStore::new());
    let a = open(store.clone(), LogOptions::default());
    let b = open(store.clone(), LogOptions::default());
    append_n(&b, "s", &[2]).await;
    // Read on A: resident there, no stream holds it. History and the head
    // are read from that entry.
    assert_eq!(a.head_seq("s").await.unwrap(), 2);
    append_n(&b, "s", &[3]).await;
    // Paused clock: the bound is on turns, not time (the writer threads
    // are real threads, and the clock jumps while the runtime waits).
    let mut waited = 0;
    while a.head_seq("s").await.unwrap() < 5 {
        assert!(waited < 100_000, "A's head stayed behind");
        tokio::time::sleep(Duration::from_millis(10)).await;
        waited += 1;
    }
    let (page, _) = a.history("s", 0, 10).await.unwrap();
    assert_eq!(seqs(&page), [1, 2, 3, 4, 5]);
    a.shutdown().await;
    b.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_logs_appending_to_one_session_never_overwrite_nor_leave_a_gap() {
    const EACH: u64 = 60;
    let store = Arc::new(MemoryStore::new());
    let logs = [
        open(store.clone(), LogOptions::default()),
        open(store.clone(), LogOptions::default()),
    ];
    let mut subs = Vec::new();
    for logs in &logs {
        let mut sub = Box::pin(logs.subscribe("s", 0).await.unwrap());
        let mut seen = Seen::default();
        read_until(&mut sub, &mut seen, 0, REAL).await;
        subs.push((sub, seen));
    }
    // Each log appends its own events one by one, retrying what the store
    // refused (the other had taken the seq): no owner decides here.
    let writers = logs.iter().enumerate().map(|(w, logs)| {
        let logs = logs.clone();
        tokio::spawn(async move {
            let mut got = Vec::new();
            for i in 0..EACH {
                let line = format!("{{\"writer\":{w},\"i\":{i}}}");
                loop {
                    let event = agent_harness_server::log::NewEvent {
                        cli_line: line.clone(),
                        ..new_event(i)
                    };
                    match logs
                        .commit("s", event_log::Commit::events(vec![event]))
                        .await
                    {
                        Ok(evs) => break got.extend(evs),
                        Err(LogError::Store(_)) => tokio::task::yield_now().await,
                        Err(e) => panic!("{e}"),
                    }
                }
            }
            got
        })
    });
    let mut acked = Vec::new();
    for w in writers.collect::<Vec<_>>() {
        acked.extend(w.await.unwrap());
    }
    let last = 2 * EACH;
    // The store holds 1..=last, each acknowledged event as acknowledged.
    let stored = store.read_range("s", 0, 1000).unwrap();
    assert_eq!(seqs(&stored), (1..=last).collect::<Vec<_>>());
    acked.sort_by_key(|e| e.seq);
    assert_eq!(acked.len(), stored.len());
    for (a, s) in acked.iter().zip(&stored) {
        assert_eq!((a.seq, &a.cli_line), (s.seq, &s.cli_line));
    }
    // Both logs' subscribers saw every one of them once.
    for (sub, seen) in &mut subs {
        read_until(sub, seen, last, REAL).await;
        assert_gapless(seen, last);
    }
    for logs in &logs {
        logs.shutdown().await;
    }
}

#[tokio::test(start_paused = true)]
async fn with_notices_lost_the_poll_finds_the_commits() {
    let store = Arc::new(MemoryStore::new());
    let quiet = Arc::new(Wrapper::new(store.clone(), true));
    let poll = Duration::from_secs(1);
    let a = open(
        quiet,
        LogOptions {
            tail_poll: poll,
            ..LogOptions::default()
        },
    );
    let b = open(store.clone(), LogOptions::default());
    let mut sub = Box::pin(a.subscribe("s", 0).await.unwrap());
    let mut seen = Seen::default();
    // The paused clock jumps to the next timer (the next poll) whenever the
    // runtime waits for a writer thread, which is a real thread: many
    // polls may pass before it answers, each in microseconds of real time.
    // Without tailing the day passes as quickly, in heartbeats.
    let within = Duration::from_secs(24 * 3600);
    read_until(&mut sub, &mut seen, 0, within).await;
    append_n(&b, "s", &[3]).await;
    read_until(&mut sub, &mut seen, 3, within).await;
    append_n(&b, "s", &[SUBSCRIBER_CHUNK as u64 * 2]).await;
    let last = 3 + SUBSCRIBER_CHUNK as u64 * 2;
    read_until(&mut sub, &mut seen, last, within).await;
    assert_gapless(&seen, last);
    a.shutdown().await;
    b.shutdown().await;
}

#[tokio::test]
async fn a_lost_or_lagged_feed_re_checks_every_followed_session() {
    let store = Arc::new(MemoryStore::new());
    let feed = Arc::new(Wrapper::new(store.clone(), true));
    // No poll within the test: only the feed can wake A.
    let a = open(
        feed.clone(),
        LogOptions {
            tail_poll: Duration::from_secs(3600),
            ..LogOptions::default()
        },
    );
    let b = open(store.clone(), LogOptions::default());
    let mut s1 = Box::pin(a.subscribe("s1", 0).await.unwrap());
    let mut s2 = Box::pin(a.subscribe("s2", 0).await.unwrap());
    let (mut seen1, mut seen2) = (Seen::default(), Seen::default());
    read_until(&mut s1, &mut seen1, 0, REAL).await;
    read_until(&mut s2, &mut seen2, 0, REAL).await;
    // Lost: every followed session is looked at.
    append_n(&b, "s1", &[2]).await;
    append_n(&b, "s2", &[3]).await;
    feed.notify(CommitNotice::Lost);
    read_until(&mut s1, &mut seen1, 2, REAL).await;
    read_until(&mut s2, &mut seen2, 3, REAL).await;
    // Lagged: more notices than the feed holds, none naming s1 or s2.
    append_n(&b, "s1", &[4]).await;
    append_n(&b, "s2", &[5]).await;
    for _ in 0..2 * FEED_BACKLOG {
        feed.notify(CommitNotice::Sessions(vec!["other".into()]));
    }
    read_until(&mut s1, &mut seen1, 6, REAL).await;
    read_until(&mut s2, &mut seen2, 8, REAL).await;
    assert_gapless(&seen1, 6);
    assert_gapless(&seen2, 8);
    a.shutdown().await;
    b.shutdown().await;
}

/// What the wrapper's own feed holds before a receiver lags.
const FEED_BACKLOG: usize = 4;

/// A [`MemoryStore`] seen through a feed the test controls: none at all
/// (a store without notices), or its own, into which the store's notices
/// never go (notices lost), and the test sends what it wants.
struct Wrapper {
    inner: Arc<MemoryStore>,
    feed: Option<broadcast::Sender<CommitNotice>>,
}

impl Wrapper {
    fn new(inner: Arc<MemoryStore>, feed: bool) -> Self {
        Self {
            inner,
            feed: feed.then(|| broadcast::Sender::new(FEED_BACKLOG)),
        }
    }

    fn notify(&self, notice: CommitNotice) {
        // No receiver (a log that does not tail) is for the test to notice.
        let _ = self.feed.as_ref().expect("a feed").send(notice);
    }
}

impl Store for Wrapper {
    fn commit(&self, commit: Commit<'_>) -> Result<(), StoreError> {
        self.inner.commit(commit)
    }
    fn receipt(&self, session_id: &str, key: &str) -> Result<Option<Receipt>, StoreError> {
        self.inner.receipt(session_id, key)
    }
    fn prune_receipts(&self, before_ms: i64, limit: usize) -> Result<usize, StoreError> {
        self.inner.prune_receipts(before_ms, limit)
    }
    fn receipt_count(&self) -> Result<usize, StoreError> {
        self.inner.receipt_count()
    }
    fn read_range_raw(
        &self,
        session_id: &str,
        after_seq: u64,
        limit: usize,
        max_bytes: usize,
        event_cap: usize,
    ) -> Result<Vec<RawEvent>, StoreError> {
        self.inner
            .read_range_raw(session_id, after_seq, limit, max_bytes, event_cap)
    }
    fn read_before_raw(
        &self,
        session_id: &str,
        before_seq: u64,
        limit: usize,
        max_bytes: usize,
        event_cap: usize,
    ) -> Result<Vec<RawEvent>, StoreError> {
        self.inner
            .read_before_raw(session_id, before_seq, limit, max_bytes, event_cap)
    }
    fn read_full(&self, session_id: &str, seq: u64) -> Result<Option<pb::Event>, StoreError> {
        self.inner.read_full(session_id, seq)
    }
    fn meta(&self, session_id: &str) -> Result<Option<SessionMeta>, StoreError> {
        self.inner.meta(session_id)
    }
    fn put_meta(&self, meta: &SessionMeta) -> Result<(), StoreError> {
        self.inner.put_meta(meta)
    }
    fn sessions(&self, after: Option<&str>, limit: usize) -> Result<Vec<SessionMeta>, StoreError> {
        self.inner.sessions(after, limit)
    }
    fn conversation_sessions(&self, resume_id: &str) -> Result<Vec<String>, StoreError> {
        self.inner.conversation_sessions(resume_id)
    }
    fn transcript(
        &self,
        session_id: &str,
    ) -> Result<Vec<agent_harness_server::store::TranscriptEntry>, StoreError> {
        self.inner.transcript(session_id)
    }
    fn delete_session(
        &self,
        session_id: &str,
        receipt: Option<&ReceiptWrite>,
    ) -> Result<bool, StoreError> {
        self.inner.delete_session(session_id, receipt)
    }
    fn usage(&self) -> Result<StoreUsage, StoreError> {
        self.inner.usage()
    }
    fn session_count(&self) -> Result<u64, StoreError> {
        self.inner.session_count()
    }
    fn index_rows(
        &self,
        session_ids: &[String],
    ) -> Result<Vec<Option<agent_harness_server::store::IndexRow>>, StoreError> {
        self.inner.index_rows(session_ids)
    }
    fn put_index(&self, rows: &[agent_harness_server::store::IndexRow]) -> Result<(), StoreError> {
        self.inner.put_index(rows)
    }
    fn list_index(
        &self,
        query: &agent_harness_server::store::ListQuery,
    ) -> Result<agent_harness_server::store::ListPage, StoreError> {
        self.inner.list_index(query)
    }
    fn commit_notices(&self) -> Option<broadcast::Receiver<CommitNotice>> {
        self.feed.as_ref().map(broadcast::Sender::subscribe)
    }
    fn heads(&self, session_ids: &[String]) -> Result<Vec<u64>, StoreError> {
        self.inner.heads(session_ids)
    }
}
