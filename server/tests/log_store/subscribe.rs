//! Subscribe: header, replay, caught_up, live, resets, window fall-through,
//! heartbeats and the bounded-memory slow subscriber.

use crate::support::log;

use std::sync::Arc;
use std::time::Duration;

use agent_harness_protocol::pb;
use agent_harness_protocol::pb::subscribe_response::Kind;
use agent_harness_server::log::{
    Commit, EventLogs, LogOptions, REPLAY_CHUNK, SUBSCRIBER_CHUNK, SUBSCRIBER_WINDOW_CHUNK,
};
use agent_harness_server::store::RedbStore;
use futures::{Stream, StreamExt};
use log::new_event;

fn open(dir: &tempfile::TempDir, opts: LogOptions) -> EventLogs {
    let store = RedbStore::open(&dir.path().join("agent-harness.redb")).unwrap();
    EventLogs::open(Arc::new(store), opts).unwrap()
}

fn opts(window: usize, max_replay: u64) -> LogOptions {
    LogOptions {
        window,
        max_replay,
        ..LogOptions::default()
    }
}

/// The replay header Subscribe must send first.
fn header(reset: bool, from_seq: u64, head_seq: u64) -> pb::ReplayStart {
    pb::ReplayStart {
        reset,
        from_seq,
        head_seq,
    }
}

async fn fill(logs: &EventLogs, sid: &str, n: u64) {
    // Several appends so the store sees several commits.
    let mut done = 0;
    while done < n {
        let k = (n - done).min(997);
        logs.commit(
            sid,
            Commit::events((done..done + k).map(new_event).collect()),
        )
        .await
        .unwrap();
        done += k;
    }
}

async fn next_kind(s: &mut (impl Stream<Item = pb::SubscribeResponse> + Unpin)) -> Kind {
    // Longer than any heartbeat interval used here (paused-clock tests jump).
    tokio::time::timeout(Duration::from_secs(60), s.next())
        .await
        .expect("stream stalled")
        .expect("stream ended")
        .kind
        .expect("empty response")
}

/// Reads the header, the replayed events and caught_up.
async fn replay(
    s: &mut (impl Stream<Item = pb::SubscribeResponse> + Unpin),
) -> (pb::ReplayStart, Vec<u64>, u64) {
    let Kind::Replay(header) = next_kind(s).await else {
        panic!("first message must be the replay header")
    };
    let mut seqs = Vec::new();
    loop {
        match next_kind(s).await {
            Kind::Event(e) => seqs.push(e.seq),
            Kind::CaughtUp(c) => return (header, seqs, c.head_seq),
            other => panic!("unexpected during replay: {other:?}"),
        }
    }
}

fn range(a: u64, b: u64) -> Vec<u64> {
    (a..=b).collect()
}

/// The heartbeat interval the heartbeat tests use.
const HEARTBEAT: Duration = Duration::from_secs(15);

fn with_heartbeat(heartbeat: Duration) -> LogOptions {
    LogOptions {
        heartbeat,
        ..LogOptions::default()
    }
}

/// The next message, which must be a heartbeat, and how long it took.
async fn next_heartbeat(
    s: &mut (impl Stream<Item = pb::SubscribeResponse> + Unpin),
) -> (pb::Heartbeat, Duration) {
    let t0 = tokio::time::Instant::now();
    match next_kind(s).await {
        Kind::Heartbeat(hb) => (hb, t0.elapsed()),
        other => panic!("expected a heartbeat, got {other:?}"),
    }
}

/// True when `d` is one heartbeat interval (the paused clock lands on it).
fn one_interval(d: Duration) -> bool {
    d >= HEARTBEAT && d < HEARTBEAT + Duration::from_secs(1)
}

#[tokio::test]
async fn replays_after_the_cursor_then_goes_live() {
    let dir = tempfile::tempdir().unwrap();
    let logs = open(&dir, LogOptions::default());
    fill(&logs, "s", 30).await;
    let mut s = Box::pin(logs.subscribe("s", 10).await.unwrap());
    let (h, seqs, caught) = replay(&mut s).await;
    assert_eq!(h, header(false, 10, 30));
    assert_eq!((seqs, caught), (range(11, 30), 30));
    logs.commit("s", Commit::events(vec![new_event(1), new_event(2)]))
        .await
        .unwrap();
    for want in [31, 32] {
        let Kind::Event(e) = next_kind(&mut s).await else {
            panic!()
        };
        assert_eq!(e.seq, want);
    }
    logs.shutdown().await;
    assert!(s.next().await.is_none(), "shutdown ends the stream");
}

#[tokio::test]
async fn empty_session_replays_nothing_and_goes_live() {
    let dir = tempfile::tempdir().unwrap();
    let logs = open(&dir, LogOptions::default());
    let mut s = Box::pin(logs.subscribe("new", 0).await.unwrap());
    let (h, seqs, caught) = replay(&mut s).await;
    assert_eq!(h, header(false, 0, 0));
    assert!(seqs.is_empty());
    assert_eq!(caught, 0);
    logs.commit("new", Commit::events(vec![new_event(1)]))
        .await
        .unwrap();
    let Kind::Event(e) = next_kind(&mut s).await else {
        panic!()
    };
    assert_eq!((e.seq, e.session_id.as_str()), (1, "new"));
    logs.shutdown().await;
}

#[tokio::test]
async fn cursor_at_head_replays_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let logs = open(&dir, LogOptions::default());
    fill(&logs, "s", 5).await;
    let (h, seqs, caught) = replay(&mut Box::pin(logs.subscribe("s", 5).await.unwrap())).await;
    assert_eq!((h.reset, h.from_seq, seqs.len(), caught), (false, 5, 0, 5));
    logs.shutdown().await;
}

#[tokio::test]
async fn cursor_past_head_resets_to_the_tail_window() {
    let dir = tempfile::tempdir().unwrap();
    let logs = open(&dir, opts(10, 100));
    fill(&logs, "s", 25).await;
    let (h, seqs, caught) = replay(&mut Box::pin(logs.subscribe("s", 26).await.unwrap())).await;
    assert_eq!(h, header(true, 15, 25));
    assert_eq!((seqs, caught), (range(16, 25), 25));
    // Past the head of a short session: the whole log is the tail.
    fill(&logs, "short", 3).await;
    let (h, seqs, _) = replay(&mut Box::pin(logs.subscribe("short", 1_000).await.unwrap())).await;
    assert_eq!(h, header(true, 0, 3));
    assert_eq!(seqs, range(1, 3));
    // Past the head of an empty session.
    let (h, seqs, _) = replay(&mut Box::pin(logs.subscribe("empty", 1).await.unwrap())).await;
    assert_eq!(h, header(true, 0, 0));
    assert!(seqs.is_empty());
    logs.shutdown().await;
}

#[tokio::test]
async fn cursor_too_far_behind_resets_and_the_boundary_does_not() {
    let dir = tempfile::tempdir().unwrap();
    let logs = open(&dir, opts(10, 100));
    fill(&logs, "s", 250).await;
    // head - after == max_replay: exactly at the boundary, replayed in full.
    let (h, seqs, _) = replay(&mut Box::pin(logs.subscribe("s", 150).await.unwrap())).await;
    assert_eq!(h, header(false, 150, 250));
    assert_eq!(seqs, range(151, 250));
    // One further behind: reset to the tail window.
    let (h, seqs, _) = replay(&mut Box::pin(logs.subscribe("s", 149).await.unwrap())).await;
    assert_eq!(h, header(true, 240, 250));
    assert_eq!(seqs, range(241, 250));
    // after_seq 0 on a long log is "too far behind" too.
    let (h, _, _) = replay(&mut Box::pin(logs.subscribe("s", 0).await.unwrap())).await;
    assert!(h.reset);
    logs.shutdown().await;
}

#[tokio::test]
async fn replay_older_than_the_window_falls_through_to_storage() {
    let dir = tempfile::tempdir().unwrap();
    let logs = open(&dir, opts(50, 100_000));
    // A live subscriber keeps the session in memory while it is filled.
    let live = logs.subscribe("s", 0).await.unwrap();
    fill(&logs, "s", 3_000).await;
    assert_eq!(logs.stats().window_events, 50, "window is bounded");
    drop(live);
    let (h, seqs, caught) = replay(&mut Box::pin(logs.subscribe("s", 7).await.unwrap())).await;
    assert!(!h.reset);
    assert_eq!((seqs, caught), (range(8, 3_000), 3_000));
    // The events themselves round-trip from storage.
    let from_store = logs.read_range("s", 0, usize::MAX).await.unwrap();
    assert_eq!(from_store.len(), 3_000);
    assert_eq!(from_store[7].payload, Some(log::payload(7)));
    logs.shutdown().await;
}

/// A replay whose end comes from the window drops the store read it had
/// started ahead: once live, the stream holds nothing (the read ahead
/// counts in `subscriber_buffered` while it is held).
#[tokio::test]
async fn a_replay_that_ends_in_the_window_holds_no_read_ahead_once_live() {
    let dir = tempfile::tempdir().unwrap();
    // 6,000 events in rows of 997, the last 3,000 in the window. A replay
    // read takes REPLAY_CHUNK (1,024) events and goes on to the end of its
    // row: 1..=1994, then (read ahead) 1995..=3988, which ends inside the
    // window with more to come; the read started ahead of it is dropped.
    assert_eq!(REPLAY_CHUNK, 1024, "the numbers below are for this chunk");
    let logs = open(&dir, opts(3_000, 100_000));
    let live = logs.subscribe("s", 0).await.unwrap();
    fill(&logs, "s", 6_000).await;
    drop(live);
    let mut s = Box::pin(logs.subscribe("s", 0).await.unwrap());
    let (_, seqs, caught) = replay(&mut s).await;
    assert_eq!((seqs, caught), (range(1, 6_000), 6_000));
    // A read the stream dropped may still be finishing on its thread.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while logs.stats().subscriber_buffered != 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "a live stream still holds {} events",
            logs.stats().subscriber_buffered
        );
        tokio::task::yield_now().await;
    }
    assert_eq!(logs.stats().subscribers, 1);
    logs.shutdown().await;
}

#[tokio::test]
async fn window_zero_serves_everything_from_storage() {
    let dir = tempfile::tempdir().unwrap();
    let logs = open(&dir, opts(0, 100_000));
    fill(&logs, "s", 40).await;
    assert_eq!(logs.stats().window_events, 0);
    let mut s = Box::pin(logs.subscribe("s", 0).await.unwrap());
    let (_, seqs, _) = replay(&mut s).await;
    assert_eq!(seqs, range(1, 40));
    logs.commit("s", Commit::events(vec![new_event(0)]))
        .await
        .unwrap();
    let Kind::Event(e) = next_kind(&mut s).await else {
        panic!()
    };
    assert_eq!(e.seq, 41);
    logs.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn idle_live_streams_get_heartbeats_with_the_head() {
    let dir = tempfile::tempdir().unwrap();
    let logs = open(&dir, with_heartbeat(HEARTBEAT));
    fill(&logs, "s", 3).await;
    let mut s = Box::pin(logs.subscribe("s", 3).await.unwrap());
    replay(&mut s).await;
    let (hb, waited) = next_heartbeat(&mut s).await;
    assert_eq!(hb.head_seq, 3);
    assert!(waited >= HEARTBEAT, "not before the interval: {waited:?}");
    // Heartbeats repeat.
    next_heartbeat(&mut s).await;
    logs.shutdown().await;
}

#[tokio::test]
async fn lagging_subscribers_copy_small_chunks_out_of_the_window() {
    let dir = tempfile::tempdir().unwrap();
    let logs = open(&dir, opts(2_000, 100_000));
    fill(&logs, "s", 10).await;
    let mut subs = Vec::new();
    for _ in 0..100 {
        let mut s = Box::pin(logs.subscribe("s", 10).await.unwrap());
        assert!(matches!(next_kind(&mut s).await, Kind::Replay(_)));
        assert!(matches!(next_kind(&mut s).await, Kind::CaughtUp(_)));
        subs.push(s);
    }
    // All of them fall 500 events behind; the events are still in the window.
    logs.commit("s", Commit::events((10..510).map(new_event).collect()))
        .await
        .unwrap();
    for s in &mut subs {
        let Kind::Event(e) = next_kind(s).await else {
            panic!("an event")
        };
        assert_eq!(e.seq, 11);
    }
    let buffered = logs.stats().subscriber_buffered;
    assert!(
        buffered <= 100 * (SUBSCRIBER_WINDOW_CHUNK - 1),
        "each lagging subscriber holds at most a small chunk: {buffered}"
    );
    for s in &mut subs {
        for want in 12..=510 {
            let Kind::Event(e) = next_kind(s).await else {
                panic!("an event")
            };
            assert_eq!(e.seq, want, "gap or duplicate");
        }
    }
    assert_eq!(logs.stats().subscriber_buffered, 0);
    logs.shutdown().await;
}

#[tokio::test]
async fn a_subscriber_that_never_reads_keeps_memory_bounded_then_catches_up() {
    let dir = tempfile::tempdir().unwrap();
    let logs = open(&dir, opts(2_000, 100_000));
    fill(&logs, "s", 10).await;
    let mut s = Box::pin(logs.subscribe("s", 0).await.unwrap());
    // Read a little, then stop reading mid-replay (a chunk is buffered).
    let Kind::Replay(_) = next_kind(&mut s).await else {
        panic!()
    };
    let Kind::Event(e) = next_kind(&mut s).await else {
        panic!()
    };
    assert_eq!(e.seq, 1);
    // Other subscribers that never read at all.
    let mut idle = Vec::new();
    for _ in 0..100 {
        idle.push(Box::pin(logs.subscribe("s", 10).await.unwrap()));
    }

    for chunk in 0..50u64 {
        logs.commit(
            "s",
            Commit::events((0..1_000).map(|i| new_event(chunk * 1_000 + i)).collect()),
        )
        .await
        .unwrap();
        let st = logs.stats();
        assert!(st.window_events <= 2_000, "window grew: {st:?}");
        // A store read goes on to the end of a row: at most twice a chunk.
        assert!(
            st.subscriber_buffered <= 2 * SUBSCRIBER_CHUNK,
            "subscriber backlog grew: {st:?}"
        );
    }
    let st = logs.stats();
    assert_eq!(st.subscribers, 101);
    assert_eq!(logs.head_seq("s").await.unwrap(), 50_010);

    // Reading again: everything arrives in order, the old part from storage.
    let mut want = 2;
    let mut caught = false;
    while want <= 50_010 {
        match next_kind(&mut s).await {
            Kind::Event(e) => {
                assert_eq!(e.seq, want, "gap or duplicate");
                want += 1;
            }
            Kind::CaughtUp(c) => {
                assert_eq!(c.head_seq, 10);
                caught = true;
            }
            other => panic!("{other:?}"),
        }
        assert!(logs.stats().subscriber_buffered <= 2 * SUBSCRIBER_CHUNK);
    }
    assert!(caught);
    drop(idle);
    assert_eq!(logs.stats().subscribers, 1);
    logs.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn heartbeat_comes_one_interval_after_the_last_event_not_after_the_first_wait() {
    // The timer is armed once and re-armed lazily; it must still honour the
    // interval measured from the last message sent.
    let dir = tempfile::tempdir().unwrap();
    let logs = open(&dir, with_heartbeat(HEARTBEAT));
    let mut s = Box::pin(logs.subscribe("s", 0).await.unwrap());
    replay(&mut s).await;
    // Wait idle for 10 s: this arms the heartbeat timer for t0 + 15 s.
    assert!(
        tokio::time::timeout(Duration::from_secs(10), s.next())
            .await
            .is_err(),
        "nothing before the interval"
    );
    // An event. The paused clock may jump to the armed deadline while the
    // (real OS) writer thread commits, so a heartbeat for the old head may
    // legitimately come first; what matters is what follows the event.
    logs.commit("s", Commit::events(vec![new_event(1)]))
        .await
        .unwrap();
    let e = loop {
        match next_kind(&mut s).await {
            Kind::Event(e) => break e,
            Kind::Heartbeat(hb) if hb.head_seq == 0 => continue,
            other => panic!("expected the event, got {other:?}"),
        }
    };
    assert_eq!(e.seq, 1);
    let (hb, waited) = next_heartbeat(&mut s).await;
    assert_eq!(hb.head_seq, 1);
    assert!(
        one_interval(waited),
        "heartbeat {waited:?} after the last event, want 15 s"
    );
    let (_, gap) = next_heartbeat(&mut s).await;
    assert!(
        one_interval(gap),
        "heartbeats repeat every 15 s, got {gap:?}"
    );
    logs.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_ends_every_live_stream_and_refuses_new_ones() {
    // Shutdown is a flag plus a wake through each session's head watch:
    // every waiting stream must wake and end, on every session.
    let dir = tempfile::tempdir().unwrap();
    let logs = open(&dir, LogOptions::default());
    fill(&logs, "a", 5).await;
    let (ready_tx, mut ready_rx) = tokio::sync::mpsc::unbounded_channel();
    let mut tasks = Vec::new();
    for i in 0..300 {
        // Half on a session with events, half on one that has none yet.
        let mut s = Box::pin(
            logs.subscribe(if i % 2 == 0 { "a" } else { "empty" }, 0)
                .await
                .unwrap(),
        );
        let ready = ready_tx.clone();
        tasks.push(tokio::spawn(async move {
            let mut n = 0;
            while let Some(msg) = s.next().await {
                if let Some(Kind::CaughtUp(_)) = msg.kind {
                    let _ = ready.send(());
                }
                n += 1;
            }
            n
        }));
    }
    for _ in 0..300 {
        ready_rx.recv().await.unwrap();
    }
    logs.shutdown().await;
    for t in tasks {
        let n = tokio::time::timeout(Duration::from_secs(5), t)
            .await
            .expect("a live stream did not end at shutdown")
            .unwrap();
        assert!(n >= 2, "header and caught_up came first");
    }
    let mut late = Box::pin(logs.subscribe("a", 0).await.unwrap());
    let end = tokio::time::timeout(Duration::from_secs(5), late.next())
        .await
        .expect("a stream opened after shutdown must end");
    assert!(end.is_none());
}
