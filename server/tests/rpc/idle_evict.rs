//! The cap on idle keep-alive processes (`--max-idle-runs`) with the
//! scripted CLI on the paused clock (the idle timeout never fires here):
//! past the cap the least recently active idle process ends (stop_requested
//! {idle}, run_end IDLE_EVICTED), its session resumes on the next Send, a
//! Send racing the eviction is never lost, and a process with background
//! tasks running is not the one that goes.

use std::sync::Arc;
use std::time::Duration;

use agent_harness_protocol::pb;
use agent_harness_protocol::pb::event::Payload;
use agent_harness_server::manager::ManagerOptions;
use tokio::time::advance;

use super::timers::{Rig, behavior, find, stop_source, task_frames};
use crate::support::cli_grpc::assert_runs_end_once;
use crate::support::common::kind;
use crate::support::scripted::ScriptedAdapter;
use crate::support::server::{InjectingAdapter, prompt, run_end, send_request, start_request};

fn opts(max_idle_runs: usize) -> ManagerOptions {
    ManagerOptions {
        idle_timeout: Duration::ZERO,
        max_idle_runs,
        ..ManagerOptions::default()
    }
}

/// Starts `sid` and waits for its first turn to end.
async fn started(rig: &Rig, sid: &str) {
    rig.m
        .start(start_request(sid, prompt("hello")))
        .await
        .unwrap();
    rig.log_until(sid, "turn_end", 1).await;
}

fn run_start_trigger(e: &pb::Event) -> &str {
    match &e.payload {
        Some(Payload::RunStart(rs)) => &rs.trigger,
        _ => "",
    }
}

#[tokio::test(start_paused = true)]
async fn past_the_cap_the_least_recently_active_idle_process_is_evicted() {
    let a = ScriptedAdapter::new(behavior());
    let rig = Rig::new(Arc::new(a.clone()), opts(1));
    started(&rig, "a").await;
    assert_eq!(rig.m.idle_runs(), 1);
    started(&rig, "b").await;

    let events = rig.log_until("a", "run_end", 1).await;
    assert_eq!(stop_source(find(&events, "stop_requested")), "idle");
    let end = run_end(events.last().unwrap());
    assert_eq!(end.reason, pb::RunEndReason::IdleEvicted as i32);
    assert_eq!(end.source, "process");
    assert_eq!(rig.m.idle_runs(), 1, "b stays");
    assert_eq!(rig.m.live_runs(), 1);

    // a's next Send respawns it (resuming its conversation); once its
    // turn ends, b is the least recently active and goes.
    advance(Duration::from_secs(1)).await;
    rig.m.send(send_request("a", "again", "")).await.unwrap();
    let events = rig.log_until("a", "turn_end", 2).await;
    let respawn = events
        .iter()
        .filter(|e| kind(e) == "run_start")
        .nth(1)
        .expect("a second run");
    assert_eq!(run_start_trigger(respawn), "send");
    let Some(Payload::RunStart(rs)) = &respawn.payload else {
        unreachable!()
    };
    assert!(!rs.config.as_ref().unwrap().resume.is_empty(), "resumed");
    let b = rig.log_until("b", "run_end", 1).await;
    assert_eq!(
        run_end(b.last().unwrap()).reason,
        pb::RunEndReason::IdleEvicted as i32
    );
    assert_runs_end_once(&events, Some(&respawn.run_id));
    rig.done().await;
}

#[tokio::test(start_paused = true)]
async fn zero_ends_every_process_when_its_turn_ends() {
    let a = ScriptedAdapter::new(behavior());
    let rig = Rig::new(Arc::new(a.clone()), opts(0));
    started(&rig, "z").await;
    let events = rig.log_until("z", "run_end", 1).await;
    assert_eq!(
        run_end(events.last().unwrap()).reason,
        pb::RunEndReason::IdleEvicted as i32
    );
    assert_eq!(rig.m.live_runs(), 0);
    rig.done().await;
}

/// A Send to the process being evicted, issued together with the Start
/// that evicts it: whichever the run task takes first, the input is
/// answered (by the old process, or by a respawn after its run_end) and
/// every run ends once.
#[tokio::test(start_paused = true)]
async fn a_send_racing_the_eviction_is_answered_and_every_run_ends_once() {
    let a = ScriptedAdapter::new(behavior());
    let rig = Rig::new(Arc::new(a.clone()), opts(1));
    started(&rig, "old").await;
    let (start, send) = tokio::join!(
        rig.m.start(start_request("new", prompt("hello"))),
        rig.m.send(send_request("old", "still there?", "")),
    );
    start.unwrap();
    let run = send.unwrap().run_id;
    let events = rig.log_until("old", "turn_end", 2).await;
    let input = events
        .iter()
        .find(|e| matches!(&e.payload, Some(Payload::InputSent(i)) if i.text == "still there?"))
        .expect("the Send's input reached a process");
    assert_eq!(input.run_id, run);
    assert_eq!(kind(events.last().unwrap()), "turn_end");
    assert_eq!(events.last().unwrap().run_id, run, "its turn was answered");
    let live = rig.m.live_runs() > 0;
    assert_runs_end_once(&events, live.then_some(run.as_str()));
    rig.done().await;
}

/// A process whose log shows a background task running refuses to go (as
/// it outlives the idle timeout) and is not counted: the other idle
/// process stays. Once the task has finished and its session had a turn
/// again, the least recently active goes.
#[tokio::test(start_paused = true)]
async fn a_process_with_background_tasks_running_is_not_evicted() {
    let scripted = ScriptedAdapter::new(behavior());
    let adapter = InjectingAdapter::new(scripted.clone(), task_frames);
    let rig = Rig::new(Arc::new(adapter), opts(1));
    let bg = rig
        .m
        .start(start_request("bg", prompt("BGSTART a job")))
        .await
        .unwrap()
        .run_id;
    rig.log_until("bg", "turn_end", 1).await;
    started(&rig, "other").await;
    rig.settle("bg").await;
    assert!(rig.m.get("bg").await.unwrap().process_alive);
    assert!(rig.m.get("other").await.unwrap().process_alive);
    assert_eq!(rig.m.idle_runs(), 1, "the one with a task is not counted");
    assert_eq!(rig.m.live_runs(), 2);

    // The task done and reported in a new turn: bg is idle and the most
    // recently active; "other" goes.
    advance(Duration::from_secs(1)).await;
    let sent_to = rig
        .m
        .send(send_request("bg", "BGDONE check", ""))
        .await
        .unwrap()
        .run_id;
    assert_eq!(sent_to, bg, "the same process took the Send");
    rig.log_until("bg", "turn_end", 2).await;
    let other = rig.log_until("other", "run_end", 1).await;
    assert_eq!(
        run_end(other.last().unwrap()).reason,
        pb::RunEndReason::IdleEvicted as i32
    );
    let events = rig.log_until("bg", "turn_end", 2).await;
    assert!(!events.iter().any(|e| kind(e) == "stop_requested"));
    assert!(rig.m.get("bg").await.unwrap().process_alive);
    rig.done().await;
}

/// A Send that reaches the process once its eviction has begun (its
/// stop_requested{idle} is in the log) is not lost: it waits for the
/// run_end and respawns, resuming the conversation.
#[tokio::test(start_paused = true)]
async fn a_send_after_the_eviction_began_respawns() {
    let a = ScriptedAdapter::new(behavior());
    let rig = Rig::new(Arc::new(a.clone()), opts(1));
    let old = rig
        .m
        .start(start_request("old", prompt("hello")))
        .await
        .unwrap()
        .run_id;
    rig.log_until("old", "turn_end", 1).await;
    advance(Duration::from_secs(1)).await;
    rig.m
        .start(start_request("new", prompt("hello")))
        .await
        .unwrap();
    rig.log_until("old", "stop_requested", 1).await;
    let run = rig
        .m
        .send(send_request("old", "after all", ""))
        .await
        .unwrap()
        .run_id;
    assert_ne!(run, old, "a new process took it");
    let events = rig.log_until("old", "turn_end", 2).await;
    let end = events
        .iter()
        .find(|e| kind(e) == "run_end")
        .expect("the old run ended");
    assert_eq!(end.run_id, old);
    assert_eq!(run_end(end).reason, pb::RunEndReason::IdleEvicted as i32);
    let input = events
        .iter()
        .find(|e| matches!(&e.payload, Some(Payload::InputSent(i)) if i.text == "after all"))
        .expect("the Send's input was recorded");
    assert_eq!(input.run_id, run);
    assert!(input.seq > end.seq, "after the old run's end");
    assert_runs_end_once(&events, Some(&run));
    rig.done().await;
}
