//! Start-up recovery (DESIGN §4.4): every run a previous server left live
//! gets its `run_end` now, and its orphaned process group is killed.
//!
//! A session whose log shows a live run (derive's `StatusFold::run_live`)
//! gets `run_end{SERVER_RESTART, inferred: true, source: "recovery"}`, so it
//! derives as idle instead of streaming forever. Its resume identity stays
//! in the log (`derive::resume_id`), so the next Send resumes the CLI
//! session. The recorded process group is killed only if its leader still
//! has the recorded start time, so a reused pid is never hit.

use agent_harness_client::derive;

use crate::error::Result;
use crate::log::EventLogs;
use crate::manager::{fold, inferred_run_end};

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

/// Kills a recorded process group if `(pid, start_time)` still match;
/// returns true when it sent the kill. Injected so tests can observe it.
pub type KillRecorded = dyn Fn(u32, u64) -> bool + Send + Sync;

/// Recovers every stored session. Must run before the server accepts calls.
pub async fn recover(logs: &EventLogs, kill: &KillRecorded) -> Result<Vec<Recovered>> {
    let mut out = Vec::new();
    for meta in logs.sessions().await? {
        let sid = meta.session_id.clone();
        let events = logs.read_all(&sid).await?;
        let fold = fold(&events);
        let mut closed_run = None;
        if fold.run_live() {
            let run_id = fold.current_run_id().unwrap_or_default().to_owned();
            logs.append(&sid, vec![inferred_run_end(run_id.clone())])
                .await?;
            closed_run = Some(run_id);
        }
        let mut killed = false;
        if let (Some(pid), Some(start)) = (meta.pid, meta.pid_start_time) {
            killed = kill(pid, start);
            logs.update_meta(&sid, |m| {
                m.pid = None;
                m.pid_start_time = None;
            })
            .await?;
        }
        if closed_run.is_none() && !killed {
            continue;
        }
        let resume_id = derive::resume_id(&events);
        tracing::info!(session_id = %sid, closed_run = ?closed_run, killed, resume_id = ?resume_id, "recovered session");
        out.push(Recovered {
            session_id: sid,
            closed_run,
            killed,
            resume_id,
        });
    }
    Ok(out)
}
