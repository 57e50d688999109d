//! Message size (docs/api.md, "Message size"): no message the server sends exceeds
//! 4 MiB. An event over the per-event budget (1 MiB by default) is stored
//! whole and streamed cut down, marked `truncated` with its original size;
//! ReadFullEvent streams the whole CLI line (or event) back in chunks;
//! History pages are bounded by bytes. A real tonic server, the generated
//! client with gRPC's default 4 MiB receive limit, the scripted CLI with
//! injected lines shaped like the CLI's, and a real redb store.

use std::sync::Arc;

use crate::support::scripted::{ScriptedAdapter, ScriptedBehavior};
use crate::support::server;

use agent_harness_protocol::derive;
use agent_harness_protocol::pb;
use agent_harness_protocol::pb::event::Payload;
use agent_harness_protocol::pb::session_service_client::SessionServiceClient;
use agent_harness_server::ServeOptions;
use agent_harness_server::adapter::StdoutLine;
use agent_harness_server::store::{RedbStore, SessionMeta, Store};
use prost::Message;
use server::*;
use tonic::transport::Channel;

const MIB: usize = 1024 * 1024;
/// gRPC's default receive limit, the bound on every message.
const LIMIT: usize = 4 * MIB;

/// A 6 MB assistant answer, as the CLI writes it (one line).
fn huge_answer_line(session: &str) -> String {
    let text: String = (0..6_000_000u32)
        .map(|i| char::from(b'a' + (i % 26) as u8))
        .collect();
    serde_json::json!({
        "type": "assistant",
        "message": {"id": "msg_huge", "type": "message", "role": "assistant",
            "model": "claude-sonnet-4-5",
            "content": [{"type": "text", "text": text}],
            "stop_reason": null,
            "usage": {"input_tokens": 7, "output_tokens": 1_500_000,
                "cache_creation_input_tokens": 0, "cache_read_input_tokens": 11}},
        "parent_tool_use_id": null, "session_id": session, "uuid": "u-huge"
    })
    .to_string()
}

/// A Read of a 3 MB image: the tool_use, then its result (base64 twice:
/// the tool_result content and the CLI's `tool_use_result`).
fn huge_read_lines(session: &str) -> [String; 2] {
    let data = "iVBORw0KGgoAAAANSUhEUgAA".repeat(3_000_000 / 24);
    let call = serde_json::json!({
        "type": "assistant",
        "message": {"id": "msg_read", "type": "message", "role": "assistant",
            "model": "claude-sonnet-4-5",
            "content": [{"type": "tool_use", "id": "toolu_read", "name": "Read",
                "input": {"file_path": "/srv/demo/work/big.png"}}],
            "stop_reason": null,
            "usage": {"input_tokens": 3, "output_tokens": 9,
                "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}},
        "parent_tool_use_id": null, "session_id": session, "uuid": "u-read"
    });
    let result = serde_json::json!({
        "type": "user",
        "message": {"role": "user", "content": [{"type": "tool_result",
            "tool_use_id": "toolu_read",
            "content": [{"type": "text", "text": data.clone()}]}]},
        "parent_tool_use_id": null, "session_id": session, "uuid": "u-result",
        "tool_use_result": {"type": "image", "file": {"base64": data,
            "type": "image/png", "originalSize": 2_250_000}}
    });
    [call.to_string(), result.to_string()]
}

/// A server over a redb file (or PostgreSQL) whose scripted CLI writes, before the answer
/// of a turn whose text says HUGE, a Read of a 3 MB image and a 6 MB answer.
async fn huge_server(dir: &tempfile::TempDir) -> TestServer {
    let inject = |line: &StdoutLine| {
        let text = line_text(line);
        if text.contains("\"type\":\"assistant\"") && text.contains("HUGE") {
            let [call, result] = huge_read_lines("cli-1");
            vec![
                StdoutLine::Line(call),
                StdoutLine::Line(result),
                StdoutLine::Line(huge_answer_line("cli-1")),
            ]
        } else {
            vec![]
        }
    };
    // A real store, not memory: redb, or PostgreSQL when the suite runs on it.
    let store: Arc<dyn Store> = if crate::support::postgres::selected() {
        crate::support::server::test_store()
    } else {
        Arc::new(RedbStore::open(&dir.path().join("events.redb")).expect("redb"))
    };
    let adapter = ScriptedAdapter::new(ScriptedBehavior::default());
    let spawner = Arc::new(InjectingAdapter::new(adapter.clone(), inject));
    TestServer::with_adapter(
        store,
        spawner,
        adapter,
        fast_opts(),
        ServeOptions::default(),
    )
    .await
}

/// Reads a whole ReadFullEvent stream; checks the chunks on the way.
async fn read_full(
    c: &mut SessionServiceClient<Channel>,
    session: &str,
    seq: u64,
    part: pb::FullEventPart,
    chunk_size: u32,
) -> Result<Vec<u8>, tonic::Status> {
    let mut stream = c
        .read_full_event(pb::ReadFullEventRequest {
            session_id: session.into(),
            seq,
            part: part as i32,
            chunk_size,
        })
        .await?
        .into_inner();
    let mut out = Vec::new();
    let mut messages = 0;
    while let Some(m) = stream.message().await? {
        messages += 1;
        assert_eq!(m.offset, out.len() as u64, "chunks in order, no gap");
        assert!(m.chunk.len() <= MIB, "a chunk of {} bytes", m.chunk.len());
        let max = if chunk_size == 0 {
            MIB
        } else {
            chunk_size as usize
        };
        assert!(m.chunk.len() <= max);
        out.extend_from_slice(&m.chunk);
        assert!(out.len() as u64 <= m.total_size);
        if out.len() as u64 == m.total_size {
            // The last chunk: nothing may follow.
            assert!(
                stream.message().await?.is_none(),
                "nothing after the last chunk"
            );
            break;
        }
    }
    assert!(messages >= 1, "at least one message");
    Ok(out)
}

fn text_of(e: &pb::Event) -> String {
    match &e.payload {
        Some(Payload::Content(c)) => c.blocks.iter().map(|b| b.text.as_str()).collect(),
        _ => String::new(),
    }
}

#[tokio::test]
async fn a_6mb_answer_is_stored_whole_streamed_cut_down_and_read_back_in_chunks() {
    let dir = tempfile::tempdir().unwrap();
    let server = huge_server(&dir).await;
    let mut c = server.client().await;
    // The default client: gRPC's 4 MiB receive limit, as in every language.
    let (sub, _) = first_turn(&mut c, "big", "HUGE please").await;
    for m in &sub.messages {
        assert!(
            m.encoded_len() <= LIMIT,
            "a Subscribe message of {} bytes",
            m.encoded_len()
        );
    }
    assert_eq!(
        kinds(&sub.events),
        [
            "run_start",
            "input_sent",
            "run_ready",
            "content",
            "result",
            "content",
            "content",
            "turn_end"
        ]
    );
    let answer = huge_answer_line("cli-1");
    let [read_call, read_result] = huge_read_lines("cli-1");

    // Every event within the budget; the large ones marked with their sizes.
    for e in &sub.events {
        assert!(
            e.encoded_len() <= MIB,
            "seq {} is {} bytes",
            e.seq,
            e.encoded_len()
        );
    }
    let (call_ev, result_ev, answer_ev) = (&sub.events[3], &sub.events[4], &sub.events[5]);
    assert!(
        call_ev.truncated.is_none(),
        "a small event is streamed whole"
    );
    assert!(!call_ev.cli_line.is_empty() && call_ev.cli_line == read_call);
    let t = answer_ev
        .truncated
        .clone()
        .expect("the answer is marked truncated");
    assert!(
        t.original_size > 12_000_000,
        "payload + line: {}",
        t.original_size
    );
    assert_eq!(t.cli_line_size, answer.len() as u64);
    assert!(t.fields.contains(&"cli_line".to_owned()), "{t:?}");
    assert!(
        t.fields.contains(&"content.blocks[0].text".to_owned()),
        "{t:?}"
    );
    assert!(answer_ev.cli_line.is_empty());
    let text = text_of(answer_ev);
    assert!(
        text.starts_with("abcdefghijklmnopqrstuvwxyz"),
        "the head of the answer is kept"
    );
    assert!(
        text.ends_with("more bytes]"),
        "{}",
        &text[text.len() - 60..]
    );
    let t = result_ev
        .truncated
        .clone()
        .expect("the Read result is marked truncated");
    assert_eq!(t.cli_line_size, read_result.len() as u64);
    assert!(
        t.fields.contains(&"result.tool_use_result".to_owned()),
        "{t:?}"
    );
    let Some(Payload::Result(r)) = &result_ev.payload else {
        panic!("not a result: {result_ev:?}")
    };
    assert_eq!(
        r.tool_results[0].tool_use_id, "toolu_read",
        "ids are never cut"
    );

    // Stored whole: the redb file holds the original line, byte for byte.
    let stored = server
        .store
        .read_full("big", answer_ev.seq)
        .unwrap()
        .unwrap();
    assert_eq!(stored.cli_line, answer);
    assert!(stored.truncated.is_none());
    assert_eq!(text_of(&stored).len(), 6_000_000);
    assert_eq!(
        server
            .store
            .read_full("big", result_ev.seq)
            .unwrap()
            .unwrap()
            .cli_line,
        read_result
    );

    // ReadFullEvent: the line in chunks of at most 1 MiB, byte-identical.
    let line = read_full(
        &mut c,
        "big",
        answer_ev.seq,
        pb::FullEventPart::Unspecified,
        0,
    )
    .await;
    assert!(
        line.as_ref().unwrap() == answer.as_bytes(),
        "the line comes back whole"
    );
    let line = read_full(
        &mut c,
        "big",
        result_ev.seq,
        pb::FullEventPart::CliLine,
        100_000,
    )
    .await;
    assert!(line.unwrap() == read_result.as_bytes());
    // The whole event, protobuf and JSON.
    let bytes = read_full(&mut c, "big", answer_ev.seq, pb::FullEventPart::Event, 0).await;
    let whole = pb::Event::decode(bytes.unwrap().as_slice()).unwrap();
    assert_eq!(whole, stored);
    let json = read_full(
        &mut c,
        "big",
        answer_ev.seq,
        pb::FullEventPart::EventJson,
        0,
    )
    .await;
    let from_json: pb::Event = serde_json::from_slice(&json.unwrap()).unwrap();
    assert_eq!(from_json, stored);
    // A small event: its line, in one chunk; an event with no line: empty.
    let small = read_full(&mut c, "big", call_ev.seq, pb::FullEventPart::CliLine, 0).await;
    assert!(small.unwrap() == read_call.as_bytes());
    let none = read_full(&mut c, "big", 1, pb::FullEventPart::CliLine, 0).await;
    assert!(none.unwrap().is_empty());
    // NOT_FOUND for an unknown session or seq.
    let head = sub.events.last().unwrap().seq;
    for (session, seq) in [("nope", 1), ("big", 0), ("big", head + 1)] {
        let err = read_full(&mut c, session, seq, pb::FullEventPart::CliLine, 0)
            .await
            .unwrap_err();
        assert_eq!(
            err.code(),
            tonic::Code::NotFound,
            "{session} {seq}: {err:?}"
        );
    }

    // History: every page under 4 MiB, and it reads the session fine.
    let page = c
        .history(pb::HistoryRequest {
            session_id: "big".into(),
            before_seq: 0,
            limit: 1000,
        })
        .await
        .expect("History of a session with a 6 MB answer")
        .into_inner();
    assert!(page.encoded_len() <= LIMIT);
    let events = history_all(&mut c, "big").await;
    assert_eq!(events, sub.events, "History gives the streamed forms");

    // Derive over the cut events equals derive over the whole ones.
    let whole: Vec<pb::Event> = (1..=head)
        .map(|seq| server.store.read_full("big", seq).unwrap().unwrap())
        .collect();
    assert!(whole.iter().map(|e| e.encoded_len()).sum::<usize>() > 24_000_000);
    assert_eq!(derive::derive_all(&sub.events), derive::derive_all(&whole));
    assert_eq!(
        derive::session("big", &sub.events),
        derive::session("big", &whole)
    );
    let got = assert_derived_matches_log(&mut c, "big").await;
    assert_eq!(
        got.usage.unwrap().output_tokens,
        7,
        "usage comes from turn_end"
    );

    // A late subscriber replays from storage: the same cut forms.
    let mut late = Sub::open(&mut c, "big", 0).await;
    late.until("turn_end", is_turn_end).await;
    assert_eq!(late.events, sub.events);
    for m in &late.messages {
        assert!(m.encoded_len() <= LIMIT);
    }
    server.shutdown().await.unwrap();
}

/// A log written before events had a budget (or under a larger one): each
/// row is a 6 MB event. It is cut when read, History pages hold only what
/// fits in 4 MiB, and ReadFullEvent still returns the whole line.
#[tokio::test]
async fn oversized_stored_rows_are_cut_when_read_and_history_pages_are_bounded_by_bytes() {
    let store = crate::support::server::test_store();
    let rows: Vec<pb::Event> = (1..=10u64)
        .map(|seq| {
            let text = format!("{seq:02}").repeat(1_500_000);
            pb::Event {
                seq,
                session_id: "old".into(),
                run_id: "run-1".into(),
                cli_line: format!("{{\"type\":\"assistant\",\"text\":\"{text}\"}}"),
                payload: Some(Payload::Content(pb::Content {
                    message_id: format!("msg_{seq}"),
                    blocks: vec![pb::ContentBlock {
                        r#type: "text".into(),
                        text,
                        ..Default::default()
                    }],
                    ..Default::default()
                })),
                ..Default::default()
            }
        })
        .collect();
    store
        .append_batch(&rows, &[SessionMeta::new("old", 1)])
        .unwrap();
    let server = TestServer::on_store(store).await;
    let mut c = server.client().await;

    let page = c
        .history(pb::HistoryRequest {
            session_id: "old".into(),
            before_seq: 0,
            limit: 1000,
        })
        .await
        .expect("History of 60 MB of stored events")
        .into_inner();
    assert!(page.encoded_len() <= LIMIT, "{} bytes", page.encoded_len());
    let seqs: Vec<u64> = page.events.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, [8, 9, 10], "the newest events that fit in 4 MiB");
    assert!(page.has_more);
    for (e, row) in page.events.iter().zip(&rows[7..]) {
        let t = e.truncated.as_ref().expect("cut on read");
        assert_eq!(t.original_size, row.encoded_len() as u64);
        assert_eq!(t.cli_line_size, row.cli_line.len() as u64);
        assert!(e.encoded_len() <= MIB);
    }
    // Paging on reaches every event; a page of one still works.
    let all = history_all(&mut c, "old").await;
    assert_eq!(
        all.iter().map(|e| e.seq).collect::<Vec<_>>(),
        (1..=10).collect::<Vec<_>>()
    );
    let one = c
        .history(pb::HistoryRequest {
            session_id: "old".into(),
            before_seq: 5,
            limit: 1,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(one.events.len(), 1);
    assert_eq!(one.events[0].seq, 4);

    // Subscribe replays them cut down too.
    let mut sub = Sub::open(&mut c, "old", 0).await;
    sub.until("seq 10", |e| e.seq == 10).await;
    assert!(sub.messages.iter().all(|m| m.encoded_len() <= LIMIT));
    assert!(sub.events.iter().all(|e| e.truncated.is_some()));

    // And the whole line is still there.
    let line = read_full(&mut c, "old", 3, pb::FullEventPart::CliLine, 0).await;
    assert!(line.unwrap() == rows[2].cli_line.as_bytes());
    server.shutdown().await.unwrap();
}
