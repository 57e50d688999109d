//! Unit tests: the incremental folds agree with the slice functions, every
//! function is linear on a large log, and the classify helpers.

use std::path::Path;
use std::time::Instant;

use pbjson_types::{Struct, Value, value::Kind};

use super::classify::{self, ToolKind};
use super::*;
use crate::pb::{
    Content, ContentBlock, InputSent, InputSource, ModelUsage, PermissionRequested,
    PermissionResolved, Result as PbResult, RunEnd, RunReady, RunStart, StartConfig, TaskStarted,
    TaskUpdated, ToolResult, TurnEnd, event::Payload,
};

fn load_vectors() -> Vec<(String, Vec<Event>)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/vectors");
    let mut out = Vec::new();
    for entry in std::fs::read_dir(&dir).expect("tests/vectors") {
        let path = entry.expect("entry").path();
        if path.extension().is_none_or(|x| x != "json") {
            continue;
        }
        let doc: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).expect("read")).expect("json");
        let events: Vec<Event> =
            serde_json::from_value(doc["events"].clone()).expect("events parse");
        out.push((path.display().to_string(), events));
    }
    assert!(out.len() >= 40, "vectors missing: {}", out.len());
    out
}

/// The incremental folds give what the slice functions give, at every
/// prefix of every vector.
#[test]
fn folds_equal_slice_functions_at_every_prefix() {
    for (name, events) in load_vectors() {
        let mut fold = Fold::new();
        let mut sf = StatusFold::new();
        for n in 0..=events.len() {
            if n > 0 {
                fold.apply(&events[n - 1]);
                sf.apply(&events[n - 1]);
            }
            let prefix = &events[..n];
            let snap = fold.snapshot();
            let ctx = format!("{name} after {n}");
            assert_eq!(sf.status(), status(prefix), "{ctx}");
            assert_eq!(sf.process_alive(), process_alive(prefix), "{ctx}");
            assert_eq!(sf.run_live(), process_alive(prefix), "{ctx}");
            assert_eq!(snap, derive_all(prefix), "{ctx}");
            assert_eq!(snap.status, status(prefix), "{ctx}");
            assert_eq!(snap.process_alive, process_alive(prefix), "{ctx}");
            assert_eq!(snap.usage, usage(prefix), "{ctx}");
            assert_eq!(snap.activity, activity(prefix), "{ctx}");
            assert_eq!(snap.background_tasks, background_tasks(prefix), "{ctx}");
            assert_eq!(
                snap.has_running_background_tasks,
                has_running_background_tasks(prefix),
                "{ctx}"
            );
            assert_eq!(
                snap.pending_permissions,
                pending_permissions(prefix),
                "{ctx}"
            );
            let pending: Vec<_> = fold.pending_permissions().cloned().collect();
            assert_eq!(pending, snap.pending_permissions, "{ctx}");
            for p in &pending {
                assert_eq!(fold.pending_permission(&p.request_id), Some(p), "{ctx}");
            }
            assert_eq!(snap.scheduled_wakeup, scheduled_wakeup(prefix), "{ctx}");
            assert_eq!(snap.plan_outcomes, plan_outcomes(prefix), "{ctx}");
            assert_eq!(snap.resume_id, resume_id(prefix), "{ctx}");
            assert_eq!(fold.resume_id(), resume_id(prefix).as_deref(), "{ctx}");
            assert_eq!(snap.context_lost, context_lost(prefix), "{ctx}");
            assert_eq!(fold.context_lost(), context_lost(prefix).as_ref(), "{ctx}");
            assert_eq!(
                snap.pending_messages,
                classify::pending_messages(prefix),
                "{ctx}"
            );
            assert_eq!(snap.head_seq, sf.head_seq(), "{ctx}");
            assert_eq!(snap.run_id.as_deref(), sf.current_run_id(), "{ctx}");
            assert_eq!(fold.session("s"), session("s", prefix), "{ctx}");
            // Turns as group_events splits them agree with the status fold.
            let turns = classify::group_events(prefix);
            let grouped: usize = turns.iter().map(|t| t.events.len()).sum();
            assert_eq!(grouped, n, "{ctx}: group_events loses or repeats events");
            let open = turns.last().is_some_and(|t| t.is_turn() && t.end.is_none());
            assert_eq!(open, sf.turn_in_progress(), "{ctx}");
        }
    }
}

/// Reading back from the head with the per-event predicates (as the
/// server's start-up recovery does) agrees with the folds at every prefix
/// of every vector.
#[test]
fn predicates_read_back_from_the_head_agree_with_the_folds() {
    for (name, events) in load_vectors() {
        let mut fold = Fold::new();
        for n in 0..=events.len() {
            if n > 0 {
                fold.apply(&events[n - 1]);
            }
            let prefix = &events[..n];
            let ctx = format!("{name} after {n}");
            let live = prefix
                .iter()
                .rev()
                .find_map(|e| run_liveness(e.payload.as_ref()?))
                .unwrap_or(false);
            assert_eq!(live, fold.status_fold().run_live(), "{ctx}");
            let resume = prefix
                .iter()
                .rev()
                .find_map(|e| resume_decision(e.payload.as_ref()?))
                .flatten();
            assert_eq!(resume, fold.resume_id(), "{ctx}");
        }
    }
}

#[test]
fn the_predicates_answer_for_the_events_that_decide() {
    let ready = |id: &str| {
        Payload::RunReady(crate::pb::RunReady {
            resume_id: id.into(),
            ..Default::default()
        })
    };
    let error = |kind: &str| {
        Payload::RunError(crate::pb::RunError {
            kind: kind.into(),
            ..Default::default()
        })
    };
    assert_eq!(resume_decision(&ready("c1")), Some(Some("c1")));
    assert_eq!(resume_decision(&ready("")), None);
    assert_eq!(resume_decision(&error(RESUME_FAILED)), Some(None));
    assert_eq!(resume_decision(&error("bad_line")), None);
    assert_eq!(
        run_liveness(&Payload::RunStart(Default::default())),
        Some(true)
    );
    assert_eq!(
        run_liveness(&Payload::RunEnd(Default::default())),
        Some(false)
    );
    assert_eq!(run_liveness(&ready("c1")), None);
}

fn ev(seq: u64, run: &str, p: Payload) -> Event {
    Event {
        seq,
        session_id: "big".into(),
        run_id: run.into(),
        payload: Some(p),
        ..Default::default()
    }
}

fn obj(pairs: &[(&str, &str)]) -> Struct {
    Struct {
        fields: pairs
            .iter()
            .map(|(k, v)| {
                (
                    (*k).to_owned(),
                    Value {
                        kind: Some(Kind::StringValue((*v).to_owned())),
                    },
                )
            })
            .collect(),
    }
}

fn usage_of(i: u64, o: u64, cc: u64, cr: u64) -> Option<crate::pb::Usage> {
    Some(crate::pb::Usage {
        input_tokens: i,
        output_tokens: o,
        cache_creation_input_tokens: cc,
        cache_read_input_tokens: cr,
    })
}

/// A 100,000-event log: 10 runs of 1,000 turns, each turn with a tool call,
/// a background task and a permission prompt. Every function runs on it;
/// the results are checked exactly and the time is bounded (a quadratic
/// scan over 10^5 events would take minutes, not milliseconds).
#[test]
fn hundred_thousand_events_linear() {
    let mut events = Vec::with_capacity(100_000);
    let mut seq = 0u64;
    let mut push = |events: &mut Vec<Event>, run: &str, p: Payload| {
        seq += 1;
        events.push(ev(seq, run, p));
    };
    for r in 0..10 {
        let run = format!("run-{r}");
        push(
            &mut events,
            &run,
            Payload::RunStart(RunStart {
                config: Some(StartConfig::default()),
                adapter: "interactive".into(),
                trigger: "start".into(),
                ..Default::default()
            }),
        );
        push(
            &mut events,
            &run,
            Payload::RunReady(RunReady {
                resume_id: format!("cli-{r}"),
                ..Default::default()
            }),
        );
        for t in 0..1_000 {
            let tu = format!("toolu-{r}-{t}");
            let task = format!("b-{r}-{t}");
            let req = format!("req-{r}-{t}");
            let turn_events: Vec<Payload> = vec![
                Payload::InputSent(InputSent {
                    text: "go".into(),
                    source: InputSource::User as i32,
                    ..Default::default()
                }),
                Payload::Content(Content {
                    blocks: vec![ContentBlock {
                        r#type: "thinking".into(),
                        thinking: "hm".into(),
                        ..Default::default()
                    }],
                    usage: usage_of(1, 1, 0, 0),
                    ..Default::default()
                }),
                Payload::Content(Content {
                    blocks: vec![ContentBlock {
                        r#type: "tool_use".into(),
                        tool_use_id: tu.clone(),
                        tool_name: "Bash".into(),
                        input: Some(obj(&[("command", "ls")])),
                        ..Default::default()
                    }],
                    usage: usage_of(10, 2, 3, 4),
                    ..Default::default()
                }),
                Payload::PermissionRequested(PermissionRequested {
                    request_id: req.clone(),
                    tool_name: "Bash".into(),
                    tool_use_id: tu.clone(),
                    ..Default::default()
                }),
                Payload::PermissionResolved(PermissionResolved {
                    request_id: req,
                    allow: true,
                    by: "user".into(),
                    ..Default::default()
                }),
                Payload::TaskStarted(TaskStarted {
                    task_id: task.clone(),
                    task_type: "local_bash".into(),
                    tool_use_id: tu.clone(),
                    ..Default::default()
                }),
                Payload::Result(PbResult {
                    tool_results: vec![ToolResult {
                        tool_use_id: tu,
                        text: "ok".into(),
                        is_error: false,
                    }],
                    ..Default::default()
                }),
                Payload::TaskUpdated(TaskUpdated {
                    task_id: task,
                    status: "completed".into(),
                    ..Default::default()
                }),
                Payload::TurnEnd(TurnEnd {
                    usage: usage_of(100, 20, 5, 7),
                    cost_usd: 0.25,
                    model_usage: vec![ModelUsage {
                        context_window: 200_000,
                        ..Default::default()
                    }],
                    ..Default::default()
                }),
                Payload::TurnEnd(TurnEnd {
                    compact: true,
                    usage: usage_of(999, 999, 999, 999),
                    cost_usd: 9.0,
                    ..Default::default()
                }),
            ];
            for p in turn_events {
                push(&mut events, &run, p);
            }
        }
        let end = if r == 9 {
            // The last run stays alive with a turn in progress.
            Payload::InputSent(InputSent {
                text: "last".into(),
                source: InputSource::User as i32,
                ..Default::default()
            })
        } else {
            Payload::RunEnd(RunEnd {
                reason: crate::pb::RunEndReason::Completed as i32,
                exit_code: Some(0),
                ..Default::default()
            })
        };
        push(&mut events, &run, end);
    }
    // 10 runs × (2 + 1000 × 10 + 1) = 100,030 events.
    assert_eq!(events.len(), 100_030);

    let started = Instant::now();
    let u = usage(&events);
    assert_eq!(
        u,
        Usage {
            input_tokens: 100 * 10_000,
            output_tokens: 20 * 10_000,
            cache_creation_input_tokens: 5 * 10_000,
            cache_read_input_tokens: 7 * 10_000,
            cost_usd: u.cost_usd,
            context_tokens: 10 + 2 + 3 + 4,
            context_window: 200_000,
            turns: 10_000,
        }
    );
    assert!((u.cost_usd - 2_500.0).abs() < 1e-6, "cost {}", u.cost_usd);
    assert_eq!(status(&events), Status::Streaming);
    assert!(process_alive(&events));
    assert_eq!(activity(&events).kind, ActivityKind::Thinking);
    let tasks = background_tasks(&events);
    assert_eq!(tasks.len(), 10_000);
    assert!(tasks.iter().all(|t| t.status == TaskStatus::Completed));
    assert!(!has_running_background_tasks(&events));
    assert!(pending_permissions(&events).is_empty());
    assert_eq!(scheduled_wakeup(&events), None);
    assert!(plan_outcomes(&events).is_empty());
    assert_eq!(resume_id(&events).as_deref(), Some("cli-9"));
    assert_eq!(context_lost(&events), None);
    let d = derive_all(&events);
    assert_eq!(d.usage, u);
    assert_eq!(d.head_seq, 100_030);
    assert_eq!(d.run_id.as_deref(), Some("run-9"));
    let s = session("big", &events);
    assert_eq!(s.status, crate::pb::SessionStatus::Streaming as i32);
    assert_eq!(s.usage.as_ref().map(|u| u.turns), Some(10_000));
    let turns = classify::group_events(&events);
    let real: Vec<_> = turns.iter().filter(|t| t.is_turn()).collect();
    assert_eq!(real.len(), 10_001);
    assert!(
        real[..10_000]
            .iter()
            .all(|t| t.tool_calls.len() == 1 && t.tool_calls[0].result.is_some())
    );
    assert!(classify::subagent_children(&events).is_empty());
    assert!(classify::pending_messages(&events).is_empty());
    let elapsed = started.elapsed();
    println!(
        "every derive function over {} events: {elapsed:?}",
        events.len()
    );
    // Generous for a debug build on a loaded 2-core machine; a quadratic
    // scan would be ~10^10 steps.
    assert!(elapsed.as_secs() < 20, "too slow: {elapsed:?}");
}

#[test]
fn classify_tool_kinds() {
    let cases = [
        ("Bash", ToolKind::Shell),
        ("BashOutput", ToolKind::Shell),
        ("KillShell", ToolKind::Shell),
        ("Read", ToolKind::Read),
        ("Glob", ToolKind::Read),
        ("Grep", ToolKind::Read),
        ("LS", ToolKind::Read),
        ("Edit", ToolKind::Edit),
        ("Write", ToolKind::Edit),
        ("MultiEdit", ToolKind::Edit),
        ("NotebookEdit", ToolKind::Edit),
        ("WebFetch", ToolKind::Web),
        ("WebSearch", ToolKind::Web),
        ("Agent", ToolKind::Agent),
        ("Task", ToolKind::Agent),
        ("TodoWrite", ToolKind::Todo),
        ("TaskCreate", ToolKind::Todo),
        ("TaskStop", ToolKind::Todo),
        ("ExitPlanMode", ToolKind::Plan),
        ("ScheduleWakeup", ToolKind::Schedule),
        ("CronCreate", ToolKind::Schedule),
        ("CronDelete", ToolKind::Schedule),
        ("CronList", ToolKind::Schedule),
        ("mcp__github__create_issue", ToolKind::Mcp),
        ("SomethingNew", ToolKind::Other),
    ];
    for (name, kind) in cases {
        assert_eq!(classify::classify_tool(name, None), kind, "{name}");
    }
    let agent_input = obj(&[("prompt", "look"), ("subagent_type", "general-purpose")]);
    assert_eq!(
        classify::classify_tool("Task", Some(&agent_input)),
        ToolKind::Agent
    );
    let todo_input = obj(&[("subject", "write tests")]);
    assert_eq!(
        classify::classify_tool("Task", Some(&todo_input)),
        ToolKind::Todo
    );
}

fn vector(name: &str) -> Vec<Event> {
    load_vectors()
        .into_iter()
        .find(|(n, _)| n.ends_with(&format!("/{name}.json")))
        .map(|(_, e)| e)
        .unwrap_or_else(|| panic!("vector {name}"))
}

#[test]
fn group_events_splits_turns_and_pairs_tools() {
    // bg_bash: boot turn with a tool, idle-time task frames, then a
    // CLI-started follow-up turn.
    let events = vector("bg_bash");
    let turns = classify::group_events(&events);
    let shape: Vec<(Option<u64>, Option<u64>, usize)> = turns
        .iter()
        .map(|t| (t.start.map(|e| e.seq), t.end.map(|e| e.seq), t.events.len()))
        .collect();
    // Turn 1: run_start(1) .. turn_end(8); stretch: task_updated(9),
    // task_notification(10); turn 2: turn_start(11) .. turn_end(13).
    assert_eq!(
        shape,
        vec![
            (Some(1), Some(8), 8),
            (None, None, 2),
            (Some(11), Some(13), 3)
        ]
    );
    let call = &turns[0].tool_calls[0];
    assert_eq!(call.tool_name, "Bash");
    assert_eq!(call.kind, ToolKind::Shell);
    assert_eq!(call.use_event.seq, 4);
    assert_eq!(call.result_event.map(|e| e.seq), Some(6));
    assert!(!call.result.expect("paired").is_error);

    // compaction: the compact turn_end stays inside the turn.
    let events = vector("compaction_manual");
    let turns = classify::group_events(&events);
    assert_eq!(turns.len(), 2);
    assert_eq!(turns[1].start.map(|e| e.seq), Some(6));
    assert_eq!(turns[1].end.map(|e| e.seq), Some(9));
}

#[test]
fn subagent_children_by_parent() {
    let events = vector("subagent_foreground");
    let children = classify::subagent_children(&events);
    assert_eq!(children.len(), 1);
    let seqs: Vec<u64> = children["toolu_ag"].iter().map(|e| e.seq).collect();
    assert_eq!(seqs, vec![6, 7, 8, 9]);
}

#[test]
fn session_summarizes_the_log() {
    let events = vector("permission_allowed");
    // After the permission_requested (seq 5): streaming, one pending.
    let s = session("sess-1", &events[..5]);
    assert_eq!(s.session_id, "sess-1");
    assert_eq!(s.head_seq, 5);
    assert_eq!(s.status, crate::pb::SessionStatus::Streaming as i32);
    assert!(s.process_alive);
    assert_eq!(s.resume_id, "cli-sess-1");
    assert_eq!(s.activity, "Waiting for permission to run Write");
    assert_eq!(s.pending_permissions, 1);
    assert_eq!(s.run_id, "run-1");
    let empty = session("none", &[]);
    assert_eq!(empty.status, crate::pb::SessionStatus::Idle as i32);
    assert_eq!(empty.head_seq, 0);
    assert_eq!(empty.run_id, "");
    assert_eq!(empty.activity, "Idle");
    assert_eq!(
        Status::Stopping.as_str(),
        "stopping",
        "as_str is the vectors' spelling"
    );
    assert_eq!(
        crate::pb::SessionStatus::from(Status::Starting),
        crate::pb::SessionStatus::Starting
    );
}
