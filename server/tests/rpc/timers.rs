//! The run task's timers on tokio's paused clock: the idle timeout, the
//! permission timeout and the stop ladder fire exactly when due and not
//! before, input restarts the idle clock, and an idle deadline passes
//! without ending the process while background tasks run.
//!
//! The clock is driven by hand: a spinning task keeps the runtime busy so
//! tokio never auto-advances it (the log's writer is a real thread, and an
//! auto-advance while an append is in flight would move the clock by an
//! unrelated timer). Everything before the first `advance` happens at the
//! start instant `t0`, so each timer's recorded firing time is exactly
//! `t0 + the advances`. The manager drives the in-process scripted CLI over
//! an in-memory log; no sockets.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use agent_harness_protocol::pb;
use agent_harness_protocol::pb::event::Payload;
use agent_harness_protocol::pb::subscribe_response::Kind;
use agent_harness_server::adapter::{ProcessAdapter, StdoutLine};
use agent_harness_server::log::{EventLogs, LogOptions};
use agent_harness_server::manager::{ManagerOptions, SessionManager};
use futures::StreamExt;
use serde_json::json;
use tokio::time::{Instant, advance};

use crate::support::common::{kind, kinds};
use crate::support::scripted::{ScriptedAdapter, ScriptedBehavior};
use crate::support::server::{
    InjectingAdapter, line_text, prompt, run_end, send_request, start_request, stop_request,
};

const IDLE: Duration = Duration::from_secs(30 * 60);
const PERMISSION: Duration = Duration::from_secs(5 * 60);
const STOP_GRACE: Duration = Duration::from_secs(5);
const KILL_GRACE: Duration = Duration::from_secs(2);
/// The step taken just short of a deadline, to check it has not fired.
const SHORT: Duration = Duration::from_millis(1);

fn opts(idle: Duration) -> ManagerOptions {
    ManagerOptions {
        idle_timeout: idle,
        permission_timeout: PERMISSION,
        stop_grace: STOP_GRACE,
        kill_grace: KILL_GRACE,
        ..ManagerOptions::default()
    }
}

/// The scripted CLI with no pause between lines (a pause is a timer, and
/// this clock only moves by hand).
pub(super) fn behavior() -> ScriptedBehavior {
    ScriptedBehavior {
        line_delay: Duration::ZERO,
        ..ScriptedBehavior::default()
    }
}

/// A manager over an in-memory log, and the hand-driven clock.
pub(super) struct Rig {
    pub(super) m: SessionManager,
    spinner: tokio::task::JoinHandle<()>,
    t0: Instant,
}

impl Rig {
    pub(super) fn new(adapter: Arc<dyn ProcessAdapter>, opts: ManagerOptions) -> Self {
        let logs =
            EventLogs::open(crate::support::server::test_store(), LogOptions::default()).unwrap();
        // Never idle, so never auto-advanced.
        let spinner = tokio::spawn(async {
            loop {
                tokio::task::yield_now().await;
            }
        });
        Self {
            m: SessionManager::new(adapter, logs, opts),
            spinner,
            t0: Instant::now(),
        }
    }

    /// Lets the session's run task handle everything due now. On the
    /// current-thread runtime a command round trip runs its loop: a timer
    /// that came due is taken on the loop's next turn, before a second
    /// command is answered (an unknown permission id: a no-op).
    pub(super) async fn settle(&self, session_id: &str) {
        for _ in 0..3 {
            let _ = real_time(self.m.respond_permission(pb::RespondPermissionRequest {
                session_id: session_id.into(),
                request_id: "probe".into(),
                ..Default::default()
            }))
            .await;
        }
    }

    /// The log up to its first event of kind `k`, once the run task has
    /// seen it too.
    pub(super) async fn log_until(&self, session_id: &str, k: &str, nth: usize) -> Vec<pb::Event> {
        let mut stream = Box::pin(self.m.logs().subscribe(session_id, 0).await.unwrap());
        let mut events = Vec::new();
        let mut seen = 0;
        real_time(async {
            while let Some(msg) = stream.next().await {
                if let Some(Kind::Event(e)) = msg.kind {
                    let hit = kind(&e) == k;
                    events.push(e);
                    if hit {
                        seen += 1;
                        if seen == nth {
                            return;
                        }
                    }
                }
            }
            panic!("stream ended before {k}");
        })
        .await;
        self.settle(session_id).await;
        events
    }

    pub(super) async fn done(self) {
        self.spinner.abort();
        self.m.shutdown().await;
    }
}

/// `fut`, or a panic after 30 s of real time (the paused clock cannot
/// bound a wait that never ends).
async fn real_time<T>(fut: impl Future<Output = T>) -> T {
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    std::thread::spawn(move || {
        std::thread::sleep(Duration::from_secs(30));
        let _ = tx.send(());
    });
    tokio::select! {
        out = fut => out,
        _ = rx => panic!("no progress within 30 s of real time"),
    }
}

pub(super) fn find<'a>(events: &'a [pb::Event], k: &str) -> &'a pb::Event {
    events
        .iter()
        .find(|e| kind(e) == k)
        .unwrap_or_else(|| panic!("no {k} in {:?}", kinds(events)))
}

pub(super) fn stop_source(e: &pb::Event) -> &str {
    match &e.payload {
        Some(Payload::StopRequested(s)) => &s.source,
        _ => "",
    }
}

/// Whether the adapter has seen `call`.
fn called(a: &ScriptedAdapter, call: &str) -> bool {
    a.record().calls.iter().any(|c| c == call)
}

/// When the adapter saw `call` (waiting for it).
async fn call_time(a: &ScriptedAdapter, call: &str) -> Instant {
    real_time(a.wait_for(|_, c| c == call)).await
}

/// Advances to `due - SHORT` (checking `call` has not happened), then to
/// `due`, and returns when `call` happened.
async fn fires_at(rig: &Rig, a: &ScriptedAdapter, sid: &str, call: &str, due: Instant) -> Instant {
    let now = Instant::now();
    assert!(due > now + SHORT, "deadline {due:?} already near");
    advance(due - SHORT - now).await;
    rig.settle(sid).await;
    assert!(!called(a, call), "{call} before it was due");
    advance(SHORT).await;
    rig.settle(sid).await;
    call_time(a, call).await
}

#[tokio::test(start_paused = true)]
async fn idle_timeout_ends_a_quiet_process_when_due_and_not_before() {
    let a = ScriptedAdapter::new(behavior());
    let rig = Rig::new(Arc::new(a.clone()), opts(IDLE));
    rig.m
        .start(start_request("idle", prompt("hello")))
        .await
        .unwrap();
    rig.log_until("idle", "turn_end", 1).await;
    // The idle path ends the process by closing stdin (the CLI's own exit).
    let closed = fires_at(&rig, &a, "idle", "close_stdin", rig.t0 + IDLE).await;
    assert_eq!(closed, rig.t0 + IDLE);
    let events = rig.log_until("idle", "run_end", 1).await;
    assert_eq!(stop_source(find(&events, "stop_requested")), "idle");
    let end = events.last().unwrap();
    assert_eq!(run_end(end).reason, pb::RunEndReason::IdleTimeout as i32);
    rig.done().await;
}

#[tokio::test(start_paused = true)]
async fn input_restarts_the_idle_clock() {
    let a = ScriptedAdapter::new(behavior());
    let rig = Rig::new(Arc::new(a.clone()), opts(IDLE));
    rig.m
        .start(start_request("again", prompt("one")))
        .await
        .unwrap();
    rig.log_until("again", "turn_end", 1).await;
    // Most of an idle period passes, then a message: the clock restarts.
    advance(IDLE - Duration::from_secs(60)).await;
    rig.m.send(send_request("again", "two", "")).await.unwrap();
    rig.log_until("again", "turn_end", 2).await;
    let restarted = rig.t0 + IDLE - Duration::from_secs(60) + IDLE;
    // The first deadline passes without effect...
    advance(Duration::from_secs(61)).await;
    rig.settle("again").await;
    assert!(
        !called(&a, "close_stdin"),
        "ended on the first idle deadline"
    );
    // ...and the process ends one idle period after the second turn.
    let closed = fires_at(&rig, &a, "again", "close_stdin", restarted).await;
    assert_eq!(closed, restarted);
    let events = rig.log_until("again", "run_end", 1).await;
    assert_eq!(
        run_end(events.last().unwrap()).reason,
        pb::RunEndReason::IdleTimeout as i32
    );
    rig.done().await;
}

/// Frames of CLI 2.1.197 (as in cassettes/bg_bash), keyed by the turn's text.
pub(super) fn task_frames(line: &StdoutLine) -> Vec<StdoutLine> {
    let text = line_text(line);
    if !text.contains("\"type\":\"assistant\"") {
        return vec![];
    }
    let frame = if text.contains("BGSTART") {
        json!({"type":"system","subtype":"task_started","task_id":"bscripted1",
            "tool_use_id":"toolu_bg1","description":"Background command",
            "task_type":"local_bash","uuid":"u-1","session_id":"s"})
    } else if text.contains("BGDONE") {
        json!({"type":"system","subtype":"task_notification","task_id":"bscripted1",
            "tool_use_id":"toolu_bg1","status":"completed","output_file":"/tmp/bscripted1.output",
            "summary":"Background command completed (exit code 0)","session_id":"s","uuid":"u-2"})
    } else {
        return vec![];
    };
    vec![StdoutLine::Line(frame.to_string())]
}

/// A control request awaiting the CLI's answer holds the idle clock: the
/// process is not ended for idleness before the request is answered or
/// times out (a process spawned to answer RewindFiles, slow to start, was
/// ended by the idle timeout before it could answer).
#[tokio::test(start_paused = true)]
async fn a_pending_control_request_holds_the_idle_timeout() {
    use crate::support::scripted::SLOW_MODEL;
    use agent_harness_server::manager::{CONTROL_TIMEOUT, SettingChange};

    let idle = CONTROL_TIMEOUT / 2;
    let a = ScriptedAdapter::new(behavior());
    let rig = Rig::new(Arc::new(a.clone()), opts(idle));
    rig.m
        .start(start_request("held", prompt("one")))
        .await
        .unwrap();
    rig.log_until("held", "turn_end", 1).await;
    let m = rig.m.clone();
    let slow = tokio::spawn(async move {
        m.change_setting("held", None, SettingChange::Model(SLOW_MODEL.to_owned()))
            .await
    });
    let sent = call_time(&a, "control:set_model").await;
    assert!(sent < rig.t0 + idle, "asked before the idle deadline");
    // The idle deadline passes while the request waits: the process stays;
    // it ends for idleness only once the request has timed out.
    let closed = fires_at(&rig, &a, "held", "close_stdin", sent + CONTROL_TIMEOUT).await;
    assert_eq!(closed, sent + CONTROL_TIMEOUT);
    assert!(
        real_time(slow).await.unwrap().is_err(),
        "the request timed out"
    );
    let events = rig.log_until("held", "run_end", 1).await;
    assert_eq!(stop_source(find(&events, "stop_requested")), "idle");
    rig.done().await;
}

/// A control request and its answer are activity, as input is: the idle
/// clock restarts (RewindFiles previews, then rewinds, on a process it
/// spawned; a slow start must not leave the second request without one).
#[tokio::test(start_paused = true)]
async fn an_answered_control_request_restarts_the_idle_clock() {
    let a = ScriptedAdapter::new(behavior());
    let rig = Rig::new(Arc::new(a.clone()), opts(IDLE));
    rig.m
        .start(start_request("ctl-idle", prompt("one")))
        .await
        .unwrap();
    rig.log_until("ctl-idle", "turn_end", 1).await;
    advance(IDLE - Duration::from_secs(60)).await;
    // A request that records nothing in the log (as a RewindFiles preview).
    let head = rig.m.get("ctl-idle").await.unwrap().head_seq;
    real_time(
        rig.m
            .control("ctl-idle", json!({"subtype": "get_context_usage"})),
    )
    .await
    .unwrap();
    assert_eq!(rig.m.get("ctl-idle").await.unwrap().head_seq, head);
    let restarted = rig.t0 + IDLE - Duration::from_secs(60) + IDLE;
    let closed = fires_at(&rig, &a, "ctl-idle", "close_stdin", restarted).await;
    assert_eq!(closed, restarted);
    rig.done().await;
}

#[tokio::test(start_paused = true)]
async fn idle_timeout_waits_for_running_background_tasks() {
    let scripted = ScriptedAdapter::new(behavior());
    let adapter = InjectingAdapter::new(scripted.clone(), task_frames);
    let rig = Rig::new(Arc::new(adapter), opts(IDLE));
    let started = rig
        .m
        .start(start_request("bg", prompt("BGSTART a job")))
        .await
        .unwrap();
    let events = rig.log_until("bg", "turn_end", 1).await;
    assert!(kinds(&events).contains(&"task_started"));

    // Ten idle deadlines pass with the task running: the process stays.
    for _ in 0..10 {
        advance(IDLE).await;
        rig.settle("bg").await;
    }
    let s = rig.m.get("bg").await.unwrap();
    assert!(s.process_alive, "ended while a background task ran: {s:?}");
    assert_eq!(s.status, pb::SessionStatus::Idle as i32);
    assert!(!called(&scripted, "close_stdin"), "the idle path began");

    // The task finishes; now the idle timeout ends the process, one full
    // idle period after that turn.
    let sent_to = rig
        .m
        .send(send_request("bg", "BGDONE check", ""))
        .await
        .unwrap()
        .run_id;
    assert_eq!(sent_to, started.run_id);
    rig.log_until("bg", "turn_end", 2).await;
    let due = Instant::now() + IDLE;
    let closed = fires_at(&rig, &scripted, "bg", "close_stdin", due).await;
    assert_eq!(closed, due);
    let events = rig.log_until("bg", "run_end", 1).await;
    let k = kinds(&events);
    assert!(k.contains(&"task_notification"), "{k:?}");
    assert_eq!(k.iter().filter(|k| **k == "stop_requested").count(), 1);
    let idle_stop = find(&events, "stop_requested");
    assert_eq!(stop_source(idle_stop), "idle");
    let last_turn_end = events.iter().rev().find(|e| kind(e) == "turn_end").unwrap();
    assert!(
        idle_stop.seq > last_turn_end.seq,
        "the idle stop came after the task's turn, not during the wait"
    );
    assert_eq!(
        run_end(events.last().unwrap()).reason,
        pb::RunEndReason::IdleTimeout as i32
    );
    rig.done().await;
}

#[tokio::test(start_paused = true)]
async fn an_unanswered_permission_request_is_denied_when_due() {
    let a = ScriptedAdapter::new(behavior());
    let rig = Rig::new(Arc::new(a.clone()), opts(Duration::ZERO));
    rig.m
        .start(start_request("perm", prompt("PERMISSION please")))
        .await
        .unwrap();
    let events = rig.log_until("perm", "permission_requested", 1).await;
    let Some(Payload::PermissionRequested(req)) = &find(&events, "permission_requested").payload
    else {
        unreachable!()
    };
    let deny = format!("permission:{}:deny", req.request_id);
    let denied = fires_at(&rig, &a, "perm", &deny, rig.t0 + PERMISSION).await;
    assert_eq!(denied, rig.t0 + PERMISSION);
    let events = rig.log_until("perm", "permission_resolved", 1).await;
    let Some(Payload::PermissionResolved(res)) = &find(&events, "permission_resolved").payload
    else {
        unreachable!()
    };
    assert_eq!(
        (res.request_id.as_str(), res.allow, res.by.as_str()),
        (req.request_id.as_str(), false, "timeout")
    );
    // No longer answerable.
    let late = rig
        .m
        .respond_permission(pb::RespondPermissionRequest {
            session_id: "perm".into(),
            request_id: req.request_id.clone(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert!(
        late.to_string().contains("no pending permission request"),
        "{late}"
    );
    rig.done().await;
}

#[tokio::test(start_paused = true)]
async fn the_stop_ladder_escalates_when_due() {
    let a = ScriptedAdapter::new(ScriptedBehavior {
        honor_interrupt: false,
        ignore_sigint: true,
        ignore_sigterm: true,
        ..behavior()
    });
    let rig = Rig::new(Arc::new(a.clone()), opts(Duration::ZERO));
    rig.m
        .start(start_request("deaf", prompt("HANG forever")))
        .await
        .unwrap();
    rig.log_until("deaf", "content", 1).await;
    assert!(rig.m.stop(stop_request("deaf", "")).await.unwrap().stopping);
    let interrupt = call_time(&a, "interrupt").await;
    assert_eq!(interrupt, rig.t0);
    let int = fires_at(&rig, &a, "deaf", "signal:Int", interrupt + STOP_GRACE).await;
    assert_eq!(int, interrupt + STOP_GRACE);
    let term = fires_at(&rig, &a, "deaf", "signal:Term", int + KILL_GRACE).await;
    assert_eq!(term, int + KILL_GRACE);
    let kill = fires_at(&rig, &a, "deaf", "signal:Kill", term + KILL_GRACE).await;
    assert_eq!(kill, term + KILL_GRACE);
    let events = rig.log_until("deaf", "run_end", 1).await;
    assert_eq!(
        run_end(events.last().unwrap()).reason,
        pb::RunEndReason::Stopped as i32
    );
    rig.done().await;
}

/// A control request the CLI does not answer fails with CliTimeout exactly
/// at CONTROL_TIMEOUT and not before, and records nothing then; when the
/// CLI does it after all (its success arrives late), the change is still
/// recorded, so the log says what the process runs with. A refusal is the
/// CLI's own message and records nothing.
#[tokio::test(start_paused = true)]
async fn a_control_request_times_out_when_due_and_a_late_success_is_still_recorded() {
    use crate::support::scripted::{REFUSE_MODEL, SLOW_MODEL};
    use agent_harness_server::error::Error;
    use agent_harness_server::manager::{CONTROL_TIMEOUT, SettingChange};

    let a = ScriptedAdapter::new(behavior());
    let rig = Rig::new(Arc::new(a.clone()), opts(IDLE));
    rig.m
        .start(start_request("ctl", prompt("one")))
        .await
        .unwrap();
    rig.log_until("ctl", "turn_end", 1).await;
    let head = rig.m.get("ctl").await.unwrap().head_seq;
    let model = |m: &str| SettingChange::Model(m.to_owned());

    let m = rig.m.clone();
    let slow = tokio::spawn(async move { m.change_setting("ctl", None, model(SLOW_MODEL)).await });
    let sent = call_time(&a, "control:set_model").await;
    let now = Instant::now();
    advance(sent + CONTROL_TIMEOUT - SHORT - now).await;
    rig.settle("ctl").await;
    assert!(!slow.is_finished(), "timed out early");
    advance(SHORT).await;
    rig.settle("ctl").await;
    match real_time(slow).await.unwrap() {
        Err(Error::CliTimeout(d)) => assert_eq!(d, CONTROL_TIMEOUT),
        other => panic!("not a timeout: {other:?}"),
    }
    let session = rig.m.get("ctl").await.unwrap();
    assert_eq!(session.head_seq, head, "a timeout records nothing");
    assert_ne!(session.model, SLOW_MODEL, "{session:?}");

    // The next message reaches the process, which answers the held request
    // (late: recorded) and then refuses this one (recorded: nothing).
    let refused = real_time(rig.m.change_setting("ctl", None, model(REFUSE_MODEL))).await;
    match refused {
        Err(Error::CliRefused(why)) => assert!(why.contains("scripted: no model"), "{why}"),
        other => panic!("not refused: {other:?}"),
    }
    let events = rig.log_until("ctl", "setting_changed", 1).await;
    let late = events.last().unwrap();
    assert_eq!(late.seq, head + 1);
    match &late.payload {
        Some(Payload::SettingChanged(s)) => {
            assert_eq!(s.value, SLOW_MODEL);
            assert_eq!(s.applied(), pb::SettingApplied::Live);
        }
        other => panic!("{other:?}"),
    }
    let session = rig.m.get("ctl").await.unwrap();
    assert_eq!(session.model, SLOW_MODEL);
    assert_eq!(session.head_seq, head + 1, "the refusal recorded nothing");
    rig.done().await;
}
