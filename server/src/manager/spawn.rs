//! Spawning a run: the launch policy's check, the live-run permit, the
//! durable `run_start` before the process, the process, and the hand-over
//! of the session's claim to the new run task; and what a respawn keeps of
//! the last run (its env values).

use agent_harness_protocol::vocab::{agent, run_end_source, run_error_kind, trigger};
use std::collections::{BTreeMap, HashMap};

use agent_harness_protocol::pb;
use agent_harness_protocol::pb::event::Payload;
use tokio::sync::OwnedSemaphorePermit;

use super::receipts::{Keyed, KeyedExt};
use super::run::{self, RunSpec};
use super::slot::Claim;
use super::{SessionFold, SessionManager};
use crate::adapter::{AdapterError, DecoderSetup, SpawnConfig};
use crate::error::{Error, Result};
use crate::launch;
use crate::log::{Commit, NewEvent};
use crate::store::SessionMeta;

/// Why a run is spawned: its `run_start`'s `trigger`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Trigger {
    /// A Start.
    Start,
    /// A Send with no live process: the run resumes the session.
    Send,
    /// A control call (a file rewind) that needs a live process.
    Control,
}

impl Trigger {
    /// The `RunStart.trigger` wire string.
    pub(super) fn as_str(self) -> &'static str {
        match self {
            Trigger::Start => trigger::START,
            Trigger::Send => trigger::SEND,
            Trigger::Control => trigger::CONTROL,
        }
    }
}

impl SessionManager {
    /// The env a respawn starts with: the names the last run_start recorded,
    /// with the values the session's meta keeps (sealed with the secrets
    /// key). [`Error::RespawnImpossible`] when a value is not known (the
    /// meta lost it) or does not open with this server's key: a Start must
    /// give it again, or the operator serve with the key that sealed it.
    pub(super) async fn respawn_env(
        &self,
        session_id: &str,
        recorded: &HashMap<String, String>,
    ) -> Result<HashMap<String, String>> {
        if recorded.is_empty() {
            return Ok(HashMap::new());
        }
        let impossible = |reason: String| Error::RespawnImpossible {
            session_id: session_id.to_owned(),
            reason,
        };
        let stored = match self.inner.logs.meta(session_id).await? {
            Some(SessionMeta {
                sealed_env: Some(sealed),
                ..
            }) => self
                .inner
                .opts
                .secrets
                .open_env(session_id, &sealed)
                .map_err(impossible)?,
            Some(meta) => meta.legacy_env,
            None => BTreeMap::new(),
        };
        let mut env = HashMap::with_capacity(recorded.len());
        for (key, logged) in recorded {
            let value = match stored.get(key) {
                Some(v) => v.clone(),
                // A run_start written before values were redacted holds it.
                None if logged != launch::REDACTED => logged.clone(),
                None => {
                    return Err(impossible(format!(
                        "the value of env {key} of its last run is not known any more"
                    )));
                }
            };
            env.insert(key.clone(), value);
        }
        Ok(env)
    }

    /// `env` as the session's meta keeps it: sealed, never in clear.
    fn keep_env(
        &self,
        session_id: &str,
        env: &HashMap<String, String>,
    ) -> impl FnOnce(&mut SessionMeta) + Send + 'static {
        let env: BTreeMap<String, String> =
            env.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        let sealed = self.inner.opts.secrets.seal_env(session_id, &env);
        move |m: &mut SessionMeta| {
            m.sealed_env = sealed;
            m.legacy_env.clear();
        }
    }

    /// Checks `config` against the launch policy and the adapter and takes
    /// a live-run permit (refusing before anything is appended), then appends
    /// run_start (env values redacted) (+ input_sent) durably, then spawns;
    /// on failure records run_error + run_end so the run still ends exactly
    /// once. The caller holds the session's `claim` and has caught its fold
    /// up to the head (so it stays current: from here on only this call and
    /// then the run task it hands the claim to append).
    /// A keyed call's receipt goes into the `run_start` commit (the call is
    /// applied once `run_start` is durable), is completed with the process
    /// id in the pid commit, and is removed in the `run_end` commit of a
    /// failed spawn.
    pub(super) async fn spawn_run(
        &self,
        session_id: &str,
        claim: Claim,
        config: pb::StartConfig,
        trigger: Trigger,
        keyed: Option<&Keyed>,
    ) -> Result<pb::StartResponse> {
        let uuid = uuid::Uuid::new_v4().to_string();
        self.spawn_run_with(session_id, claim, config, trigger, keyed, uuid)
            .await
    }

    /// [`SessionManager::spawn_run`] with the uuid the prompt's user
    /// message gets (`InputSent.message_uuid`).
    pub(super) async fn spawn_run_with(
        &self,
        session_id: &str,
        claim: Claim,
        mut config: pb::StartConfig,
        trigger: Trigger,
        keyed: Option<&Keyed>,
        prompt_uuid: String,
    ) -> Result<pb::StartResponse> {
        let fold = claim.fold().clone();
        // A conversation the caller names (a Start's config.resume; a fork's
        // is the server's own choice) must be this session's.
        let named = !config.resume.is_empty() && config.fork.is_none();
        // A run that names no conversation continues the session's; when the
        // CLI lost that one (run_error resume_failed), it starts a new one
        // without --resume and its run_start says which conversation is gone.
        let mut lost_resume_id = String::new();
        if config.resume.is_empty() {
            match fold
                .with(SessionFold::resume_or_lost)
                .unwrap_or(Ok(String::new()))
            {
                Ok(resume) => config.resume = resume,
                Err(lost) => lost_resume_id = lost,
            }
        }
        self.admit(session_id, &mut config, trigger)?;
        let import = match named {
            true => self.check_resume(session_id, &config.resume).await?,
            false => None,
        };
        let run_id = uuid::Uuid::new_v4().to_string();
        // The log keeps the args as the client gave them; the process gets
        // each value joined to its flag, never a word of its own.
        let mut spawned = config.clone();
        spawned.args = self.inner.opts.launch.joined_args(&config.args)?;
        let spawn = SpawnConfig {
            session_id: session_id.to_owned(),
            run_id: run_id.clone(),
            config: spawned,
            prompt_uuid: prompt_uuid.clone(),
            tasks: self.inner.tasks.clone(),
            opened_at: match config.resume.is_empty() {
                true => None,
                false => fold.with(|f| f.last_ready_at).flatten(),
            },
        };
        self.inner.adapter.check(&spawn)?;
        let permit = self.live_run_permit()?;
        let has_prompt = !config.prompt.is_empty() || !config.content_blocks.is_empty();
        let mut first = vec![NewEvent {
            run_id: run_id.clone(),
            payload: Payload::RunStart(pb::RunStart {
                config: Some(launch::redacted(&config)),
                adapter: self.inner.adapter.name_of(&spawn).to_owned(),
                agent: agent::of_run(&config.agent).to_owned(),
                trigger: trigger.as_str().to_owned(),
                lost_resume_id,
            }),
            cli_line: String::new(),
        }];
        if has_prompt {
            first.push(NewEvent {
                run_id: run_id.clone(),
                payload: Payload::InputSent(pb::InputSent {
                    text: config.prompt.clone(),
                    source: pb::InputSource::Initial as i32,
                    content_blocks: config.content_blocks.clone(),
                    message_uuid: prompt_uuid,
                }),
                cli_line: String::new(),
            });
        }
        let receipt = match trigger {
            Trigger::Start => keyed.put(|| pb::StartResponse {
                run_id: run_id.clone(),
                process_id: String::new(),
            }),
            Trigger::Send | Trigger::Control => keyed.put(|| pb::SendResponse {
                run_id: run_id.clone(),
            }),
        };
        let appended = self
            .inner
            .logs
            .commit(session_id, Commit::events(first).with_receipt(receipt))
            .await?;
        // The run_start names the conversation for this session now.
        drop(import);
        fold.applied(&appended);
        if !config.resume.is_empty() {
            self.restore_conversation(session_id, &config.resume).await;
        }
        // The decoder is built for the same config once the pid is known.
        let decoding = spawn.clone();
        let spawned = self.inner.adapter.spawn(spawn).await;
        let handle = match spawned {
            Ok(h) => h,
            Err(e) => {
                drop(permit);
                tracing::warn!(session_id, run_id, error = %e, "spawn failed");
                let end = vec![
                    NewEvent {
                        run_id: run_id.clone(),
                        payload: Payload::RunError(pb::RunError {
                            message: e.to_string(),
                            kind: run_error_kind::SPAWN_FAILED.into(),
                            ..Default::default()
                        }),
                        cli_line: String::new(),
                    },
                    NewEvent {
                        run_id: run_id.clone(),
                        payload: Payload::RunEnd(pb::RunEnd {
                            reason: pb::RunEndReason::Error as i32,
                            source: run_end_source::SPAWN.into(),
                            ..Default::default()
                        }),
                        cli_line: String::new(),
                    },
                ];
                // A Send that retries respawns with this run's env values.
                let keep = self.keep_env(session_id, &config.env);
                let appended = self
                    .inner
                    .logs
                    .commit(
                        session_id,
                        Commit::events(end)
                            .with_meta(keep)
                            .with_receipt(keyed.map(Keyed::remove)),
                    )
                    .await?;
                fold.applied(&appended);
                return Err(match e {
                    AdapterError::Spawn(msg) => Error::Spawn(msg),
                    e @ (AdapterError::BinaryNotFound(_)
                    | AdapterError::Unsupported(_)
                    | AdapterError::InvalidConfig { .. }) => e.into(),
                    other => Error::Spawn(other.to_string()),
                });
            }
        };
        let (pid, start_time) = (handle.pid, handle.start_time);
        let keep_env = self.keep_env(session_id, &config.env);
        let process_id = handle
            .process_id
            .clone()
            .or_else(|| pid.map(|p| format!("pid:{p}")))
            .unwrap_or_default();
        // A Start's receipt gets its process id with the pid.
        let receipt = keyed
            .filter(|_| trigger == Trigger::Start)
            .put(|| pb::StartResponse {
                run_id: run_id.clone(),
                process_id: process_id.clone(),
            });
        if let Err(e) = self
            .inner
            .logs
            .commit(
                session_id,
                Commit::meta(move |m: &mut SessionMeta| {
                    m.pid = pid;
                    m.pid_start_time = start_time;
                    keep_env(m);
                })
                .with_receipt(receipt),
            )
            .await
        {
            // The run goes on; only orphan cleanup after a crash, a
            // respawn's env, and a repeated Start's process id (empty) are
            // weaker.
            tracing::warn!(session_id, error = %e, "could not record the pid and env");
        }
        let decoder = self.inner.adapter.decoder(
            &decoding,
            DecoderSetup {
                max_line_bytes: self.inner.opts.max_line_bytes,
                max_partial_bytes: self.inner.opts.max_partial_bytes,
                pid,
                resume_id: config.resume.clone(),
            },
        );
        let spec = RunSpec {
            session_id: session_id.to_owned(),
            run_id: run_id.clone(),
            logs: self.inner.logs.clone(),
            opts: self.inner.opts.clone(),
            handle,
            decoder,
            prompt_sent: has_prompt,
            live_permit: permit,
            idle: self.inner.idle_runs.entry(),
        };
        // Runs to completion: the run ends with its process, and shutdown
        // stops every process through the stop ladder (`shutdown`) first.
        self.inner.tasks.spawn("run", run::supervised(spec, claim));
        tracing::info!(
            session_id,
            run_id,
            trigger = trigger.as_str(),
            process_id,
            "run started"
        );
        Ok(pb::StartResponse { run_id, process_id })
    }

    /// Writes conversation `resume_id` back into the agent's folder on this
    /// node from the transcript stored with the log, when this node lacks
    /// it (the session ran elsewhere, or this disk lost it): this session's
    /// entries first, else those of a session the conversation comes from
    /// (a fork resumes its parent's). Anything missing or failing is only
    /// logged: the CLI then reports the conversation lost and the session
    /// starts a new one, as without a stored transcript.
    async fn restore_conversation(&self, session_id: &str, resume_id: &str) {
        let Some(dir) = self.inner.adapter.conversations_dir() else {
            return;
        };
        let logs = &self.inner.logs;
        let mut sessions = vec![session_id.to_owned()];
        match logs.conversation_sessions(resume_id).await {
            Ok(owners) => sessions.extend(owners.into_iter().filter(|s| s != session_id)),
            Err(e) => {
                tracing::warn!(session_id, error = %e, "could not read the conversation index")
            }
        }
        for sid in sessions {
            let entries = match logs.transcript(&sid).await {
                Ok(entries) => entries,
                Err(e) => {
                    tracing::warn!(session_id, error = %e, "could not read the stored transcript");
                    return;
                }
            };
            if entries.is_empty() {
                continue;
            }
            let (dir, id) = (dir.clone(), resume_id.to_owned());
            let written = tokio::task::spawn_blocking(move || {
                crate::adapter::claude::transcript::restore(&dir, &id, &entries)
            })
            .await;
            match written {
                Ok(Ok(files)) if files.is_empty() => {}
                Ok(Ok(files)) => {
                    tracing::info!(
                        session_id,
                        resume_id,
                        files = files.len(),
                        "conversation written back from the store"
                    );
                    return;
                }
                Ok(Err(e)) => {
                    tracing::warn!(session_id, resume_id, error = %e, "could not write the conversation back");
                    return;
                }
                Err(e) => {
                    tracing::warn!(session_id, error = %e, "conversation restore panicked");
                    return;
                }
            }
        }
    }

    /// The launch policy's verdict on `config` (which it may rewrite: see
    /// [`LaunchPolicy::admit`]). A respawning Send's config is the session's
    /// recorded one, not the request's: an invalid field there makes the
    /// session not respawnable (the operator narrowed the policy since; a
    /// Start with an allowed config fixes it); a cwd outside
    /// `--allowed-cwd` stays [`Error::PolicyDenied`].
    pub(super) fn admit(
        &self,
        session_id: &str,
        config: &mut pb::StartConfig,
        trigger: Trigger,
    ) -> Result<()> {
        match self.inner.opts.launch.admit(config) {
            Ok(()) => Ok(()),
            Err(e @ Error::InvalidField { .. }) if trigger != Trigger::Start => {
                Err(Error::RespawnImpossible {
                    session_id: session_id.to_owned(),
                    reason: format!(
                        "its last run config is not allowed by this server's launch policy ({e})"
                    ),
                })
            }
            Err(e) => Err(e),
        }
    }

    /// A permit for one more live run, or [`Error::ResourceLimit`].
    pub(super) fn live_run_permit(&self) -> Result<OwnedSemaphorePermit> {
        self.inner
            .live_runs
            .clone()
            .try_acquire_owned()
            .map_err(|_| {
                let max = self.inner.opts.max_live_runs;
                Error::ResourceLimit(format!(
                    "{max} runs are live, the most this server runs at once \
                     (--max-live-runs); retry when one has ended, or Stop one"
                ))
            })
    }
}
