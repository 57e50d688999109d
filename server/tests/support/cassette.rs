//! Cassette scenarios (how each recording is made; what it must yield is
//! in `cassettes/expected.json`, see [`super::expected`]), and a replay
//! driver that checks the replay stops at every stdin pause point.
#![allow(dead_code)]

use std::path::Path;
use std::time::Duration;

use agent_harness_protocol::pb;
use agent_harness_protocol::pb::event::Payload;
use agent_harness_server::adapter::cassette::{
    CassetteAdapter, CassetteRecord, LAST_TASK, ScriptStep,
};
use agent_harness_server::adapter::{
    DecoderSetup, ExitInfo, PermissionDecision, ProcessAdapter, SpawnConfig, UserInput,
};
use agent_harness_server::supervise::DEFAULT_MAX_LINE_BYTES;

use super::common::detailed_kind;
use super::expected;

/// One cassette: how to record it.
pub struct Scenario {
    /// File stem under cassettes/, and its key in the table of what it
    /// yields.
    pub name: &'static str,
    /// Relay permissions (else Settings).
    pub relay: bool,
    /// The spawn prompt.
    pub prompt: &'static str,
    /// Resume the session of an earlier, unrecorded run with this prompt.
    pub resume_from: Option<&'static str>,
    /// Delete that earlier run's transcript before recording: the CLI's
    /// answer to a resume id whose conversation is gone.
    pub forget_first: bool,
    /// The recording script.
    pub steps: fn() -> Vec<ScriptStep>,
    /// Fork the `resume_from` session (`--fork-session`) instead of
    /// resuming it.
    pub fork: bool,
    /// The agent it is recorded from, as the header spells it: "" (claude)
    /// or "codex".
    pub agent: &'static str,
}

impl Scenario {
    /// What most scenarios share: permissions relayed, a fresh
    /// conversation, no script.
    const BASE: Scenario = Scenario {
        name: "",
        relay: true,
        prompt: "",
        resume_from: None,
        forget_first: false,
        steps: Vec::new,
        fork: false,
        agent: "",
    };

    /// What the table says replaying it yields (and which adapter records
    /// it).
    pub fn expected(&self) -> expected::Cassette {
        expected::cassette(self.name)
    }
}

/// The uuid the rewind cassette gives its second message.
pub const REWIND_TO_UUID: &str = "0a1b2c3d-0000-4000-8000-000000000002";

pub fn scenarios() -> Vec<Scenario> {
    use ScriptStep::*;
    use serde_json::json;
    vec![
        Scenario {
            name: "plain_turn",
            prompt: "TEXT hello from the cassette",
            steps: || vec![WaitTurnEnd],
            ..Scenario::BASE
        },
        Scenario {
            name: "follow_up",
            prompt: "TEXT first",
            steps: || vec![WaitTurnEnd, Send("TEXT second".into()), WaitTurnEnd],
            ..Scenario::BASE
        },
        Scenario {
            name: "tool_use",
            prompt: "BASH echo cassette-tool-output",
            steps: || vec![WaitTurnEnd],
            ..Scenario::BASE
        },
        Scenario {
            name: "interrupt",
            prompt: "SLOW 40 250",
            steps: || {
                vec![
                    WaitFor("\"subtype\":\"init\"".into()),
                    Sleep(Duration::from_millis(1500)),
                    Interrupt,
                    WaitTurnEnd,
                    Send("TEXT after the interrupt".into()),
                    WaitTurnEnd,
                ]
            },
            ..Scenario::BASE
        },
        Scenario {
            name: "permission_allow",
            prompt: "WRITEBASH",
            steps: || vec![Allow, WaitTurnEnd],
            ..Scenario::BASE
        },
        Scenario {
            name: "permission_deny",
            prompt: "WRITEBASH",
            steps: || vec![Deny("denied by the cassette".into()), WaitTurnEnd],
            ..Scenario::BASE
        },
        Scenario {
            name: "bg_bash",
            prompt: "BGBASH sleep 1; echo bg-done",
            steps: || vec![WaitTurnEnd, WaitTurnEnd],
            ..Scenario::BASE
        },
        Scenario {
            name: "resume",
            prompt: "TEXT resumed after exit",
            resume_from: Some("TEXT remember this"),
            steps: || vec![WaitTurnEnd],
            ..Scenario::BASE
        },
        Scenario {
            name: "resume_lost",
            prompt: "TEXT never answered",
            resume_from: Some("TEXT forget this"),
            forget_first: true,
            steps: || vec![WaitTurnEnd],
            ..Scenario::BASE
        },
        Scenario {
            name: "one_shot",
            relay: false,
            prompt: "TEXT one shot answer",
            ..Scenario::BASE
        },
        Scenario {
            name: "set_model",
            prompt: "TEXT before the switch",
            steps: || {
                vec![
                    WaitTurnEnd,
                    Control(json!({"subtype": "set_model", "model": "claude-haiku-4-5"})),
                    Send("TEXT after the switch".into()),
                    WaitTurnEnd,
                ]
            },
            ..Scenario::BASE
        },
        Scenario {
            name: "set_permission_mode",
            prompt: "TEXT before plan mode",
            steps: || {
                vec![
                    WaitTurnEnd,
                    Control(json!({"subtype": "set_permission_mode", "mode": "plan"})),
                    Send("TEXT in plan mode".into()),
                    WaitTurnEnd,
                ]
            },
            ..Scenario::BASE
        },
        Scenario {
            name: "set_max_thinking_tokens",
            prompt: "TEXT before the budget",
            steps: || {
                vec![
                    WaitTurnEnd,
                    Control(
                        json!({"subtype": "set_max_thinking_tokens", "max_thinking_tokens": 2048}),
                    ),
                    Send("THINK with a budget".into()),
                    WaitTurnEnd,
                ]
            },
            ..Scenario::BASE
        },
        Scenario {
            name: "get_context_usage",
            prompt: "TEXT fill some context",
            steps: || {
                vec![
                    WaitTurnEnd,
                    Control(json!({"subtype": "get_context_usage"})),
                ]
            },
            ..Scenario::BASE
        },
        Scenario {
            name: "stop_task",
            prompt: "BGBASH sleep 300",
            steps: || {
                vec![
                    WaitTurnEnd,
                    // The CLI answers after its task_updated(killed) and
                    // task_notification(stopped) lines.
                    Control(json!({"subtype": "stop_task", "task_id": LAST_TASK})),
                ]
            },
            ..Scenario::BASE
        },
        Scenario {
            name: "rewind_files",
            prompt: "WRITE rewound.txt first",
            steps: || {
                vec![
                    Allow,
                    WaitTurnEnd,
                    SendWithUuid("WRITE rewound.txt second".into(), REWIND_TO_UUID.into()),
                    Allow,
                    WaitTurnEnd,
                    Control(
                        json!({"subtype": "rewind_files", "user_message_id": REWIND_TO_UUID, "dry_run": true}),
                    ),
                    Control(json!({"subtype": "rewind_files", "user_message_id": REWIND_TO_UUID})),
                ]
            },
            ..Scenario::BASE
        },
        Scenario {
            name: "fork",
            prompt: "TEXT gamma in the fork",
            resume_from: Some("TEXT alpha in the source"),
            steps: || vec![WaitTurnEnd],
            fork: true,
            ..Scenario::BASE
        },
        // Codex (`codex app-server`): the process stays up between turns.
        Scenario {
            name: "codex_follow_up",
            prompt: "TEXT first",
            steps: || vec![WaitTurnEnd, Send("TEXT second".into()), WaitTurnEnd],
            agent: "codex",
            ..Scenario::BASE
        },
        Scenario {
            name: "codex_interrupt",
            prompt: "SLOW 100 100",
            steps: || {
                vec![
                    WaitFor("item/agentMessage/delta".into()),
                    Interrupt,
                    WaitTurnEnd,
                    Send("TEXT after the interrupt".into()),
                    WaitTurnEnd,
                ]
            },
            agent: "codex",
            ..Scenario::BASE
        },
        Scenario {
            name: "codex_approval",
            prompt: "BASH touch approved.txt && echo made-it",
            steps: || vec![Allow, WaitTurnEnd],
            agent: "codex",
            ..Scenario::BASE
        },
    ]
}

fn spawn_config() -> SpawnConfig {
    SpawnConfig {
        session_id: "s".into(),
        run_id: "r".into(),
        config: pb::StartConfig {
            prompt: "ignored by replay".into(),
            ..Default::default()
        },
        ..Default::default()
    }
}

/// Replay `path` at full speed, acting at each stdin pause point only after
/// checking that the replay really stopped there (no line beyond the
/// recorded ones before the marker arrives while we wait). Returns the
/// event kinds and the exit.
pub async fn replay_checked(path: &Path) -> (Vec<String>, ExitInfo) {
    let adapter = CassetteAdapter::from_file(path, 0.0).unwrap();
    let records = adapter.cassette().records.clone();
    // A one-shot (`cli`) recording's stdin close is its adapter's own: the
    // replay does not wait for the harness there (the manager never closes
    // a one-shot run's stdin).
    let one_shot = adapter.cassette().header.adapter == "cli";
    let mut handle = adapter.spawn(spawn_config()).await.unwrap();
    assert!(
        handle
            .process_id
            .as_deref()
            .unwrap()
            .starts_with("cassette:")
    );
    // The cassette's own agent decodes it, as the server would.
    let mut norm = adapter.decoder(
        &spawn_config(),
        DecoderSetup {
            max_line_bytes: DEFAULT_MAX_LINE_BYTES,
            max_partial_bytes: agent_harness_server::partial::DEFAULT_MAX_PARTIAL_BYTES,
            ..DecoderSetup::default()
        },
    );
    norm.input_sent();
    let mut kinds = Vec::new();
    let mut outs_seen = 0usize;
    let mut permission: Option<String> = None;
    let mut idx = 0usize;
    let outs_before = |i: usize| {
        records[..i]
            .iter()
            .filter(|r| matches!(r, CassetteRecord::Out { .. }))
            .count()
    };
    // Walk the records: read outs as they come, act at "in" markers.
    while idx < records.len() {
        match &records[idx] {
            CassetteRecord::Out { .. } => {
                let line = tokio::time::timeout(Duration::from_secs(5), handle.stdout.recv())
                    .await
                    .expect("replay stalled before a recorded line")
                    .expect("stdout ended early");
                outs_seen += 1;
                for (p, _) in norm.line(&line) {
                    if let Payload::PermissionRequested(r) = &p {
                        permission = Some(r.request_id.clone());
                    }
                    kinds.push(detailed_kind(&p));
                }
            }
            CassetteRecord::In { kind: k, .. } if k == "initial" => {}
            CassetteRecord::In { kind: k, .. } if k == "close" && one_shot => {}
            CassetteRecord::In { kind: k, .. } => {
                assert_eq!(outs_seen, outs_before(idx));
                // Paused: nothing more may arrive until we act.
                let early =
                    tokio::time::timeout(Duration::from_millis(150), handle.stdout.recv()).await;
                assert!(
                    early.is_err(),
                    "replay did not pause at stdin marker {idx} ({k})"
                );
                let c = &handle.control;
                match k.as_str() {
                    "user" => {
                        norm.input_sent();
                        c.write(&UserInput {
                            text: "replayed".into(),
                            content_blocks: Vec::new(),
                            uuid: String::new(),
                        })
                        .unwrap()
                    }
                    "interrupt" => assert!(c.interrupt().unwrap()),
                    "permission" => c
                        .respond_permission(
                            permission.as_deref().unwrap_or(""),
                            &PermissionDecision::Deny {
                                message: "replay".into(),
                            },
                        )
                        .unwrap(),
                    "close" => c.close_stdin(),
                    "control" => assert!(
                        c.control(&format!("replay-{idx}"), &serde_json::json!({}))
                            .unwrap()
                    ),
                    other => panic!("unexpected stdin marker {other}"),
                }
            }
            CassetteRecord::Exit { .. } => {}
        }
        idx += 1;
    }
    assert!(
        handle.stdout.recv().await.is_none(),
        "more lines than recorded"
    );
    let exit = handle.exited.await.unwrap();
    assert!(!handle.control.alive());
    (kinds, exit)
}
