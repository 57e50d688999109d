//! The decoder on what codex-cli 0.169.0 wrote (the recorded transcripts in
//! `cassettes/codex`, see its README) and on hand-made lines for what those
//! runs do not show. Ids and token counts are read from the transcripts, so
//! a re-recording keeps these passing.

use agent_harness_protocol::pb;
use agent_harness_protocol::pb::event::Payload;
use agent_harness_protocol::vocab::{resolved_by, run_error_kind};
use serde_json::{Value, json};

use super::CodexDecoder;
use crate::adapter::{Decoder, DecoderSetup, StdoutLine};
use crate::partial::{BlockKind, Change};

fn setup(max_line_bytes: usize, pid: Option<u32>, resume_id: &str) -> DecoderSetup {
    DecoderSetup {
        max_line_bytes,
        max_partial_bytes: 1 << 20,
        pid,
        resume_id: resume_id.into(),
    }
}

fn decoder() -> CodexDecoder {
    CodexDecoder::new(&setup(1 << 20, Some(4242), ""))
}

/// A recorded transcript: (`in` or `out`, the line).
fn transcript(name: &str) -> Vec<(bool, String)> {
    let path = format!(
        "{}/../cassettes/codex/{name}.jsonl",
        env!("CARGO_MANIFEST_DIR")
    );
    let raw = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    raw.lines()
        .map(|l| {
            let rec: Value = serde_json::from_str(l).unwrap();
            (
                rec["dir"] == "out",
                rec["line"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

/// The `out` lines of a transcript, parsed.
fn out_messages(name: &str) -> Vec<Value> {
    transcript(name)
        .into_iter()
        .filter(|(out, _)| *out)
        .map(|(_, l)| serde_json::from_str(&l).unwrap())
        .collect()
}

/// Feeds a transcript's `out` lines, telling the decoder of the harness's
/// input where the transcript wrote a `turn/start`; returns the payloads
/// and the live-typing changes.
fn replay(d: &mut CodexDecoder, name: &str) -> (Vec<Payload>, Vec<Change>) {
    let mut payloads = Vec::new();
    let mut changes = Vec::new();
    for (out, line) in transcript(name) {
        if !out {
            if line.contains("\"turn/start\"") {
                d.input_sent();
            }
            continue;
        }
        for (p, cli_line) in d.line(&StdoutLine::Line(line.clone())) {
            assert_eq!(cli_line, line, "every event keeps its raw line");
            payloads.push(p);
        }
        changes.extend(d.take_partial());
    }
    (payloads, changes)
}

fn feed(d: &mut CodexDecoder, line: Value) -> Vec<Payload> {
    d.line(&StdoutLine::Line(line.to_string()))
        .into_iter()
        .map(|(p, _)| p)
        .collect()
}

/// A short name per payload, to compare sequences.
fn kinds(payloads: &[Payload]) -> Vec<&'static str> {
    payloads
        .iter()
        .map(|p| match p {
            Payload::RunReady(_) => "run_ready",
            Payload::TurnStart(_) => "turn_start",
            Payload::Content(c) => match c.blocks.first().map(|b| b.r#type.as_str()) {
                Some("text") => "text",
                Some("thinking") => "thinking",
                Some("tool_use") => "tool_use",
                _ => "content",
            },
            Payload::Result(_) => "result",
            Payload::TurnEnd(t) if t.compact => "compact",
            Payload::TurnEnd(_) => "turn_end",
            Payload::PermissionRequested(_) => "permission_requested",
            Payload::PermissionResolved(_) => "permission_resolved",
            Payload::RunError(_) => "run_error",
            _ => "other",
        })
        .collect()
}

fn turn_ends(payloads: &[Payload]) -> Vec<&pb::TurnEnd> {
    payloads
        .iter()
        .filter_map(|p| match p {
            Payload::TurnEnd(t) => Some(t),
            _ => None,
        })
        .collect()
}

fn content(p: &Payload) -> &pb::Content {
    match p {
        Payload::Content(c) => c,
        other => panic!("not content: {other:?}"),
    }
}

fn result(p: &Payload) -> &pb::Result {
    match p {
        Payload::Result(r) => r,
        other => panic!("not a result: {other:?}"),
    }
}

/// The fragments of the live-typing changes, joined.
fn typed(changes: &[Change]) -> String {
    changes
        .iter()
        .filter_map(|c| match c {
            Change::Fragment { fragment, .. } => Some(fragment.as_str()),
            _ => None,
        })
        .collect()
}

/// Each turn's usage as the transcript reports it: the sum of its model
/// calls' `last` tokens, cached input apart.
fn recorded_usage(name: &str) -> Vec<pb::Usage> {
    let mut turns = Vec::new();
    let mut cur: Option<pb::Usage> = None;
    for m in out_messages(name) {
        match m["method"].as_str() {
            Some("turn/started") => cur = Some(pb::Usage::default()),
            Some("thread/tokenUsage/updated") => {
                let last = &m["params"]["tokenUsage"]["last"];
                let n = |k: &str| last[k].as_u64().unwrap();
                // A resumed thread reports its earlier usage before any turn.
                let Some(u) = cur.as_mut() else { continue };
                u.input_tokens += n("inputTokens") - n("cachedInputTokens");
                u.cache_read_input_tokens += n("cachedInputTokens");
                u.output_tokens += n("outputTokens");
            }
            Some("turn/completed") => turns.push(cur.take().unwrap()),
            _ => {}
        }
    }
    turns
}

/// The answer to the harness's request with this id.
fn answer(name: &str, id: u64) -> Value {
    out_messages(name)
        .into_iter()
        .find(|m| m["id"] == id && m.get("method").is_none())
        .unwrap()
}

#[test]
fn every_recording_maps_to_its_events() {
    let cases: &[(&str, &[&str])] = &[
        ("first_turn", &["run_ready", "text", "turn_end"]),
        (
            "follow_up",
            &["run_ready", "text", "turn_end", "text", "turn_end"],
        ),
        (
            "approval_accepted",
            &[
                "run_ready",
                "tool_use",
                "permission_requested",
                "permission_resolved",
                "result",
                "text",
                "turn_end",
            ],
        ),
        (
            "approval_declined",
            &[
                "run_ready",
                "tool_use",
                "permission_requested",
                "permission_resolved",
                "result",
                "text",
                "turn_end",
            ],
        ),
        (
            "interrupt",
            &["run_ready", "text", "turn_end", "text", "turn_end"],
        ),
        ("resume", &["run_ready", "text", "turn_end"]),
        ("resume.2", &["run_ready", "text", "turn_end"]),
        ("thinking", &["run_ready", "thinking", "text", "turn_end"]),
        ("api_error", &["run_ready", "turn_end", "text", "turn_end"]),
        // The tool Codex never completes is closed before the turn ends;
        // the approval Codex settles after the turn is withdrawn.
        (
            "interrupt_pending_approval",
            &[
                "run_ready",
                "tool_use",
                "permission_requested",
                "result",
                "turn_end",
                "permission_resolved",
                "text",
                "turn_end",
            ],
        ),
        (
            "interrupt_running_command",
            &[
                "run_ready",
                "tool_use",
                "permission_requested",
                "permission_resolved",
                "result",
                "turn_end",
                "text",
                "turn_end",
            ],
        ),
        ("lost_rollout", &["run_ready", "text", "turn_end"]),
        ("lost_rollout.2", &["run_error"]),
    ];
    for (name, expect) in cases {
        let mut d = decoder();
        let (payloads, _) = replay(&mut d, name);
        assert_eq!(kinds(&payloads), *expect, "{name}");
        // Usage: each turn's own calls, none for a turn without any.
        let recorded = recorded_usage(name);
        let ends = turn_ends(&payloads);
        assert_eq!(ends.len(), recorded.len(), "{name}");
        for (end, usage) in ends.iter().zip(recorded) {
            let want = (usage != pb::Usage::default()).then_some(usage);
            assert_eq!(end.usage, want, "{name}");
        }
    }
}

#[test]
fn first_turn() {
    let mut d = decoder();
    d.input_sent();
    let (payloads, changes) = replay(&mut d, "first_turn");
    let started = answer("first_turn", 2);
    let Payload::RunReady(r) = &payloads[0] else {
        panic!("{payloads:?}")
    };
    assert_eq!(
        r.resume_id,
        started["result"]["thread"]["id"].as_str().unwrap()
    );
    assert_eq!(r.model, started["result"]["model"].as_str().unwrap());
    assert_eq!(r.cwd, started["result"]["cwd"].as_str().unwrap());
    assert_eq!((r.cli_version.as_str(), r.pid), ("0.169.0", 4242));
    assert!(r.permission_mode.is_empty());
    let c = content(&payloads[1]);
    assert_eq!(c.blocks[0].text, "hello from codex");
    assert!(c.message_id.starts_with("msg_"));
    assert_eq!(c.model, r.model);
    let t = turn_ends(&payloads)[0];
    assert_eq!((t.subtype.as_str(), t.is_error), ("success", false));
    assert_eq!(
        (t.terminal_reason.as_str(), t.result.as_str()),
        ("completed", "hello from codex")
    );
    assert_eq!(t.model_usage[0].context_window, 258400);
    assert_eq!(t.model_usage[0].model, r.model);
    // Live typing: the deltas join to exactly the content's text, and the
    // block is done with its content.
    assert_eq!(typed(&changes), "hello from codex");
    assert!(matches!(
        changes.first(),
        Some(Change::Started {
            index: 0,
            kind: BlockKind::Text,
            ..
        })
    ));
    assert!(changes.contains(&Change::Done {
        message_id: c.message_id.as_str().into(),
        index: Some(0)
    }));
}

#[test]
fn a_turn_nobody_sent_is_a_turn_start() {
    let mut d = decoder();
    d.input_sent();
    replay(&mut d, "first_turn");
    // The same turn again without input: Codex began it by itself.
    let started = transcript("first_turn")
        .into_iter()
        .find(|(out, l)| *out && l.contains("\"turn/started\""))
        .unwrap()
        .1;
    let out = d.line(&StdoutLine::Line(started));
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].0, Payload::TurnStart(pb::TurnStart::default()));
}

#[test]
fn command_approved() {
    let mut d = decoder();
    let (payloads, _) = replay(&mut d, "approval_accepted");
    let b = &content(&payloads[1]).blocks[0];
    assert_eq!(b.tool_name, "Bash");
    assert!(b.tool_use_id.starts_with("call_"));
    let input = serde_json::to_value(b.input.as_ref().unwrap()).unwrap();
    assert_eq!(
        input["command"],
        "/bin/bash -lc 'touch approved.txt && echo made-it'"
    );
    assert!(input["cwd"].as_str().is_some_and(|c| !c.is_empty()));
    let Payload::PermissionRequested(p) = &payloads[2] else {
        unreachable!()
    };
    assert_eq!(p.request_id, "0", "Codex's own id as JSON text");
    assert_eq!(
        (p.tool_name.as_str(), &p.tool_use_id),
        ("Bash", &b.tool_use_id)
    );
    assert_eq!(p.input, b.input);
    // Codex's word that the request is settled: a withdrawal the run task
    // keeps only if the log still has it pending (here the harness's own
    // answer resolved it first).
    let Payload::PermissionResolved(r) = &payloads[3] else {
        unreachable!()
    };
    assert_eq!(
        (r.request_id.as_str(), r.by.as_str()),
        ("0", resolved_by::CANCELLED)
    );
    let res = result(&payloads[4]);
    assert_eq!(res.tool_results[0].tool_use_id, b.tool_use_id);
    assert_eq!(res.tool_results[0].text, "made-it\n");
    assert!(!res.is_error);
    let kept = res.tool_use_result.as_ref().unwrap();
    assert_eq!(serde_json::to_value(kept).unwrap()["exitCode"], 0.0);
}

#[test]
fn command_declined() {
    let mut d = decoder();
    let (payloads, _) = replay(&mut d, "approval_declined");
    let res = result(&payloads[4]);
    assert!(res.is_error && res.tool_results[0].is_error);
    assert_eq!(res.tool_results[0].text, "The command was declined.");
}

#[test]
fn interrupt_keeps_the_text_so_far() {
    let mut d = decoder();
    let (payloads, changes) = replay(&mut d, "interrupt");
    let text = &content(&payloads[1]).blocks[0].text;
    assert_eq!(text, "tick 0 tick 1 ");
    let t = turn_ends(&payloads)[0];
    assert_eq!((t.subtype.as_str(), t.is_error), ("interrupted", true));
    assert_eq!(t.terminal_reason, "interrupted");
    assert!(t.model_usage.is_empty(), "no model call finished");
    // What the deltas showed is what the content keeps, and the turn's end
    // clears the board.
    let cleared = changes.iter().position(|c| *c == Change::Cleared).unwrap();
    assert_eq!(&typed(&changes[..cleared]), text);
}

#[test]
fn interrupted_tools_get_an_error_result() {
    for name in ["interrupt_pending_approval", "interrupt_running_command"] {
        let mut d = decoder();
        let (payloads, _) = replay(&mut d, name);
        let tool = &content(&payloads[1]).blocks[0].tool_use_id;
        let res = payloads.iter().find_map(|p| match p {
            Payload::Result(r) => Some(r),
            _ => None,
        });
        let r = &res.unwrap().tool_results[0];
        assert_eq!(
            (&r.tool_use_id, r.text.as_str(), r.is_error),
            (tool, "interrupted", true)
        );
        assert_eq!(turn_ends(&payloads)[0].subtype, "interrupted");
    }
}

#[test]
fn reasoning_is_thinking_typed_live() {
    let mut d = decoder();
    let (payloads, changes) = replay(&mut d, "thinking");
    let thinking = &content(&payloads[1]).blocks[0].thinking;
    assert_eq!(
        thinking,
        "The user wants me to think first. I will answer: pondered"
    );
    assert!(matches!(
        changes.first(),
        Some(Change::Started {
            kind: BlockKind::Thinking,
            ..
        })
    ));
    let text_starts = changes
        .iter()
        .position(|c| {
            matches!(
                c,
                Change::Started {
                    kind: BlockKind::Text,
                    ..
                }
            )
        })
        .unwrap();
    assert_eq!(&typed(&changes[..text_starts]), thinking);
    // Summary parts are joined with a blank line, live as in the content.
    let mut d = decoder();
    let item = json!({"type": "reasoning", "id": "r", "summary": [], "content": []});
    feed(
        &mut d,
        json!({"method": "item/started", "params": {"item": item}}),
    );
    for (i, t) in [(0, "Plan"), (1, "Act")] {
        feed(
            &mut d,
            json!({"method": "item/reasoning/summaryTextDelta", "params": {"itemId": "r", "delta": t, "summaryIndex": i}}),
        );
    }
    let out = feed(
        &mut d,
        json!({"method": "item/completed", "params": {"item": {"type": "reasoning", "id": "r", "summary": ["Plan", "Act"], "content": []}}}),
    );
    assert_eq!(content(&out[0]).blocks[0].thinking, "Plan\n\nAct");
    assert_eq!(typed(&d.take_partial()), "Plan\n\nAct");
    // Reasoning the model keeps to itself is no event.
    let hidden = json!({"method": "item/completed", "params": {"item": {"type": "reasoning", "id": "r2", "summary": [], "content": []}}});
    assert!(feed(&mut d, hidden).is_empty());
}

#[test]
fn failed_turn_reports_codex_message() {
    let mut d = decoder();
    let (payloads, _) = replay(&mut d, "api_error");
    let t = turn_ends(&payloads)[0];
    assert_eq!((t.subtype.as_str(), t.is_error), ("error", true));
    assert_eq!(t.terminal_reason, "failed");
    let error = out_messages("api_error")
        .into_iter()
        .find(|m| m["method"] == "error")
        .unwrap();
    assert_eq!(
        t.errors,
        [error["params"]["error"]["message"].as_str().unwrap()]
    );
}

#[test]
fn lost_rollout_is_resume_failed() {
    let thread = answer("lost_rollout", 2)["result"]["thread"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    for resume_id in [thread.as_str(), ""] {
        let mut d = CodexDecoder::new(&setup(1 << 20, None, resume_id));
        let (payloads, _) = replay(&mut d, "lost_rollout.2");
        let [Payload::RunError(e)] = payloads.as_slice() else {
            panic!("{payloads:?}")
        };
        assert_eq!(e.kind, run_error_kind::RESUME_FAILED);
        assert_eq!(
            e.resume_id, thread,
            "named by the setup or by Codex's message"
        );
        assert!(e.message.starts_with("no rollout found"));
    }
}

#[test]
fn other_error_answers_are_cli_errors() {
    let mut d = decoder();
    let out = feed(
        &mut d,
        json!({"id": 7, "error": {"code": -32602, "message": "unknown model"}}),
    );
    let [Payload::RunError(e)] = out.as_slice() else {
        panic!("{out:?}")
    };
    assert_eq!(e.kind, "cli_error");
    assert!(e.message.contains("unknown model"), "{}", e.message);
    // Answers with results other than a thread's are the process side's.
    assert!(feed(&mut d, json!({"id": 8, "result": {}})).is_empty());
}

#[test]
fn unreadable_lines_are_reported_as_for_claude() {
    let mut d = CodexDecoder::new(&setup(64, None, ""));
    let bad = d.line(&StdoutLine::Line("not json".into()));
    let too_long = d.line(&StdoutLine::Line(format!(
        "{{\"method\":\"{}\"}}",
        "x".repeat(100)
    )));
    let cut = d.line(&StdoutLine::TooLong {
        head: "{\"method\":".into(),
        len: 5000,
    });
    let neither = d.line(&StdoutLine::Line("{\"params\":{}}".into()));
    for (out, kind) in [
        (&bad, run_error_kind::BAD_LINE),
        (&too_long, run_error_kind::LINE_TOO_LARGE),
        (&cut, run_error_kind::LINE_TOO_LARGE),
        (&neither, run_error_kind::BAD_LINE),
    ] {
        let [(Payload::RunError(e), _)] = out.as_slice() else {
            panic!("{out:?}")
        };
        assert_eq!(e.kind, kind, "{}", e.message);
    }
    assert!(d.line(&StdoutLine::Line("  ".into())).is_empty());
}

#[test]
fn file_change_and_mcp_tools_classify_as_edit_and_mcp() {
    use agent_harness_protocol::derive::classify::{ToolKind, classify_tool};
    let mut d = decoder();
    d.input_sent();
    feed(
        &mut d,
        json!({"method": "turn/started", "params": {"threadId": "t", "turn": {"id": "u"}}}),
    );
    let change = json!({"type": "fileChange", "id": "fc1", "status": "inProgress",
        "changes": [{"path": "/w/a.txt", "kind": {"type": "add"}, "diff": "+hi\n"}]});
    let out = feed(
        &mut d,
        json!({"method": "item/started", "params": {"item": change}}),
    );
    let b = &content(&out[0]).blocks[0];
    assert_eq!(
        classify_tool(&b.tool_name, b.input.as_ref()),
        ToolKind::Edit
    );
    let input = serde_json::to_value(b.input.as_ref().unwrap()).unwrap();
    assert_eq!(input["file_path"], "/w/a.txt");
    // Its approval names the same tool and input.
    let out = feed(
        &mut d,
        json!({"method": "item/fileChange/requestApproval", "id": "r-1",
               "params": {"itemId": "fc1", "reason": "outside the workspace", "grantRoot": "/w"}}),
    );
    let Payload::PermissionRequested(p) = &out[0] else {
        panic!("{out:?}")
    };
    assert_eq!(p.request_id, "\"r-1\"", "a string id keeps its quotes");
    assert_eq!(
        (p.tool_name.as_str(), p.input.as_ref()),
        ("Edit", b.input.as_ref())
    );
    assert_eq!(p.decision_reason, "outside the workspace");
    assert_eq!(p.blocked_path, "/w");
    let mut done = change.clone();
    done["status"] = json!("completed");
    let out = feed(
        &mut d,
        json!({"method": "item/completed", "params": {"item": done}}),
    );
    assert_eq!(result(&out[0]).tool_results[0].text, "/w/a.txt\n+hi\n");

    let call = json!({"type": "mcpToolCall", "id": "m1", "server": "docs", "tool": "search",
        "status": "inProgress", "arguments": {"q": "x"}});
    let out = feed(
        &mut d,
        json!({"method": "item/started", "params": {"item": call}}),
    );
    let b = &content(&out[0]).blocks[0];
    assert_eq!(b.tool_name, "mcp__docs__search");
    assert_eq!(classify_tool(&b.tool_name, b.input.as_ref()), ToolKind::Mcp);
    let mut failed = call.clone();
    failed["status"] = json!("failed");
    failed["error"] = json!({"message": "server gone"});
    let out = feed(
        &mut d,
        json!({"method": "item/completed", "params": {"item": failed}}),
    );
    let r = &result(&out[0]).tool_results[0];
    assert_eq!((r.text.as_str(), r.is_error), ("server gone", true));
}

#[test]
fn a_sub_agent_thread_is_not_the_run() {
    let mut d = decoder();
    let (first, _) = replay(&mut d, "first_turn");
    let Payload::RunReady(r) = &first[0] else {
        panic!("{first:?}")
    };
    let child = json!({"method": "thread/started", "params": {"thread": {"id": "child", "parentThreadId": r.resume_id, "model": "m", "cwd": "/"}}});
    assert!(feed(&mut d, child).is_empty());
    let other = json!({"method": "item/started", "params": {"threadId": "child", "item": {"type": "commandExecution", "id": "x", "command": "ls", "cwd": "/"}}});
    assert!(feed(&mut d, other).is_empty());
}

/// What the derive vectors of Codex logs are built from
/// (`tests/vectors/codex/*.json`, read by `tests/vectors/build_vectors.py`):
/// this decoder's payloads for recorded transcripts, in canonical proto3
/// JSON. Checked here, so a vector's Codex events are what a Codex run
/// gives; `AGENT_HARNESS_WRITE_CODEX_PAYLOADS=1` rewrites them.
#[test]
fn vector_payloads_are_what_the_decoder_makes() {
    let dir = format!("{}/../tests/vectors/codex", env!("CARGO_MANIFEST_DIR"));
    let write = std::env::var_os("AGENT_HARNESS_WRITE_CODEX_PAYLOADS").is_some();
    for name in [
        "first_turn",
        "approval_accepted",
        "approval_declined",
        "interrupt",
        "interrupt_pending_approval",
        "api_error",
        "thinking",
        "lost_rollout",
        "lost_rollout.2",
    ] {
        let resume_id = if name == "lost_rollout.2" {
            answer("lost_rollout", 2)["result"]["thread"]["id"]
                .as_str()
                .unwrap()
                .to_owned()
        } else {
            String::new()
        };
        let mut d = CodexDecoder::new(&setup(1 << 20, Some(4242), &resume_id));
        let (payloads, _) = replay(&mut d, name);
        let payloads: Vec<Value> = payloads
            .into_iter()
            .map(|p| {
                let event = pb::Event {
                    payload: Some(p),
                    ..Default::default()
                };
                serde_json::to_value(&event).unwrap()
            })
            .collect();
        let doc =
            json!({"cassette": format!("cassettes/codex/{name}.jsonl"), "payloads": payloads});
        let path = format!("{dir}/{name}.json");
        if write {
            std::fs::create_dir_all(&dir).unwrap();
            let text = serde_json::to_string_pretty(&doc).unwrap();
            std::fs::write(&path, text + "\n").unwrap();
            continue;
        }
        let stored: Value = serde_json::from_str(
            &std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}")),
        )
        .unwrap();
        assert_eq!(
            stored, doc,
            "{path} is not what the decoder makes of {name} (rewrite it with AGENT_HARNESS_WRITE_CODEX_PAYLOADS=1)"
        );
    }
}
