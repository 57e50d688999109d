//! Live typing against the REAL claude CLI 2.1.197 and the
//! scripted Messages API: the server runs the CLI with
//! `--include-partial-messages`, never stores its `stream_event` lines, and
//! streams the message being written as `delta`s to the Subscribe streams
//! that set `include_deltas`.
//!
//! `SLOW <n> <ms>` makes the fake model stream `tick 0 tick 1 ...` as `n`
//! text deltas `ms` apart, so a turn is visibly in progress.
//!
//! Run: `cargo test -p agent-harness-server --test real_cli live_typing::`.

use crate::support::cli_grpc;

use agent_harness_protocol::pb;
use agent_harness_protocol::pb::event::Payload;
use cli_grpc::{Events, Harness, Setup, describe_all, joined, of_message, texts};

/// The text of `slow` ticks as `SLOW n` streams it.
fn ticks(n: usize) -> String {
    (0..n).map(|i| format!("tick {i} ")).collect()
}

/// The one content event with text: its position in `events`, its message
/// id and its text.
fn text_content(events: &[pb::Event]) -> (usize, String, String) {
    let found: Vec<_> = events
        .iter()
        .enumerate()
        .filter_map(|(i, e)| match &e.payload {
            Some(Payload::Content(c)) => {
                let text: String = c
                    .blocks
                    .iter()
                    .filter(|b| b.r#type == "text")
                    .map(|b| b.text.as_str())
                    .collect();
                (!text.is_empty()).then(|| (i, c.message_id.clone(), text))
            }
            _ => None,
        })
        .collect();
    assert_eq!(
        found.len(),
        1,
        "one text content:\n{}",
        describe_all(events)
    );
    found.into_iter().next().unwrap()
}

/// `GET /metrics` on the serving port: a lookup of one series' value.
async fn metrics(addr: std::net::SocketAddr) -> impl Fn(&str) -> f64 {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let req = format!("GET /metrics HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    tcp.write_all(req.as_bytes()).await.unwrap();
    let mut raw = String::new();
    tcp.read_to_string(&mut raw).await.unwrap();
    let body = raw.split_once("\r\n\r\n").expect("a body").1.to_owned();
    move |name: &str| {
        body.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
            .unwrap_or_else(|| panic!("{name} missing from /metrics:\n{body}"))
    }
}

/// A subscriber with `include_deltas` sees the answer arrive in several
/// pieces, all before its `content` event, and the pieces join to exactly
/// the content's text. The log holds no trace of them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn text_arrives_in_pieces_before_its_content_and_joins_to_it() {
    let h = Harness::with(Setup::default()).await;
    let live = Events::open_with(h.client(), "typing", true).await;
    let plain = h.subscribe("typing").await;
    let started = h.start_session("typing", "SLOW 12 150").await;
    let (_, end) = live.turn_end_after(0).await;
    assert!(!end.is_error, "{end:?}");

    let events = live.snapshot();
    let (at, message_id, text) = text_content(&events);
    assert_eq!(text, ticks(12));
    let deltas = of_message(&live.deltas(), &message_id);
    assert!(
        deltas.len() >= 3,
        "the text comes in several pieces, not at once: {deltas:?}"
    );
    for (before, d) in &deltas {
        assert!(
            *before <= at,
            "every delta of a message comes before its content event (delta after {before} events, content at {at}): {d:?}"
        );
        assert_eq!(d.run_id, started.run_id);
        assert_eq!(d.index, 0);
        assert_eq!(d.block_type(), pb::DeltaBlockType::Text);
        assert!(
            !d.snapshot,
            "subscribed before the start: nothing to snapshot"
        );
        assert!(d.parent_tool_use_id.is_empty());
    }
    assert_eq!(joined(deltas.iter().map(|(_, d)| d)), text);
    assert!(
        live.deltas()
            .iter()
            .all(|(_, d)| d.message_id == message_id),
        "deltas only for the message with text: {:?}",
        live.deltas()
    );

    // The plain stream saw the same events and no delta (its contract check
    // flags one); nothing partial reached the log or a cli_line.
    plain
        .wait_for("the plain stream to reach the turn_end", |evs| {
            (evs.len() >= events.len()).then_some(())
        })
        .await;
    assert_eq!(plain.snapshot()[..events.len()], events[..]);
    plain.assert_contract();
    for e in &events {
        assert!(
            !e.cli_line.contains("stream_event"),
            "a stream_event line was stored: {e:?}"
        );
    }
    // /metrics counts them: every fragment the CLI wrote was published, and
    // at least the deltas this stream got were sent.
    let m = metrics(h.addr).await;
    assert!(m("agent_harness_partial_fragments_total") >= 12.0);
    assert!(m("agent_harness_deltas_sent_total") >= deltas.len() as f64);
    assert_eq!(m("agent_harness_partial_fragments_dropped_total"), 0.0);
    h.finish("typing", &live).await;
}

/// A subscriber that joins halfway through the message gets, right after
/// `caught_up`, a snapshot of the text so far, then the rest: no character
/// duplicated or missing. The subscriber that was there from the start
/// sees the same text.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscriber_joining_mid_message_gets_the_text_so_far_then_the_rest() {
    let h = Harness::with(Setup::default()).await;
    let first = Events::open_with(h.client(), "rejoin", true).await;
    h.start_session("rejoin", "SLOW 30 100").await;
    first
        .wait_deltas("eight ticks on the first stream", |d| {
            let text = joined(d.iter().map(|(_, d)| d));
            (text.matches("tick").count() >= 8).then_some(())
        })
        .await;

    let late = Events::open_with(h.client(), "rejoin", true).await;
    let (_, end) = late.turn_end_after(0).await;
    assert!(!end.is_error, "{end:?}");
    let events = late.snapshot();
    let (at, message_id, text) = text_content(&events);
    assert_eq!(text, ticks(30));

    let deltas = of_message(&late.deltas(), &message_id);
    let (before, snap) = deltas.first().expect("a snapshot").clone();
    assert!(
        snap.snapshot,
        "the first delta after caught_up is a snapshot: {snap:?}"
    );
    assert!(
        before >= late.caught_up_at(),
        "the snapshot follows caught_up"
    );
    assert!(
        snap.fragment.matches("tick").count() >= 8 && snap.fragment.len() < text.len(),
        "the snapshot is the text so far, mid-message: {:?}",
        snap.fragment
    );
    assert!(text.starts_with(&snap.fragment));
    assert!(
        deltas[1..].iter().all(|(_, d)| !d.snapshot),
        "one snapshot, then fragments: {deltas:?}"
    );
    assert!(deltas.iter().all(|(n, _)| *n <= at));
    assert_eq!(
        joined(deltas.iter().map(|(_, d)| d)),
        text,
        "snapshot + fragments = the final text"
    );

    let early = of_message(&first.deltas(), &message_id);
    assert_eq!(joined(early.iter().map(|(_, d)| d)), text);
    first.assert_contract();
    h.finish("rejoin", &late).await;
}

/// `--deltas off`: the CLI runs without `--include-partial-messages`, so a
/// stream that asks for deltas gets none, and the answer arrives whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_deltas_off_nothing_partial_is_streamed() {
    let setup = Setup {
        partial_messages: false,
        ..Setup::default()
    };
    let h = Harness::with(setup).await;
    let live = Events::open_with(h.client(), "quiet", true).await;
    h.start_session("quiet", "SLOW 5 50").await;
    live.turn_end_after(0).await;
    assert_eq!(texts(&live.snapshot()), ticks(5));
    assert!(live.deltas().is_empty(), "{:?}", live.deltas());
    h.finish("quiet", &live).await;
}
