//! The whole server, end to end, against the REAL claude CLI (2.1.197):
//! the generated Rust client talks gRPC to the server in-process on
//! 127.0.0.1:0 (real redb file in a tempdir), the server runs the CLI
//! through the claude adapters, and the CLI talks to the scripted fake
//! Messages API on loopback, so every test costs zero tokens.
//!
//! The fake model's reply is chosen by a directive in the prompt (`TEXT`,
//! `SLOW`, `BASH`, `WRITE`, `HANG`; see tests/fake-api/README.md).
//!
//! Every test ends with [`Harness::finish`]: every run_start has exactly
//! one run_end unless it is the live run, the Subscribe stream was gapless,
//! shutdown ends the live run, and the durable log agrees with the stream.
//!
//! Run: `cargo test -p agent-harness-server --test real_cli grpc::`.

use crate::support::cli_grpc;

use std::time::Duration;

use agent_harness_protocol::pb;
use agent_harness_protocol::pb::event::Payload;
use agent_harness_server::adapter::claude::PermissionMode;
use cli_grpc::{
    AdapterChoice, Events, Harness, Setup, assert_same_process, count, describe_all, eventually,
    kinds, run_starts, test_manager_options, texts, tool_results, transcript_has,
};
use nix::sys::signal::{Signal as NixSignal, kill};
use nix::unistd::Pid;
use serde_json::Value;

/// Sends `sig` to one pid (the CLI, from run_ready), from outside the server.
fn signal_pid(pid: u32, sig: NixSignal) {
    kill(Pid::from_raw(pid as i32), sig).unwrap_or_else(|e| panic!("kill({pid}, {sig}): {e}"));
}

/// Asserts `events` hold exactly one run_start: run `run`, started by a
/// Send that resumes the CLI session `resume_id`.
fn assert_one_resumed_start(events: &[pb::Event], run: &str, resume_id: &str) {
    let starts = run_starts(events);
    assert_eq!(starts.len(), 1, "{:?}", kinds(events));
    let (rs_ev, rs) = &starts[0];
    assert_eq!(rs_ev.run_id, run);
    assert_eq!(rs.trigger, "send");
    assert_eq!(
        rs.config.as_ref().map(|c| c.resume.as_str()),
        Some(resume_id),
        "the respawn resumes the ended run's CLI session"
    );
}

/// After the run that ended with `ended` (its run_end): Send `text`
/// (`TEXT <answer>`) starts a new run resuming `resume_id`, whose turn
/// answers `<answer>` without error. Returns the new run id and the events
/// after `ended`.
pub(super) async fn send_resumes(
    h: &Harness,
    ev: &Events,
    ended: &pb::Event,
    text: &str,
    resume_id: &str,
) -> (String, Vec<pb::Event>) {
    let run = h.send(&ended.session_id, text).await;
    assert_ne!(run, ended.run_id, "a new run");
    let (_, end) = ev.turn_end_after(ended.seq).await;
    assert!(!end.is_error, "{end:?}");
    let after = ev.since(ended.seq);
    assert_one_resumed_start(&after, &run, resume_id);
    let answer = text.strip_prefix("TEXT ").expect("a TEXT prompt");
    assert_eq!(texts(&after), answer);
    (run, after)
}

/// 1. First turn: run_start, input_sent, run_ready (cli 2.1.197), the
///    model's text, turn_end; then idle with the process alive.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn first_turn_streams_the_whole_lifecycle_and_leaves_the_process_alive() {
    let (h, ev, started) = Harness::started(Setup::default(), "s1", "TEXT hi").await;
    assert!(!started.run_id.is_empty());

    let (_, end) = ev.turn_end_after(0).await;
    assert!(!end.is_error, "{end:?}");
    let evs = ev.snapshot();
    let k = kinds(&evs);
    assert_eq!(
        &k[..3],
        ["run_start", "input_sent", "run_ready"],
        "lifecycle order: {k:?}"
    );
    assert_eq!(k.last(), Some(&"turn_end"), "{k:?}");
    assert!(k.contains(&"content"), "{k:?}");
    for e in &evs {
        assert_eq!(e.run_id, started.run_id, "every event carries the run id");
        assert_eq!(e.session_id, "s1");
    }
    let Some(Payload::RunStart(rs)) = &evs[0].payload else {
        unreachable!()
    };
    assert_eq!(rs.trigger, "start");
    assert_eq!(rs.adapter, "interactive");
    let Some(Payload::InputSent(input)) = &evs[1].payload else {
        unreachable!()
    };
    assert_eq!(input.text, "TEXT hi");
    assert_eq!(input.source(), pb::InputSource::Initial);
    let Some(Payload::RunReady(ready)) = &evs[2].payload else {
        unreachable!()
    };
    assert_eq!(ready.cli_version, cli_grpc::cli_version_under_test());
    assert!(ready.pid > 0);
    assert!(
        !ready.resume_id.is_empty(),
        "the CLI session id for --resume"
    );
    assert_eq!(started.process_id, format!("pid:{}", ready.pid));
    assert_eq!(texts(&evs), "hi");

    // The keep-alive process stays between turns.
    let s = h.assert_idle("s1", true).await;
    assert_eq!(s.run_id, started.run_id);
    assert_eq!(s.resume_id, ready.resume_id);
    assert_eq!(s.usage.as_ref().map(|u| u.turns), Some(1));
    assert_eq!(h.api().message_requests().len(), 1, "one model call");
    h.finish("s1", &ev).await;
}

/// 2. A follow-up Send goes to the same process: same run id, same pid,
///    no new run_start.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn follow_up_is_served_by_the_same_process() {
    let (h, ev, started) = Harness::started(Setup::default(), "s2", "TEXT first").await;
    let (_, ready) = ev.run_ready_after(0).await;
    let (first_end, _) = ev.turn_end_after(0).await;

    let run = h.send("s2", "TEXT second").await;
    assert_eq!(run, started.run_id, "Send answered by the live run");
    let (_, end) = ev.turn_end_after(first_end.seq).await;
    assert!(!end.is_error, "{end:?}");
    let after = ev.since(first_end.seq);
    assert_eq!(texts(&after), "second");
    assert_same_process(&after, ready.pid);
    assert_eq!(count(&after, |p| matches!(p, Payload::RunEnd(_))), 0);
    assert!(after.iter().all(|e| e.run_id == started.run_id));
    let Some(Payload::InputSent(input)) = &after[0].payload else {
        panic!("input_sent first: {:?}", kinds(&after))
    };
    assert_eq!(input.source(), pb::InputSource::User);
    assert_eq!(started.process_id, format!("pid:{}", ready.pid));

    let s = h.assert_idle("s2", true).await;
    assert_eq!(s.run_id, started.run_id);
    assert_eq!(s.usage.as_ref().map(|u| u.turns), Some(2));
    h.finish("s2", &ev).await;
}

/// 3. A tool call runs for real: Bash's own output comes back in the
///    tool_result and in the model's final text.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bash_tool_runs_and_its_real_output_comes_back() {
    let (h, ev, _) = Harness::started(Setup::default(), "s3", "BASH echo marker-123").await;
    let (_, end) = ev.turn_end_after(0).await;
    assert!(!end.is_error, "{end:?}");
    let evs = ev.snapshot();

    let tool_use = evs
        .iter()
        .find_map(|e| match &e.payload {
            Some(Payload::Content(c)) => c.blocks.iter().find(|b| b.r#type == "tool_use").cloned(),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no tool_use content: {:?}", kinds(&evs)));
    assert_eq!(tool_use.tool_name, "Bash");
    let command = tool_use
        .input
        .as_ref()
        .and_then(|i| i.fields.get("command"))
        .and_then(|v| match &v.kind {
            Some(pbjson_types::value::Kind::StringValue(s)) => Some(s.clone()),
            _ => None,
        });
    assert_eq!(command.as_deref(), Some("echo marker-123"));

    let results = tool_results(&evs);
    let result = results
        .iter()
        .find(|r| r.tool_use_id == tool_use.tool_use_id)
        .unwrap_or_else(|| panic!("no tool_result for {}: {results:?}", tool_use.tool_use_id));
    assert!(!result.is_error, "{result:?}");
    assert!(result.text.contains("marker-123"), "{result:?}");
    let final_text = texts(&evs);
    assert!(
        final_text.contains("Tool step finished.") && final_text.contains("marker-123"),
        "{final_text:?}"
    );
    h.assert_idle("s3", true).await;
    h.finish("s3", &ev).await;
}

/// 4. Stop mid-turn interrupts the turn and keeps the process: turn_end
///    (error, aborted_streaming), idle, no run_end; the next Send is served
///    by the same pid.
///
/// Stop is sent once the fake API is streaming the reply (40 chunks, 200 ms
/// apart): the CLI (without --include-partial-messages) writes an
/// `assistant` line only when a block is complete, so there is no content
/// event to wait for before the interrupt; the partial text arrives after it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stop_mid_turn_interrupts_and_keeps_the_process() {
    let (h, ev, started) = Harness::started(Setup::default(), "s4", "SLOW 40 200").await;
    let (_, ready) = ev.run_ready_after(0).await;
    eventually("the SLOW reply to stream", || h.api().active_streams() == 1).await;
    // A few ticks in: the reply's first deltas have gone out.
    eventually("a few SSE events of the reply", || {
        h.api().sse_events_sent() >= 6
    })
    .await;

    assert!(h.stop("s4").await, "a turn was in progress");
    let (stop, sr) = ev.stop_requested_after(0).await;
    assert_eq!(sr.source, "user");
    let (end_ev, end) = ev.turn_end_after(stop.seq).await;
    assert!(end.is_error, "{end:?}");
    assert_eq!(end.terminal_reason, "aborted_streaming", "{end:?}");
    let partial = texts(&ev.since(stop.seq));
    assert!(partial.starts_with("tick 0"), "partial text: {partial:?}");
    assert!(
        !partial.contains("tick 39"),
        "the reply was cut: {partial:?}"
    );
    eventually("the CLI to drop the reply stream", || {
        h.api().active_streams() == 0
    })
    .await;

    // An interrupt keeps the process.
    h.assert_idle("s4", true).await;
    assert_eq!(
        count(&ev.snapshot(), |p| matches!(p, Payload::RunEnd(_))),
        0
    );

    let run = h.send("s4", "TEXT again").await;
    assert_eq!(run, started.run_id);
    let (_, end) = ev.turn_end_after(end_ev.seq).await;
    assert!(!end.is_error, "{end:?}");
    let after = ev.since(end_ev.seq);
    assert!(texts(&after).ends_with("again"), "{}", texts(&after));
    assert_same_process(&after, ready.pid);
    h.assert_idle("s4", true).await;
    h.finish("s4", &ev).await;
}

/// 5. Stop right after Start, before the CLI announced itself. Two
///    outcomes are right, depending on how long the CLI takes to boot
///    (it reads stdin only after ~0.5 s, several seconds on a loaded
///    machine):
///    - the CLI answers the interrupt within the stop grace: the turn ends
///      (error, aborted) and the process stays;
///    - it does not: the ladder signals it and the run ends STOPPED, once.
///    Either way the session goes idle and the next Send works, on the
///    same process or on a resumed one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stop_during_start_up_ends_cleanly() {
    let (h, ev, started) = Harness::started(Setup::default(), "s5", "TEXT hi").await;
    assert!(
        h.stop("s5").await,
        "the start-up turn counts as in progress"
    );
    let ready_before_stop = ev
        .snapshot()
        .iter()
        .any(|e| matches!(e.payload, Some(Payload::RunReady(_))));

    let (stop, _) = ev.stop_requested_after(0).await;
    let ended = ev.turn_or_run_end_after(stop.seq).await;
    if let Some(Payload::TurnEnd(t)) = &ended.payload {
        assert!(t.is_error, "an interrupted start-up turn: {t:?}");
    }
    h.wait_session("s5", "idle", |s| s.status() == pb::SessionStatus::Idle)
        .await;

    let head = ev.head();
    let run = h.send("s5", "TEXT after").await;
    let (_, end) = ev.turn_end_after(head).await;
    assert!(!end.is_error, "{end:?}");
    assert!(texts(&ev.since(head)).ends_with("after"));

    let evs = ev.snapshot();
    let first_run_end = evs.iter().find_map(|e| match &e.payload {
        Some(Payload::RunEnd(r)) if e.run_id == started.run_id => Some(r.clone()),
        _ => None,
    });
    eprintln!(
        "stop during start-up: ready before stop: {ready_before_stop}; ended by {}; \
         first run ended: {first_run_end:?}\n{}",
        cli_grpc::kind(&ended),
        describe_all(&evs)
    );
    match first_run_end {
        None => assert_eq!(run, started.run_id, "the surviving process takes the Send"),
        Some(r) => {
            assert_eq!(r.reason(), pb::RunEndReason::Stopped, "{r:?}");
            assert_ne!(run, started.run_id, "a resumed run takes the Send");
            let starts = run_starts(&evs);
            assert_eq!(starts.len(), 2);
            assert_eq!(starts[1].1.trigger, "send");
        }
    }
    h.finish("s5", &ev).await;
}

/// 6. The CLI killed with SIGKILL from outside: run_end PROCESS_EXIT with
///    the signal, idle, dead; the next Send respawns with --resume and works.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkilled_cli_ends_the_run_and_send_resumes_it() {
    let (h, ev, started) = Harness::started(Setup::default(), "s6", "TEXT before kill").await;
    let (_, ready) = ev.run_ready_after(0).await;
    let (first_end, _) = ev.turn_end_after(0).await;

    // SIGKILL right after the result can beat the CLI's asynchronous
    // transcript write, and then nothing is left to resume (observed:
    // "No conversation found with session ID"). The scenario under test is
    // a crash between turns, so wait until the turn is persisted.
    eventually("the CLI to persist the first turn", || {
        transcript_has(h.home.path(), &ready.resume_id, "before kill")
    })
    .await;
    signal_pid(ready.pid, NixSignal::SIGKILL);
    let (end_ev, end) = ev.run_end_after(first_end.seq).await;
    assert_eq!(end_ev.run_id, started.run_id);
    assert_eq!(end.reason(), pb::RunEndReason::ProcessExit, "{end:?}");
    assert_eq!(end.signal, "SIGKILL");
    assert_eq!(end.exit_code, None);
    assert!(!end.inferred);
    let s = h.assert_idle("s6", false).await;
    assert_eq!(s.resume_id, ready.resume_id);

    let (run, _) = send_resumes(&h, &ev, &end_ev, "TEXT after kill", &ready.resume_id).await;
    let (_, ready2) = ev.run_ready_after(end_ev.seq).await;
    assert_ne!(ready2.pid, ready.pid);
    let s = h.assert_idle("s6", true).await;
    assert_eq!(s.run_id, run);
    h.finish("s6", &ev).await;
}

/// 7. The idle timeout ends a keep-alive process that has no turn
///    (run_end IDLE_TIMEOUT); the next Send resumes the conversation.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_timeout_ends_the_process_and_send_resumes() {
    let idle = Duration::from_secs(2);
    let (h, ev, started) = Harness::started(
        Setup {
            manager: with_idle_timeout(idle),
            ..Setup::default()
        },
        "s7",
        "TEXT idle soon",
    )
    .await;
    let (_, ready) = ev.run_ready_after(0).await;
    let (turn_end, _) = ev.turn_end_after(0).await;
    let turn_end_at = tokio::time::Instant::now();

    let (end_ev, end) = ev.run_end_after(turn_end.seq).await;
    let waited = turn_end_at.elapsed();
    assert_eq!(end_ev.run_id, started.run_id);
    assert_eq!(end.reason(), pb::RunEndReason::IdleTimeout, "{end:?}");
    assert!(
        waited >= idle - Duration::from_millis(300),
        "ended {waited:?} after the turn, before the {idle:?} idle timeout"
    );
    let between = ev.since(turn_end.seq);
    assert!(
        between.iter().any(|e| matches!(&e.payload,
            Some(Payload::StopRequested(s)) if s.source == "idle")),
        "stop_requested{{idle}} precedes the run_end: {:?}",
        kinds(&between)
    );
    h.assert_idle("s7", false).await;

    send_resumes(&h, &ev, &end_ev, "TEXT back again", &ready.resume_id).await;
    h.finish("s7", &ev).await;
}

/// The test timers with an idle timeout.
fn with_idle_timeout(idle: Duration) -> agent_harness_server::manager::ManagerOptions {
    agent_harness_server::manager::ManagerOptions {
        idle_timeout: idle,
        ..test_manager_options()
    }
}

/// 8a. Permission relay, allow: permission_requested for Write; the answer
///     resolves it (by "user") and the CLI writes the file in the cwd.
///     Then deny with a message on the same process: the tool_result is an
///     error carrying that message.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn permission_relay_allow_writes_the_file_and_deny_returns_the_message() {
    let (h, ev, started) = Harness::started(Setup::default(), "s8", "WRITE out.txt hello").await;

    // Allow.
    let (req, p) = ev.permission_requested_after(0).await;
    assert_eq!(p.tool_name, "Write");
    assert!(!p.request_id.is_empty());
    let s = h.get("s8").await;
    assert_eq!(s.pending_permissions, 1);
    let path = h.work.path().join("out.txt");
    assert!(!path.exists(), "nothing written before the answer");
    h.respond("s8", &p.request_id, true, "")
        .await
        .expect("RespondPermission allow");
    let (resolved, r) = ev.permission_resolved_after(req.seq).await;
    assert_eq!(r.request_id, p.request_id);
    assert!(r.allow);
    assert_eq!(r.by, "user");
    let (allow_end, end) = ev.turn_end_after(resolved.seq).await;
    assert!(!end.is_error, "{end:?}");
    assert_eq!(
        std::fs::read_to_string(&path).expect("the CLI wrote out.txt in the cwd"),
        "hello\n"
    );
    let results = tool_results(&ev.since(req.seq));
    assert!(results.iter().any(|t| !t.is_error), "{results:?}");
    // Answering again: the request is no longer pending.
    let again = h.respond("s8", &p.request_id, true, "").await;
    assert_eq!(
        again.expect_err("a second answer").code(),
        tonic::Code::NotFound
    );

    // Deny, on the same process.
    let run = h.send("s8", "WRITE denied.txt nope").await;
    assert_eq!(run, started.run_id);
    let (req, p) = ev.permission_requested_after(allow_end.seq).await;
    let deny_message = "not in this directory, please";
    h.respond("s8", &p.request_id, false, deny_message)
        .await
        .expect("RespondPermission deny");
    let (_, end) = ev.turn_end_after(req.seq).await;
    let after = ev.since(req.seq);
    let resolved = after
        .iter()
        .find_map(|e| match &e.payload {
            Some(Payload::PermissionResolved(r)) => Some(r.clone()),
            _ => None,
        })
        .expect("permission_resolved");
    assert!(!resolved.allow);
    assert_eq!(resolved.by, "user");
    assert_eq!(resolved.message, deny_message);
    let results = tool_results(&after);
    let denied = results
        .iter()
        .find(|t| t.is_error)
        .unwrap_or_else(|| panic!("an error tool_result: {results:?}"));
    assert!(denied.text.contains(deny_message), "{denied:?}");
    assert!(!h.work.path().join("denied.txt").exists());
    assert!(!end.is_error, "the model goes on after a denial: {end:?}");
    let s = h.assert_idle("s8", true).await;
    assert_eq!(s.pending_permissions, 0);
    h.finish("s8", &ev).await;
}

/// 8b. An unanswered permission request is denied after
///     --permission-timeout (permission_resolved by "timeout") and the turn
///     completes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn permission_timeout_denies_and_the_turn_completes() {
    let (h, ev, _) = Harness::started(
        Setup {
            manager: agent_harness_server::manager::ManagerOptions {
                permission_timeout: Duration::from_secs(1),
                ..test_manager_options()
            },
            ..Setup::default()
        },
        "s8t",
        "WRITE late.txt hello",
    )
    .await;
    let (req, p) = ev.permission_requested_after(0).await;
    let (resolved, r) = ev.permission_resolved_after(req.seq).await;
    assert_eq!(r.request_id, p.request_id);
    assert!(!r.allow);
    assert_eq!(r.by, "timeout");
    let (_, end) = ev.turn_end_after(resolved.seq).await;
    assert!(!end.is_error, "the turn completes: {end:?}");
    let results = tool_results(&ev.since(req.seq));
    assert!(
        results
            .iter()
            .any(|t| t.is_error && t.text.contains("timed out")),
        "{results:?}"
    );
    assert!(!h.work.path().join("late.txt").exists());
    let late = h.respond("s8t", &p.request_id, true, "").await;
    assert_eq!(
        late.expect_err("an answer after the timeout").code(),
        tonic::Code::NotFound
    );
    let s = h.assert_idle("s8t", true).await;
    assert_eq!(s.pending_permissions, 0);
    h.finish("s8t", &ev).await;
}

/// 9. Resume after the process exited (SIGTERM from outside, between
///    turns): Send spawns a new run with --resume, and the fake API's
///    request for that turn carries the first turn's messages, which proves
///    the CLI resumed the conversation rather than starting a new one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_after_the_process_exited_resumes_the_conversation() {
    let (h, ev, started) = Harness::started(Setup::default(), "s9", "TEXT one").await;
    let (_, ready) = ev.run_ready_after(0).await;
    let (first_end, _) = ev.turn_end_after(0).await;

    signal_pid(ready.pid, NixSignal::SIGTERM);
    let (end_ev, end) = ev.run_end_after(first_end.seq).await;
    assert_eq!(end_ev.run_id, started.run_id);
    eprintln!("SIGTERM between turns: {end:?}");
    assert_ne!(end.reason(), pb::RunEndReason::Unspecified);
    h.assert_idle("s9", false).await;

    h.api().clear_requests();
    send_resumes(&h, &ev, &end_ev, "TEXT two", &ready.resume_id).await;

    let calls = h.api().message_requests();
    assert_eq!(calls.len(), 1, "one model call for the resumed turn");
    let body = calls[0].body.clone().expect("a JSON body");
    let convo = conversation_text(&body);
    let one = convo
        .iter()
        .position(|(role, t)| role == "user" && t.contains("TEXT one"))
        .unwrap_or_else(|| panic!("the first prompt is in the resumed request: {convo:#?}"));
    let answer = convo
        .iter()
        .position(|(role, t)| role == "assistant" && t.trim() == "one")
        .unwrap_or_else(|| panic!("the first answer is in the resumed request: {convo:#?}"));
    let two = convo
        .iter()
        .position(|(role, t)| role == "user" && t.contains("TEXT two"))
        .unwrap_or_else(|| panic!("the new prompt is in the request: {convo:#?}"));
    assert!(one < answer && answer < two, "{convo:#?}");
    h.finish("s9", &ev).await;
}

/// (role, text) of every text block of a Messages API request's messages.
pub(super) fn conversation_text(body: &Value) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for m in body["messages"].as_array().into_iter().flatten() {
        let role = m["role"].as_str().unwrap_or_default().to_owned();
        match &m["content"] {
            Value::String(s) => out.push((role.clone(), s.clone())),
            Value::Array(blocks) => {
                for b in blocks {
                    if let Some(t) = b["text"].as_str() {
                        out.push((role.clone(), t.to_owned()));
                    }
                }
            }
            _ => {}
        }
    }
    out
}

/// 10. The one-shot adapter: each turn is one `--print` process that ends
///     COMPLETED with exit 0; Send starts a new run with --resume.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_shot_adapter_completes_each_turn_and_send_resumes() {
    let (h, ev, started) = Harness::started(
        Setup {
            adapter: AdapterChoice::OneShot,
            permissions: PermissionMode::Settings,
            ..Setup::default()
        },
        "s10",
        "TEXT one-shot",
    )
    .await;
    let (_, ready) = ev.run_ready_after(0).await;
    assert_eq!(ready.cli_version, cli_grpc::cli_version_under_test());
    let (end_ev, end) = ev.run_end_after(0).await;
    assert_eq!(end_ev.run_id, started.run_id);
    assert_eq!(end.reason(), pb::RunEndReason::Completed, "{end:?}");
    assert_eq!(end.exit_code, Some(0));
    let first = ev.snapshot();
    assert_eq!(texts(&first), "one-shot");
    assert_eq!(count(&first, |p| matches!(p, Payload::TurnEnd(_))), 1);
    let Some(Payload::RunStart(rs)) = &first[0].payload else {
        panic!("{:?}", kinds(&first))
    };
    assert_eq!(rs.adapter, "cli");
    h.assert_idle("s10", false).await;

    let run = h.send("s10", "TEXT again").await;
    assert_ne!(run, started.run_id);
    let (end2_ev, end2) = ev.run_end_after(end_ev.seq).await;
    assert_eq!(end2_ev.run_id, run);
    assert_eq!(end2.reason(), pb::RunEndReason::Completed, "{end2:?}");
    assert_eq!(end2.exit_code, Some(0));
    let after = ev.since(end_ev.seq);
    assert_one_resumed_start(&after, &run, &ready.resume_id);
    assert_eq!(texts(&after), "again");
    let calls = h.api().message_requests();
    let last = calls
        .last()
        .and_then(|c| c.body.clone())
        .expect("a request");
    assert!(
        conversation_text(&last)
            .iter()
            .any(|(r, t)| r == "user" && t.contains("TEXT one-shot")),
        "the second process resumed the first conversation"
    );
    let s = h.get("s10").await;
    assert!(!s.process_alive);
    assert_eq!(s.usage.as_ref().map(|u| u.turns), Some(2));
    h.finish("s10", &ev).await;
}

/// 11. HANG + Stop: the model request never answers; Stop's interrupt (or
///     the signal ladder, if the interrupt is not enough) ends the turn,
///     the fake sees the request dropped, and every run ends exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stop_during_a_hung_request_ends_the_turn() {
    let (h, ev, started) = Harness::started(Setup::default(), "s11", "HANG").await;
    ev.run_ready_after(0).await;
    eventually("the HANG request to be open", || {
        h.api().active_streams() == 1
    })
    .await;
    let s = h.get("s11").await;
    assert_eq!(s.status(), pb::SessionStatus::Streaming);

    assert!(h.stop("s11").await);
    let (stop, _) = ev.stop_requested_after(0).await;
    let ended = ev.turn_or_run_end_after(stop.seq).await;
    match &ended.payload {
        Some(Payload::TurnEnd(t)) => {
            assert!(t.is_error, "{t:?}");
            assert_eq!(t.terminal_reason, "aborted_streaming", "{t:?}");
        }
        Some(Payload::RunEnd(r)) => {
            assert_eq!(r.reason(), pb::RunEndReason::Stopped, "{r:?}")
        }
        _ => unreachable!(),
    }
    eventually("the CLI to drop the hung request", || {
        h.api().active_streams() == 0
    })
    .await;
    let s = h
        .wait_session("s11", "idle", |s| s.status() == pb::SessionStatus::Idle)
        .await;
    let evs = ev.snapshot();
    assert_eq!(
        count(&evs, |p| matches!(p, Payload::StopRequested(_))),
        1,
        "{:?}",
        kinds(&evs)
    );
    if s.process_alive {
        // The interrupt worked: the same process takes the next turn.
        let head = ev.head();
        let run = h.send("s11", "TEXT unstuck").await;
        assert_eq!(run, started.run_id);
        let (_, end) = ev.turn_end_after(head).await;
        assert!(!end.is_error, "{end:?}");
    }
    h.finish("s11", &ev).await;
}

/// 12. Stop while idle does nothing (StopResponse.stopping is "false when
///     nothing was running"; there is no turn to stop): no stop_requested,
///     the keep-alive process stays, and the next Send is served by it.
///     This also makes Stop idempotent: a second click that lands after a
///     fast interrupt ended the turn must not end the process.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stop_while_idle_does_nothing_and_keeps_the_process() {
    let (h, ev, started) = Harness::started(Setup::default(), "s12", "TEXT idle now").await;
    let (first_end, _) = ev.turn_end_after(0).await;
    h.assert_idle("s12", true).await;

    let stopping = h.stop("s12").await;
    // A stop that began would have appended stop_requested before Stop
    // answered: the log's head has not moved past the turn's end.
    assert_eq!(h.get("s12").await.head_seq, first_end.seq);
    let after = ev.since(first_end.seq);
    assert!(
        after.is_empty(),
        "Stop while idle must append nothing: {:?}",
        kinds(&after)
    );
    assert!(!stopping, "nothing was running");
    let s = h.get("s12").await;
    assert!(s.process_alive, "Stop while idle must not end the process");

    let run = h.send("s12", "TEXT still here").await;
    assert_eq!(run, started.run_id);
    let (_, end) = ev.turn_end_after(first_end.seq).await;
    assert!(!end.is_error, "{end:?}");
    h.finish("s12", &ev).await;
}
