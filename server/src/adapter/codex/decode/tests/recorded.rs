//! The recorded transcripts in `cassettes/codex`.

use agent_harness_protocol::pb;
use agent_harness_protocol::pb::event::Payload;
use agent_harness_protocol::vocab::{resolved_by, run_error_kind};
use serde_json::json;

use super::*;
use crate::adapter::{Decoder, StdoutLine};
use crate::partial::{BlockKind, Change};

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
        (
            "command_output",
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
    // replay() counts the recorded turn/start as the harness's input.
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
        "resume",
        "resume.2",
    ] {
        let resume_id = if let Some(first) = name.strip_suffix(".2") {
            answer(first, 2)["result"]["thread"]["id"]
                .as_str()
                .unwrap()
                .to_owned()
        } else {
            String::new()
        };
        let mut d = CodexDecoder::new(&setup(1 << 20, Some(4242), &resume_id));
        let (payloads, _) = replay(&mut d, name);
        testing::check_vector(
            "codex",
            "AGENT_HARNESS_WRITE_CODEX_PAYLOADS",
            name,
            &format!("codex/{name}"),
            payloads,
        );
    }
}

/// A command printing over time: its recorded `outputDelta`s are live
/// typing of a tool-output block keyed by its item id, which its result
/// ends; the result alone holds the output in the log, all of it (the
/// first line, printed before Codex streamed any, too).
#[test]
fn command_output_is_typed_under_its_tool_until_its_result() {
    let mut d = decoder();
    d.input_sent();
    let (payloads, changes) = replay(&mut d, "command_output");
    let tool_use = content(&payloads[1]).blocks[0].clone();
    let id = tool_use.tool_use_id.clone();
    let recorded: String = out_messages("command_output")
        .iter()
        .filter(|m| m["method"] == "item/commandExecution/outputDelta")
        .map(|m| m["params"]["delta"].as_str().unwrap().to_owned())
        .collect();
    assert!(!recorded.is_empty(), "the recording streams output");
    let of_tool = |c: &&Change| match c {
        Change::Started { message_id, .. }
        | Change::Fragment { message_id, .. }
        | Change::Done { message_id, .. } => **message_id == *id,
        Change::Cleared => false,
    };
    let mine: Vec<Change> = changes.iter().filter(of_tool).cloned().collect();
    assert_eq!(
        mine.first(),
        Some(&Change::Started {
            message_id: id.as_str().into(),
            parent_tool_use_id: "".into(),
            index: 0,
            kind: BlockKind::ToolOutput {
                tool_name: "Bash".into(),
                tool_use_id: id.clone(),
            },
        })
    );
    assert_eq!(typed(&mine), recorded);
    assert_eq!(
        mine.last(),
        Some(&Change::Done {
            message_id: id.as_str().into(),
            index: None
        })
    );
    let result = &result(&payloads[4]).tool_results[0];
    assert_eq!(result.tool_use_id, id);
    assert_eq!(result.text, "line1\nline2\nline3\n");
    assert!(result.text.ends_with(&recorded));
}
