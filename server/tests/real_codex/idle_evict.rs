//! The cap on idle processes ends a Codex process as it ends a Claude one:
//! with `--max-idle-runs 0` the process goes once its turn ends (run_end
//! IDLE_EVICTED), and the next Send resumes the thread (the model receives
//! the earlier prompt).

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_idle_runs_zero_ends_the_process_after_its_turn_and_send_resumes() {
    let mut h = Harness::new().await;
    h.manager.max_idle_runs = 0;
    h.restart().await;
    let ev = h.subscribe("ce").await;
    let first = h.start("ce", "TEXT remember me").await;
    let (turn_end, _) = ev.turn_end_after(0).await;
    let (end_ev, end) = ev.run_end_after(turn_end.seq).await;
    assert_eq!(end_ev.run_id, first.run_id);
    assert_eq!(end.reason(), pb::RunEndReason::IdleEvicted, "{end:?}");
    let thread = ready_of(&ev.snapshot(), &first.run_id).resume_id;
    assert!(process_gone(ready_of(&ev.snapshot(), &first.run_id).pid));

    let run = h.send("ce", "TEXT second").await;
    assert_ne!(run, first.run_id);
    let (_, end) = ev.run_end_after(end_ev.seq).await;
    assert_eq!(end.reason(), pb::RunEndReason::IdleEvicted, "{end:?}");
    let events = ev.snapshot();
    let (_, rs) = run_starts(&events)
        .into_iter()
        .find(|(e, _)| e.run_id == run)
        .expect("the resumed run_start");
    assert_eq!(
        rs.config.expect("config").resume,
        thread,
        "resumes the thread"
    );
    assert_eq!(texts(&events), "remember me|second");
    let prompts = h
        .api
        .responses_requests()
        .last()
        .expect("a request")
        .user_prompts();
    assert_eq!(prompts, ["TEXT remember me", "TEXT second"]);
    h.shutdown().await;
    h.assert_stored_runs_end_once("ce");
}
