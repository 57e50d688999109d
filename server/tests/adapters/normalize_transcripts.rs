//! Replays every recording of the real CLI 2.1.197 (cassettes/transcripts)
//! through the normalizer and pins the event kinds each scenario yields.

use crate::support::common;
use crate::support::expected;

use std::path::PathBuf;

use agent_harness_protocol::pb::event::Payload;
use agent_harness_server::adapter::StdoutLine;
use agent_harness_server::normalize::Normalizer;
use agent_harness_server::supervise::DEFAULT_MAX_LINE_BYTES;
use common::{cassettes_dir, detailed_kind, file_stems};
use proptest::strategy::Strategy;
use serde_json::Value;

fn transcripts_dir() -> PathBuf {
    cassettes_dir().join("transcripts")
}

/// Replays one recording: "in" user lines call `input_sent`, "out" lines
/// are normalized. Returns the events and checks every event keeps its line.
fn replay(name: &str) -> (Vec<String>, Vec<(Payload, String)>) {
    let path = transcripts_dir().join(format!("{name}.transcript.jsonl"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    let mut n = Normalizer::new(DEFAULT_MAX_LINE_BYTES);
    let mut all = Vec::new();
    for rec in text.lines() {
        let rec: Value = serde_json::from_str(rec).unwrap();
        let line = rec.get("line").and_then(Value::as_str).unwrap_or("");
        match rec["dir"].as_str().unwrap() {
            "in" => {
                let v: Value = serde_json::from_str(line).unwrap();
                if v["type"] == "user" {
                    n.input_sent();
                }
            }
            "out" => {
                for (payload, cli_line) in n.line(&StdoutLine::Line(line.to_string())) {
                    assert_eq!(
                        cli_line, line,
                        "cli_line must be the CLI's line byte for byte"
                    );
                    all.push((payload, cli_line));
                }
            }
            _ => {}
        }
    }
    (all.iter().map(|(p, _)| detailed_kind(p)).collect(), all)
}

fn kinds(name: &str) -> Vec<String> {
    replay(name).0
}

fn expect(name: &str, want: &[String]) {
    assert_eq!(kinds(name), want, "scenario {name}");
}

/// Every recording in the folder is covered by a pinned expectation
/// (`cassettes/expected.json`), so a new recording cannot be added without
/// saying what it must yield.
#[test]
fn every_transcript_is_pinned() {
    let names = file_stems(&transcripts_dir(), ".transcript.jsonl");
    let pinned = expected::table().transcripts;
    assert_eq!(names, pinned.keys().cloned().collect::<Vec<_>>());
    for (name, want) in &pinned {
        expect(name, &want.events);
    }
}

/// The first event whose payload matches `$pat`, as `$out` (what the
/// pattern binds): `first!(&events, Payload::TurnEnd(t) => t)`. Panics when
/// no event matches.
macro_rules! first {
    ($events:expr, $pat:pat $(if $guard:expr)? => $out:expr) => {
        find($events, |p| match p {
            $pat $(if $guard)? => Some($out),
            _ => None,
        })
    };
}

fn find<'a, T>(events: &'a [(Payload, String)], f: impl Fn(&'a Payload) -> Option<&'a T>) -> &'a T {
    events
        .iter()
        .find_map(|(p, _)| f(p))
        .expect("event not found")
}

#[test]
fn run_ready_carries_the_init_fields() {
    let (_, events) = replay("bg_bash");
    let ready = first!(&events, Payload::RunReady(r) => r);
    assert_eq!(ready.resume_id, "444b6d9b-990e-4455-b65d-319db69f5c49");
    assert_eq!(ready.cli_version, "2.1.197");
    assert_eq!(ready.cwd, "/srv/demo/work");
    assert!(ready.tools.iter().any(|t| t == "Bash"));
    assert!(!ready.model.is_empty());
    assert!(!ready.permission_mode.is_empty());
}

/// The CLI's answer to `--resume` of a conversation it has no transcript
/// for (recorded from 2.1.197): one error `result` before any init. It
/// becomes `run_error{resume_failed}` naming the dead id, then the turn_end.
#[test]
fn a_missing_resume_conversation_is_a_resume_failed_run_error() {
    let dead = "2f9e6a80-7dee-402a-8327-efdbf244e717";
    let (_, events) = replay("resume_missing");
    let err = first!(&events, Payload::RunError(e) => e);
    assert_eq!(err.kind, "resume_failed");
    assert_eq!(err.resume_id, dead, "read from the CLI's message: {err:?}");
    assert_eq!(
        err.message,
        format!("No conversation found with session ID: {dead}")
    );
    let end = first!(&events, Payload::TurnEnd(t) => t);
    assert!(end.is_error);
    assert_eq!(end.num_turns, 0);

    // The run's own --resume id wins over what the message says.
    let line = result_line("resume_missing");
    let mut n = Normalizer::new(DEFAULT_MAX_LINE_BYTES);
    n.set_resume("the-id-we-passed");
    let out = n.line(&StdoutLine::Line(line.clone()));
    assert!(
        matches!(&out[0].0, Payload::RunError(e) if e.resume_id == "the-id-we-passed"),
        "{out:?}"
    );
    assert_eq!(out[0].1, line, "the run_error keeps the CLI's line");

    // The same words after the run booted (an init came first) are not a
    // failed resume: the conversation was loaded.
    let mut n = Normalizer::new(DEFAULT_MAX_LINE_BYTES);
    n.line(&StdoutLine::Line(init_line("basic_text")));
    let kinds: Vec<String> = n
        .line(&StdoutLine::Line(line))
        .iter()
        .map(|(p, _)| detailed_kind(p))
        .collect();
    assert_eq!(kinds, ["turn_end[error_during_execution,error]"]);
}

/// The first `out` line of recording `name` whose type is `ty`.
fn out_line(name: &str, ty: &str) -> String {
    let path = transcripts_dir().join(format!("{name}.transcript.jsonl"));
    let text = std::fs::read_to_string(&path).unwrap();
    text.lines()
        .filter_map(|r| serde_json::from_str::<Value>(r).ok())
        .filter(|r| r["dir"] == "out")
        .filter_map(|r| r["line"].as_str().map(str::to_owned))
        .find(|l| serde_json::from_str::<Value>(l).is_ok_and(|v| v["type"] == ty))
        .unwrap_or_else(|| panic!("{name} has no {ty} line"))
}

fn result_line(name: &str) -> String {
    out_line(name, "result")
}

fn init_line(name: &str) -> String {
    out_line(name, "system")
}

#[test]
fn api_error_turn_end_keeps_status_and_text() {
    let (_, events) = replay("api_error_529_retry");
    let end = first!(&events, Payload::TurnEnd(t) => t);
    assert!(end.is_error);
    assert_eq!(end.subtype, "success");
    assert_eq!(end.api_error_status, 529);
    assert!(end.result.starts_with("API Error: 529"), "{}", end.result);
    let content = first!(&events, Payload::Content(c) => c);
    assert_eq!(content.model, "<synthetic>");
    assert_eq!(content.error, "server_error");
}

#[test]
fn turn_end_has_usage_model_usage_and_origin() {
    let (_, events) = replay("bg_bash");
    let ends: Vec<_> = events
        .iter()
        .filter_map(|(p, _)| match p {
            Payload::TurnEnd(t) => Some(t),
            _ => None,
        })
        .collect();
    assert_eq!(ends.len(), 2);
    assert_eq!(ends[0].origin, "");
    assert_eq!(ends[1].origin, "task-notification");
    let mu = &ends[0].model_usage;
    assert!(!mu.is_empty());
    assert!(mu[0].context_window > 0, "{mu:?}");
    assert!(ends[0].usage.as_ref().unwrap().output_tokens > 0);
    assert_eq!(ends[0].terminal_reason, "completed");
    assert!(ends[0].num_turns >= 1);
}

#[test]
fn interrupt_turn_end_has_reason_and_errors() {
    let (_, events) = replay("interrupt_streaming");
    let end = first!(&events, Payload::TurnEnd(t) => t);
    assert_eq!(end.terminal_reason, "aborted_streaming");
    assert!(!end.errors.is_empty());
    let text = first!(&events, Payload::Result(r) if r.tool_results.is_empty() => r);
    assert_eq!(text.text, "[Request interrupted by user]");
}

#[test]
fn permission_request_and_cancel_fields() {
    let (_, events) = replay("interrupt_pending_permission");
    let req = first!(&events, Payload::PermissionRequested(r) => r);
    assert_eq!(req.tool_name, "Bash");
    assert!(req.input.as_ref().unwrap().fields.contains_key("command"));
    assert!(req.tool_use_id.starts_with("toolu_"));
    let res = first!(&events, Payload::PermissionResolved(r) => r);
    assert_eq!(res.request_id, req.request_id);
    assert!(!res.allow);
    assert_eq!(res.by, "cancelled");

    let (_, events) = replay("can_use_tool_allow");
    let req = first!(&events, Payload::PermissionRequested(r) => r);
    assert_eq!(req.suggestions.len(), 3);
    assert!(
        req.blocked_path.starts_with("/srv/demo/work/made-by-bash-"),
        "{}",
        req.blocked_path
    );
}

#[test]
fn tool_results_keep_text_and_side_data() {
    let (_, events) = replay("bash_fail");
    let r = first!(&events, Payload::Result(r) if !r.tool_results.is_empty() => r);
    assert!(r.is_error);
    assert!(r.tool_results[0].text.contains("Exit code"), "{r:?}");
    // A failed Bash's side data is a string.
    let v = r.tool_use_result.as_ref().expect("tool_use_result kept");
    assert!(matches!(
        v.kind,
        Some(pbjson_types::value::Kind::StringValue(_))
    ));

    let (_, events) = replay("subagent");
    let child = first!(&events, Payload::Result(r) if !r.parent_tool_use_id.is_empty() => r);
    assert_eq!(child.text, "CHILDTASK reply hi");
    let agent = events
        .iter()
        .rev()
        .filter_map(|(p, _)| match p {
            Payload::Result(r) if !r.tool_results.is_empty() => Some(r),
            _ => None,
        })
        .next()
        .unwrap();
    // Text blocks of one tool_result are joined with newlines.
    assert!(
        agent.tool_results[0]
            .text
            .starts_with("child says hi\nagentId:")
    );
    assert!(matches!(
        agent.tool_use_result.as_ref().unwrap().kind,
        Some(pbjson_types::value::Kind::StructValue(_))
    ));
}

/// The CLI reports `total_cost_usd` and `modelUsage` cumulatively for the
/// process; each turn_end must carry only its own turn's share, or summing
/// them (derive::usage) would count early turns again and again.
#[test]
fn turn_end_cost_is_the_turns_own_share() {
    let (_, events) = replay("compact");
    let turns: Vec<_> = events
        .iter()
        .filter_map(|(p, _)| match p {
            Payload::TurnEnd(t) if !t.compact => Some(t),
            _ => None,
        })
        .collect();
    let costs: Vec<f64> = turns.iter().map(|t| t.cost_usd).collect();
    let want = [0.000141, 0.000282, 0.000141, 0.000141, 0.000141];
    assert_eq!(costs.len(), want.len(), "{costs:?}");
    for (got, want) in costs.iter().zip(want) {
        assert!((got - want).abs() < 1e-9, "costs {costs:?}");
    }
    let total: f64 = costs.iter().sum();
    assert!((total - 0.000846).abs() < 1e-9, "total {total}");
    let inputs: Vec<u64> = turns
        .iter()
        .map(|t| t.model_usage.iter().map(|m| m.input_tokens).sum())
        .collect();
    assert_eq!(inputs, [12, 24, 12, 12, 12]);
}

#[test]
fn compact_boundary_fields() {
    let (_, events) = replay("compact");
    let c = first!(&events, Payload::TurnEnd(t) if t.compact => t);
    assert_eq!(c.compact_trigger, "manual");
    assert_eq!(c.compact_pre_tokens, 19);
}

/// A denied tool shows on the turn_end, with the id of the tool_use the
/// model made and the input it gave, so a UI can show it even when no
/// permission_requested preceded it.
#[test]
fn turn_end_lists_the_denied_tools() {
    let (_, events) = replay("can_use_tool_deny");
    let end = first!(&events, Payload::TurnEnd(t) => t);
    assert_eq!(end.permission_denials.len(), 1, "{end:?}");
    let denial = &end.permission_denials[0];
    assert_eq!(denial.tool_name, "Bash");
    assert_eq!(denial.tool_use_id, "toolu_fake1795986035626498887");
    let input = serde_json::to_value(denial.tool_input.as_ref().expect("tool_input kept")).unwrap();
    assert_eq!(
        input,
        serde_json::json!({
            "command": "touch made-by-bash-1795986035626396704",
            "description": "Create file",
        })
    );
    // The same id as the tool_use block and the error tool_result.
    let call = first!(&events, Payload::Content(c) => &c.blocks[0]);
    assert_eq!(call.tool_use_id, denial.tool_use_id);
    let answer = first!(&events, Payload::Result(r) if !r.tool_results.is_empty() => r);
    assert_eq!(answer.tool_results[0].tool_use_id, denial.tool_use_id);
    assert!(answer.tool_results[0].is_error);
}

/// Every turn_end of every recording carries exactly the denials of the
/// result line it came from (none where the CLI lists none, none on a
/// compaction boundary); only the two scenarios that deny a tool have any.
#[test]
fn turn_end_denials_match_every_recording() {
    let mut with_denials = Vec::new();
    for name in file_stems(&transcripts_dir(), ".transcript.jsonl") {
        let (_, events) = replay(&name);
        for (payload, line) in &events {
            let Payload::TurnEnd(end) = payload else {
                continue;
            };
            let cli: Value = serde_json::from_str(line).unwrap();
            let want: Vec<Value> = if cli["type"] == "result" {
                cli["permission_denials"]
                    .as_array()
                    .unwrap_or_else(|| panic!("{name}: result line without permission_denials"))
                    .clone()
            } else {
                assert!(end.compact, "{name}: {line}");
                Vec::new()
            };
            let got: Vec<Value> = end
                .permission_denials
                .iter()
                .map(|d| {
                    serde_json::json!({
                        "tool_name": d.tool_name,
                        "tool_use_id": d.tool_use_id,
                        "tool_input": serde_json::to_value(&d.tool_input).unwrap(),
                    })
                })
                .collect();
            assert_eq!(got, want, "{name}: {line}");
            if !got.is_empty() {
                with_denials.push(name.clone());
            }
        }
    }
    assert_eq!(
        with_denials,
        ["can_use_tool_deny", "interrupt_pending_permission"]
    );
}

#[test]
fn input_sent_suppresses_turn_start_and_its_absence_marks_one() {
    let init = r#"{"type":"system","subtype":"init","session_id":"s","model":"m","tools":[],"cwd":"/","permissionMode":"default","mcp_servers":[]}"#;
    let result = r#"{"type":"result","subtype":"success","is_error":false}"#;
    let mut n = Normalizer::new(1024);
    let k = |n: &mut Normalizer, l: &str| -> Vec<String> {
        n.line(&StdoutLine::Line(l.into()))
            .iter()
            .map(|(p, _)| detailed_kind(p))
            .collect()
    };
    n.input_sent();
    assert_eq!(k(&mut n, init), ["run_ready"]);
    assert_eq!(k(&mut n, result), ["turn_end[success]"]);
    n.input_sent();
    assert_eq!(k(&mut n, init), Vec::<String>::new());
    assert_eq!(k(&mut n, result), ["turn_end[success]"]);
    // No input: the CLI started this turn itself.
    assert_eq!(k(&mut n, init), ["turn_start[cron]"]);
    assert_eq!(k(&mut n, result), ["turn_end[success]"]);
    // A changed model is announced again.
    n.input_sent();
    let changed = init.replace(r#""model":"m""#, r#""model":"other""#);
    assert_eq!(k(&mut n, &changed), ["run_ready"]);
}

#[test]
fn garbage_lines_become_run_errors_and_the_run_goes_on() {
    let mut n = Normalizer::new(64);
    let cases: &[(&str, &str)] = &[
        ("not json at all", "bad_line"),
        (r#"{"type":"assistant","message":{"con"#, "bad_line"),
        ("[1,2,3]", "bad_line"),
        ("42", "bad_line"),
        ("\"a string\"", "bad_line"),
        ("null", "bad_line"),
        (r#"{"no_type":true}"#, "bad_line"),
        ("\u{fffd}\u{0}binary\u{1}", "bad_line"),
    ];
    for (line, want) in cases {
        let out = n.line(&StdoutLine::Line(line.to_string()));
        assert_eq!(out.len(), 1, "{line:?}");
        let Payload::RunError(e) = &out[0].0 else {
            panic!("{out:?}")
        };
        assert_eq!(e.kind, *want);
        assert_eq!(out[0].1, *line);
    }
    // Over the normalizer's own limit.
    let long = format!(r#"{{"type":"assistant","x":"{}"}}"#, "é".repeat(200));
    let out = n.line(&StdoutLine::Line(long.clone()));
    let Payload::RunError(e) = &out[0].0 else {
        panic!("{out:?}")
    };
    assert_eq!(e.kind, "line_too_large");
    assert!(out[0].1.len() < long.len());
    // Reported too long by the reader: only the head is kept.
    let out = n.line(&StdoutLine::TooLong {
        head: "{\"type\":\"user\"".into(),
        len: 9_000_000,
    });
    let Payload::RunError(e) = &out[0].0 else {
        panic!("{out:?}")
    };
    assert_eq!(e.kind, "line_too_large");
    assert!(e.message.contains("9000000"));
    assert_eq!(out[0].1, "{\"type\":\"user\"");
    // Ignored types produce nothing; blank lines produce nothing.
    for l in [
        r#"{"type":"keep_alive"}"#,
        r#"{"type":"rate_limit_event"}"#,
        r#"{"type":"brand_new"}"#,
        r#"{"type":"system","subtype":"api_retry"}"#,
        "",
        "   ",
    ] {
        assert!(n.line(&StdoutLine::Line(l.into())).is_empty(), "{l}");
    }
    // Odd shapes inside valid types never panic and still map.
    for l in [
        r#"{"type":"assistant"}"#,
        r#"{"type":"assistant","message":{"content":"str"}}"#,
        r#"{"type":"user","message":null}"#,
        r#"{"type":"result","usage":7,"modelUsage":[],"errors":{}}"#,
        r#"{"type":"system"}"#,
        r#"{"type":"control_request"}"#,
        r#"{"type":"control_cancel_request"}"#,
    ] {
        let _ = n.line(&StdoutLine::Line(l.into()));
    }
    // And a good line after all that still works.
    let out = n.line(&StdoutLine::Line(
        r#"{"type":"result","subtype":"success"}"#.into(),
    ));
    assert!(matches!(out[0].0, Payload::TurnEnd(_)));
}

proptest::proptest! {
    #[test]
    fn arbitrary_lines_never_panic(s in "\\PC{0,200}") {
        let mut n = Normalizer::new(128);
        let _ = n.line(&StdoutLine::Line(s));
    }

    #[test]
    fn arbitrary_json_objects_never_panic(
        t in proptest::sample::select(vec!["system", "assistant", "user", "result", "control_request", "control_cancel_request"]),
        sub in proptest::sample::select(vec!["init", "task_started", "task_progress", "task_updated", "task_notification", "compact_boundary", "x"]),
        junk in proptest::collection::vec(("[a-z_]{1,12}", proptest::prop_oneof![
            proptest::strategy::Just(Value::Null),
            proptest::num::i64::ANY.prop_map(Value::from),
            "\\PC{0,20}".prop_map(Value::from),
            proptest::strategy::Just(serde_json::json!({"content": [1, {"type": "text"}], "usage": "x"})),
        ]), 0..8),
    ) {
        let mut obj = serde_json::Map::new();
        for (k, v) in junk { obj.insert(k, v); }
        obj.insert("type".into(), t.into());
        obj.insert("subtype".into(), sub.into());
        let mut n = Normalizer::new(1 << 20);
        let _ = n.line(&StdoutLine::Line(Value::Object(obj).to_string()));
    }
}

/// The CLI's answers to host control requests (recorded `control_misc`:
/// set_permission_mode, set_model, an unknown subtype, mcp_status) are
/// handed to the run task by request id, success with its `response`
/// object and refusal with the CLI's message, and never become events.
#[test]
fn control_responses_are_replies_not_events() {
    let path = transcripts_dir().join("control_misc.transcript.jsonl");
    let text = std::fs::read_to_string(&path).unwrap();
    let mut n = Normalizer::new(DEFAULT_MAX_LINE_BYTES);
    let mut replies = Vec::new();
    for rec in text.lines() {
        let rec: Value = serde_json::from_str(rec).unwrap();
        if rec["dir"] != "out" {
            continue;
        }
        let line = rec["line"].as_str().unwrap();
        let events = n.line(&StdoutLine::Line(line.to_string()));
        if line.contains("\"control_response\"") {
            assert!(events.is_empty(), "{events:?}");
        }
        replies.extend(n.take_control_replies());
    }
    let by_id = |id: &str| {
        replies
            .iter()
            .find(|r| r.request_id == id)
            .unwrap_or_else(|| panic!("no reply {id}: {replies:?}"))
            .outcome
            .clone()
    };
    assert_eq!(by_id("c1"), Ok(serde_json::json!({"mode": "acceptEdits"})));
    assert_eq!(by_id("c2"), Ok(serde_json::json!({})));
    assert_eq!(
        by_id("c3"),
        Err("Unsupported control request subtype: no_such_thing".to_owned())
    );
    assert_eq!(by_id("c4"), Ok(serde_json::json!({"mcpServers": []})));
}
