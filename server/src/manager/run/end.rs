//! How a run ends: the one `run_end` after the process exited (retried
//! while storage refuses it), its reason, and the end of a run whose task
//! panicked.

use super::*;
use agent_harness_protocol::vocab::{resolved_by, run_end_source, run_error_kind};

use crate::log::Commit;

/// Runs the task for `spec` to its end, then releases the session's claim
/// (commands that raced the exit get dropped replies and are asked again of
/// the free slot). A panic in the task still ends the run exactly once: the
/// process group is killed and, unless the log already has this run's
/// `run_end`, a `run_error{kind: "panic"}` and a `run_end{ERROR}` are
/// appended before the claim is released.
pub(in crate::manager) async fn supervised(spec: RunSpec, mut claim: Claim) {
    use futures::FutureExt;

    let control = spec.handle.control.clone();
    let (logs, session_id, run_id) = (
        spec.logs.clone(),
        spec.session_id.clone(),
        spec.run_id.clone(),
    );
    let fold = claim.fold().clone();
    let run = Run::new(spec, fold.clone());
    let outcome = std::panic::AssertUnwindSafe(run.run(&mut claim))
        .catch_unwind()
        .await;
    if let Err(panic) = outcome {
        let what = panic
            .downcast_ref::<&str>()
            .map(|s| (*s).to_owned())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "a panic".to_owned());
        tracing::error!(%session_id, %run_id, panic = %what, "run task panicked; ending the run");
        let _ = control.signal(crate::adapter::Signal::Kill);
        close_after_panic(&logs, &session_id, &run_id, &fold, what).await;
    }
    drop(claim);
}

/// The `run_error` and `run_end` of a run whose task panicked, unless the
/// log already ends it.
async fn close_after_panic(
    logs: &EventLogs,
    session_id: &str,
    run_id: &str,
    fold: &FoldCell,
    what: String,
) {
    let live = fold
        .current(logs, session_id, |d| {
            let s = d.fold.status_fold();
            s.run_live() && s.current_run_id() == Some(run_id)
        })
        .await
        .unwrap_or(true);
    if !live {
        return;
    }
    let event = |payload| NewEvent {
        run_id: run_id.to_owned(),
        payload,
        cli_line: String::new(),
    };
    let events = vec![
        event(Payload::RunError(pb::RunError {
            message: format!("the run's task failed: {what}"),
            kind: run_error_kind::PANIC.into(),
            ..Default::default()
        })),
        event(Payload::RunEnd(pb::RunEnd {
            reason: pb::RunEndReason::Error as i32,
            source: run_end_source::PANIC.into(),
            ..Default::default()
        })),
    ];
    let appended = logs
        .commit(
            session_id,
            Commit::events(events).with_meta(SessionMeta::forget_process),
        )
        .await;
    match appended {
        Ok(events) => fold.applied(&events),
        Err(e) => {
            tracing::error!(%session_id, %run_id, error = %e, "could not end the run after a panic")
        }
    }
}

impl Run {
    /// Withdraws what is pending and appends the one run_end.
    pub(super) async fn finish(&mut self, exit: ExitInfo) {
        // The process is gone: its place is free before anyone sees run_end.
        self.live_permit.take();
        for (_, c) in self.controls.drain() {
            let _ = c.reply.send(Err(super::ControlFailure::Ended));
        }
        self.permission_deadlines.clear();
        let pending: Vec<String> = self
            .fold
            .with(|d| {
                d.fold
                    .pending_permissions()
                    .map(|p| p.request_id.clone())
                    .collect()
            })
            .unwrap_or_default();
        let mut last: Vec<(Payload, String)> = pending
            .into_iter()
            .map(|request_id| {
                (
                    Payload::PermissionResolved(pb::PermissionResolved {
                        request_id,
                        allow: false,
                        by: resolved_by::RUN_END.into(),
                        message: String::new(),
                        updated_input: None,
                    }),
                    String::new(),
                )
            })
            .collect();
        if let Some(why) = &self.storage_failed {
            last.push((
                Payload::RunError(pb::RunError {
                    message: format!("the event log could not record this run's output: {why}"),
                    kind: run_error_kind::STORAGE.into(),
                    ..Default::default()
                }),
                String::new(),
            ));
        }
        let (reason, source) = self.end_reason(&exit);
        let stderr_tail = if reason == pb::RunEndReason::Completed {
            String::new()
        } else {
            exit.stderr_tail.clone()
        };
        tracing::info!(session_id = %self.session_id, run_id = %self.run_id, ?reason, code = ?exit.code, signal = ?exit.signal, "run ended");
        last.push((
            Payload::RunEnd(pb::RunEnd {
                reason: reason as i32,
                exit_code: exit.code,
                signal: exit.signal.clone().unwrap_or_default(),
                inferred: false,
                source: source.into(),
                stderr_tail,
            }),
            String::new(),
        ));
        // Nothing is being written any more (clients drop partial text at
        // run_end too).
        if let Some(t) = &self.typing {
            t.clear(&self.run_id);
        }
        // The recorded pid is dead now: it is cleared in the run_end's
        // commit, so recovery never looks for it once the run has ended.
        self.append_end(last).await;
    }

    /// Appends the run's last events (its `run_end`), retrying while
    /// storage fails: every run ends exactly once, also when the disk was
    /// full as the process exited. The claim is held meanwhile, so nobody
    /// acts on a run the log still shows live. Gives up only when the log is
    /// shut down (recovery then closes the run on the next start).
    async fn append_end(&mut self, last: Vec<(Payload, String)>) {
        let mut pause = END_RETRY_FIRST;
        loop {
            let events = last
                .iter()
                .map(|(payload, cli_line)| NewEvent {
                    run_id: self.run_id.clone(),
                    payload: payload.clone(),
                    cli_line: cli_line.clone(),
                })
                .collect();
            match self
                .logs
                .commit(
                    &self.session_id,
                    Commit::events(events).with_meta(SessionMeta::forget_process),
                )
                .await
            {
                Ok(events) => {
                    self.fold.applied(&events);
                    for e in &events {
                        self.observe(e).await;
                    }
                    return;
                }
                Err(LogError::Closed) => {
                    tracing::warn!(session_id = %self.session_id, run_id = %self.run_id, "log shut down before the run_end was recorded; recovery will close the run");
                    return;
                }
                Err(LogError::Store(e))
                    if matches!(*e, crate::store::StoreError::Fenced { .. }) =>
                {
                    // This node may no longer write to the session: the
                    // node that takes it over writes the run's end.
                    tracing::warn!(session_id = %self.session_id, run_id = %self.run_id, "fenced before the run_end was recorded; the session's new owner closes the run");
                    return;
                }
                Err(e) => {
                    tracing::error!(session_id = %self.session_id, run_id = %self.run_id, error = %e, retry_in = ?pause, "cannot record the run_end yet; retrying");
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(END_RETRY_MAX);
                }
            }
        }
    }

    fn end_reason(&self, exit: &ExitInfo) -> (pb::RunEndReason, &'static str) {
        use pb::RunEndReason as R;
        if self.storage_failed.is_some() {
            return (R::Error, run_end_source::STORAGE);
        }
        if self.policy_refused {
            return (R::Error, run_end_source::POLICY);
        }
        match self.ladder.cause() {
            Some(Cause::Shutdown) if self.deleting => (R::Stopped, run_end_source::DELETE),
            Some(Cause::Shutdown) => (R::ServerRestart, run_end_source::SHUTDOWN),
            Some(Cause::User) => (R::Stopped, run_end_source::PROCESS),
            Some(Cause::Idle) if self.evicted => (R::IdleEvicted, run_end_source::PROCESS),
            Some(Cause::Idle) => (R::IdleTimeout, run_end_source::PROCESS),
            None => {
                let reason = match (exit.code, exit.signal.as_deref()) {
                    (Some(0), _) if !self.control.keep_alive() => R::Completed,
                    (Some(c), _) if c != 0 && self.last_turn_error => R::Error,
                    (None, Some("SIGINT")) => R::Interrupted,
                    _ => R::ProcessExit,
                };
                (reason, run_end_source::PROCESS)
            }
        }
    }
}

/// First pause before retrying a `run_end` that storage refused.
const END_RETRY_FIRST: Duration = Duration::from_millis(100);
/// Longest pause between those retries.
const END_RETRY_MAX: Duration = Duration::from_secs(5);
