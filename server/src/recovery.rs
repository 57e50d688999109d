//! Start-up recovery (docs/ARCHITECTURE.md, "Every run ends exactly once"):
//! every run a previous server left live gets its `run_end` now, and its
//! orphaned process group is killed.
//!
//! A session whose log shows a live run (derive's `StatusFold::run_live`)
//! gets `run_end{SERVER_RESTART, inferred: true, source: "recovery"}`, so it
//! derives as idle instead of streaming forever. Its resume identity stays
//! in the log (`derive::resume_id`), so the next Send resumes the CLI
//! session. The recorded process group is killed, grandchildren included,
//! even when its leader is already dead; a reused pid is never hit (see
//! [`crate::supervise::kill_recorded_group`]). So is every process carrying
//! the run's marker variable, wherever it went: the CLI's Bash tool runs
//! each command in a session of its own, outside the CLI's group
//! ([`crate::supervise::kill_recorded_run`]).
//!
//! What is left of the run is killed first; then its `run_end` and the
//! forgetting of the recorded process are ONE commit, as a run's own end
//! is: no crash leaves one without the other.
//!
//! Cost: start-up reads each log from its tail, not whole. Whether a run is
//! live, and which conversation the next run resumes, are decided by the
//! newest event that answers derive's per-event predicates
//! ([`derive::run_liveness`], [`derive::resume_decision`]), usually among
//! the last few; the manager folds a whole log only when the session is
//! first used.

use agent_harness_protocol::derive;
use agent_harness_protocol::pb;
use agent_harness_protocol::pb::event::Payload;
use agent_harness_protocol::vocab::run_end_source;

use crate::error::Result;
use crate::log::{Commit, EventLogs, NewEvent};
use crate::store::SessionMeta;

/// Events read per step when scanning a log backwards.
const SCAN_PAGE: u32 = 256;
/// Session metas read per page while recovering.
const META_PAGE: usize = 1000;

/// What recovery did to one session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recovered {
    /// The session.
    pub session_id: String,
    /// The run that was closed, when its log showed one live.
    pub closed_run: Option<String>,
    /// True when an orphaned process group was killed.
    pub killed: bool,
    /// The resume id the next run will use.
    pub resume_id: Option<String>,
}

/// Kills what is left of a run: its recorded process group if `(pid,
/// start_time)` still match, and every process carrying the run's marker
/// (see [`crate::supervise::kill_recorded_run`]); returns true when it
/// killed something. Injected so tests can observe it.
pub type KillRecorded = dyn Fn(Option<(u32, u64)>, &str) -> bool + Send + Sync;

/// Recovers every stored session. Must run before the server accepts calls.
pub async fn recover(logs: &EventLogs, kill: &KillRecorded) -> Result<Vec<Recovered>> {
    let mut out = Vec::new();
    let mut after: Option<String> = None;
    loop {
        let page = logs.sessions(after.as_deref(), META_PAGE).await?;
        let Some(last) = page.last() else {
            break;
        };
        after = Some(last.session_id.clone());
        for meta in page {
            if let Some(r) = recover_one(logs, kill, meta).await? {
                out.push(r);
            }
        }
    }
    Ok(out)
}

/// Recovers one session by id (a session taken over from a dead node):
/// as [`recover`] does for each. `None` when there was nothing to do.
pub async fn recover_session(
    logs: &EventLogs,
    kill: &KillRecorded,
    session_id: &str,
) -> Result<Option<Recovered>> {
    let meta = logs
        .meta(session_id)
        .await?
        .unwrap_or_else(|| SessionMeta::new(session_id, 0));
    recover_one(logs, kill, meta).await
}

/// Recovers one session: closes a run its log left open, kills what is left
/// of its recorded process group. `None` when there was nothing to do.
async fn recover_one(
    logs: &EventLogs,
    kill: &KillRecorded,
    meta: SessionMeta,
) -> Result<Option<Recovered>> {
    let sid = meta.session_id.clone();
    let last_run_event = find_back(logs, &sid, |p| derive::run_liveness(p).is_some()).await?;
    let last_run = last_run_event.as_ref().map(|e| e.run_id.clone());
    let closed_run = last_run_event
        .filter(|e| e.payload.as_ref().and_then(derive::run_liveness) == Some(true))
        .map(|e| e.run_id);
    let recorded = meta.pid.zip(meta.pid_start_time);
    // A live run's processes are killed even when no pid was recorded
    // (a crash between the spawn and the commit that records it): they
    // carry the run's marker. Killed before the commit below forgets
    // them: a crash in between leaves them to the next start-up.
    let killed = (closed_run.is_some() || recorded.is_some())
        && kill(recorded, last_run.as_deref().unwrap_or_default());
    let forget = meta.pid.is_some();
    let events: Vec<_> = closed_run.iter().cloned().map(inferred_run_end).collect();
    if !events.is_empty() || forget {
        let mut commit = Commit::events(events);
        if forget {
            commit = commit.with_meta(SessionMeta::forget_process);
        }
        logs.commit(&sid, commit).await?;
    }
    if closed_run.is_none() && !killed {
        return Ok(None);
    }
    let resume_id = find_back(logs, &sid, |p| derive::resume_decision(p).is_some())
        .await?
        .and_then(|e| {
            let decided = derive::resume_decision(e.payload.as_ref()?)?;
            decided.map(str::to_owned)
        });
    tracing::info!(session_id = %sid, closed_run = ?closed_run, killed, resume_id = ?resume_id, "recovered session");
    Ok(Some(Recovered {
        session_id: sid,
        closed_run,
        killed,
        resume_id,
    }))
}

/// The newest event whose payload matches `pred`, paging back from the head
/// in pages that start small and double up to [`SCAN_PAGE`] (what recovery
/// looks for is usually among the last few events of a log).
async fn find_back(
    logs: &EventLogs,
    session_id: &str,
    pred: impl Fn(&Payload) -> bool,
) -> Result<Option<pb::Event>> {
    let mut before = 0;
    let mut size = 8;
    loop {
        let (page, has_more) = logs.history(session_id, before, size).await?;
        size = (size * 2).min(SCAN_PAGE);
        if let Some(e) = page
            .iter()
            .rev()
            .find(|e| e.payload.as_ref().is_some_and(&pred))
        {
            return Ok(Some(e.clone()));
        }
        match page.first() {
            Some(first) if has_more => before = first.seq,
            _ => return Ok(None),
        }
    }
}

/// The run_end written for a run whose end nobody observed.
pub(crate) fn inferred_run_end(run_id: String) -> NewEvent {
    NewEvent {
        run_id,
        payload: Payload::RunEnd(pb::RunEnd {
            reason: pb::RunEndReason::ServerRestart as i32,
            inferred: true,
            source: run_end_source::RECOVERY.into(),
            ..Default::default()
        }),
        cli_line: String::new(),
    }
}
