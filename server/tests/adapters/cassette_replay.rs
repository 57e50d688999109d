//! Replays every committed cassette (recorded from the real CLI 2.1.197)
//! through CassetteAdapter + Normalizer, and tests the replay mechanics.

use crate::support::cassette;
use crate::support::common;
use crate::support::expected;

use std::time::{Duration, Instant};

use agent_harness_protocol::pb;
use agent_harness_server::adapter::cassette::{Cassette, CassetteAdapter};
use agent_harness_server::adapter::{ProcessAdapter, Signal, SpawnConfig, StdoutLine, UserInput};
use cassette::{replay_checked, scenarios};
use common::{CLI_VERSION, CODEX_VERSION, cassettes_dir, file_stems};

fn cfg() -> SpawnConfig {
    SpawnConfig {
        session_id: "s".into(),
        run_id: "r".into(),
        config: pb::StartConfig::default(),
        ..Default::default()
    }
}

#[tokio::test]
async fn every_committed_cassette_replays_to_its_pinned_events() {
    let files = file_stems(&cassettes_dir(), ".cassette.jsonl");
    let mut recipes: Vec<String> = scenarios().iter().map(|s| s.name.to_string()).collect();
    recipes.sort();
    assert_eq!(
        files, recipes,
        "every cassette needs a scenario and vice versa"
    );
    let pinned: Vec<String> = expected::table().cassettes.into_keys().collect();
    assert_eq!(
        files, pinned,
        "every cassette needs its row in cassettes/expected.json and vice versa"
    );
    assert!(files.len() >= 8);
    for s in scenarios() {
        let want = s.expected();
        let path = cassettes_dir().join(format!("{}.cassette.jsonl", s.name));
        let (kinds, exit) = replay_checked(&path).await;
        assert_eq!(kinds, want.events, "{}", s.name);
        assert_eq!(exit.code, want.exit_code, "{}", s.name);
        let c = Cassette::parse(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let version = match s.agent {
            "codex" => CODEX_VERSION,
            _ => CLI_VERSION,
        };
        assert_eq!(c.header.cli_version, version, "{}", s.name);
        assert_eq!(c.header.agent, s.agent, "{}", s.name);
        assert_eq!(c.header.adapter, want.adapter);
        // Text round trip is lossless.
        assert_eq!(Cassette::parse(&c.to_jsonl()).unwrap(), c);
    }
}

const TINY: &str = r#"{"type":"header","cli_version":"9.9.9","argv":["-p"],"date":"2026-01-01T00:00:00Z","adapter":"interactive"}
{"t":0,"dir":"in","kind":"initial","line":"{}"}
{"t":100,"dir":"out","line":"{\"type\":\"a\"}"}
{"t":200,"dir":"in","kind":"user","line":"{}"}
{"t":300,"dir":"out","line":"{\"type\":\"b\"}","too_long":99}
{"t":400,"dir":"in","kind":"close","line":""}
{"t":500,"dir":"exit","code":3,"signal":null,"stderr_tail":"bye"}
"#;

#[tokio::test]
async fn replay_waits_at_markers_and_ends_with_the_recorded_exit() {
    let a = CassetteAdapter::from_str(TINY, 0.0).unwrap();
    let mut h = a.spawn(cfg()).await.unwrap();
    assert!(h.control.keep_alive());
    assert_eq!(
        h.stdout.recv().await,
        Some(StdoutLine::Line(r#"{"type":"a"}"#.into()))
    );
    // Paused at the "user" marker.
    assert!(
        tokio::time::timeout(Duration::from_millis(200), h.stdout.recv())
            .await
            .is_err()
    );
    h.control.write(&UserInput::default()).unwrap();
    assert_eq!(
        h.stdout.recv().await,
        Some(StdoutLine::TooLong {
            head: r#"{"type":"b"}"#.into(),
            len: 99
        })
    );
    // Paused at "close"; a write satisfies nothing after stdin closes.
    assert!(
        tokio::time::timeout(Duration::from_millis(200), h.stdout.recv())
            .await
            .is_err()
    );
    assert!(h.control.alive());
    h.control.close_stdin();
    assert!(h.control.write(&UserInput::default()).is_err());
    assert_eq!(h.stdout.recv().await, None);
    let exit = h.exited.await.unwrap();
    assert_eq!(exit.code, Some(3));
    assert_eq!(exit.stderr_tail, "bye");
}

#[tokio::test]
async fn an_unrecorded_signal_ends_the_replay_like_a_process() {
    let a = CassetteAdapter::from_str(TINY, 0.0).unwrap();
    let mut h = a.spawn(cfg()).await.unwrap();
    h.stdout.recv().await.unwrap();
    h.control.signal(Signal::Kill).unwrap();
    assert_eq!(h.stdout.recv().await, None);
    let exit = h.exited.await.unwrap();
    assert_eq!(exit.signal.as_deref(), Some("SIGKILL"));
    assert!(!h.control.alive());
    assert!(h.control.signal(Signal::Kill).is_err());
}

#[tokio::test]
async fn timescale_scales_the_recorded_gaps() {
    let text = r#"{"type":"header","cli_version":"x","argv":[],"date":"","adapter":"cli"}
{"t":0,"dir":"out","line":"1"}
{"t":400,"dir":"out","line":"2"}
{"t":400,"dir":"exit","code":0}
"#;
    let start = Instant::now();
    let a = CassetteAdapter::from_str(text, 0.5).unwrap();
    let mut h = a.spawn(cfg()).await.unwrap();
    assert!(!h.control.keep_alive());
    while h.stdout.recv().await.is_some() {}
    let took = start.elapsed();
    assert!(
        took >= Duration::from_millis(190) && took < Duration::from_millis(390),
        "{took:?}"
    );
}

#[test]
fn malformed_cassettes_are_errors_not_panics() {
    for bad in [
        "",
        "not json",
        r#"{"type":"nope"}"#,
        "{\"type\":\"header\"}\n{\"dir\":\"out\"}",
        "{\"type\":\"header\"}\n{\"t\":1,\"dir\":\"sideways\"}",
        "{\"type\":\"header\"}\n[1]",
    ] {
        assert!(CassetteAdapter::from_str(bad, 0.0).is_err(), "{bad:?}");
    }
    assert!(CassetteAdapter::from_file("/nonexistent.cassette.jsonl", 0.0).is_err());
}

/// The claude cassettes are recorded with `--include-partial-messages`
/// (live typing, on by default; Codex always streams its deltas):
/// replaying each through its agent's decoder, the
/// fragments of every streamed block join to exactly what its `content`
/// event stores (text, thinking, or the tool input's JSON), and no
/// `stream_event` line becomes an event.
#[test]
fn every_committed_cassette_streams_deltas_that_join_to_its_content() {
    use agent_harness_protocol::pb::event::Payload;
    use agent_harness_server::adapter::DecoderSetup;
    use agent_harness_server::adapter::cassette::CassetteRecord;
    use agent_harness_server::partial::Change;
    use std::collections::HashMap;

    let mut streamed_blocks = 0;
    let mut streamed_tools = 0;
    for s in scenarios() {
        let path = cassettes_dir().join(format!("{}.cassette.jsonl", s.name));
        let adapter = CassetteAdapter::from_file(&path, 0.0).unwrap();
        let c = adapter.cassette().clone();
        let flag = c
            .header
            .argv
            .iter()
            .any(|a| a == "--include-partial-messages");
        assert!(
            flag || s.agent == "codex",
            "{} was recorded without partial messages",
            s.name
        );
        let mut norm = adapter.decoder(
            &cfg(),
            DecoderSetup {
                max_line_bytes: agent_harness_server::supervise::DEFAULT_MAX_LINE_BYTES,
                max_partial_bytes: agent_harness_server::partial::DEFAULT_MAX_PARTIAL_BYTES,
                ..DecoderSetup::default()
            },
        );
        let mut partial: HashMap<(String, u32), String> = HashMap::new();
        for r in &c.records {
            let CassetteRecord::Out { line, .. } = r else {
                continue;
            };
            let payloads = norm.line(line);
            let StdoutLine::Line(text) = line else {
                continue;
            };
            if text.contains("\"type\":\"stream_event\"") {
                assert!(
                    payloads.is_empty(),
                    "{}: a stream_event became {payloads:?}",
                    s.name
                );
            }
            let content = payloads.iter().find_map(|(p, _)| match p {
                Payload::Content(c) => Some(c.clone()),
                _ => None,
            });
            for change in norm.take_partial() {
                match change {
                    Change::Started {
                        message_id, index, ..
                    } => {
                        partial.insert((message_id.to_string(), index), String::new());
                    }
                    Change::Fragment {
                        message_id,
                        index,
                        fragment,
                    } => partial
                        .get_mut(&(message_id.to_string(), index))
                        .expect("a fragment of a started block")
                        .push_str(&fragment),
                    Change::Done {
                        message_id,
                        index: Some(index),
                    } => {
                        let content = content.as_ref().expect("a block is done at its content");
                        assert_eq!(content.message_id, *message_id);
                        let Some(joined) = partial.remove(&(message_id.to_string(), index)) else {
                            continue;
                        };
                        let block = &content.blocks[0];
                        match block.r#type.as_str() {
                            "text" => assert_eq!(joined, block.text, "{}", s.name),
                            "thinking" => assert_eq!(joined, block.thinking, "{}", s.name),
                            "tool_use" => {
                                let streamed: serde_json::Value =
                                    serde_json::from_str(&joined).unwrap();
                                let stored = serde_json::to_value(&block.input).unwrap();
                                assert_eq!(streamed, stored, "{}", s.name);
                                streamed_tools += 1;
                            }
                            other => panic!("{}: a streamed {other} block", s.name),
                        }
                        streamed_blocks += 1;
                    }
                    Change::Done { .. } | Change::Cleared => {}
                }
            }
        }
    }
    assert!(
        streamed_blocks >= 10 && streamed_tools >= 2,
        "the cassettes stream text and tool input: {streamed_blocks} blocks, {streamed_tools} tool inputs"
    );
}
