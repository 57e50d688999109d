//! Control of a session's live process: host `control_request`s
//! answered from the CLI's `control_response` ([`SessionManager::control`]),
//! setting changes that outlive the process
//! ([`SessionManager::change_setting`]), and file rewinds
//! ([`SessionManager::rewind_files`]).
//!
//! A setting change goes to the live process when there is one; the run
//! task records it (`setting_changed{applied: LIVE}`) when the CLI says
//! success. With no live process (or one ending, or a one-shot one) it is
//! recorded as `NEXT_SPAWN`, and the next spawn applies it (see
//! [`super::fold::SettingsChanged`]): so a setting survives a respawn, an
//! idle timeout and a server restart.
//!
//! How an event of a call gets into the log is shared with SetTitle
//! ([`super::title`]): the live run appends it in order with its own events
//! ([`SessionManager::run_records_or_claim`]), else the manager does,
//! holding the session's claim ([`SessionManager::commit_claimed`]).

use agent_harness_protocol::pb;
use agent_harness_protocol::pb::event::Payload;
use serde_json::{Value, json};

use super::SessionManager;
use super::keyed::SettingRequest;
use super::receipts::{Keyed, KeyedExt};
use super::run::{self, Answered, ControlFailure, ControlReplyTx, Record, RunCmd};
use super::slot::{Claim, Entry, Slot};
use super::spawn::Trigger;
use crate::error::{Error, Result};
use crate::launch;
use crate::log::{Commit, NewEvent};
use crate::store::ReceiptWrite;
use std::sync::Arc;

/// A setting a client changes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SettingChange {
    /// SetModel: an alias or name; "" = the CLI's default.
    Model(String),
    /// SetPermissionMode.
    PermissionMode(String),
    /// SetMaxThinkingTokens; `None` = the CLI's default.
    MaxThinkingTokens(Option<u32>),
}

impl SettingChange {
    pub(super) fn rpc(&self) -> &'static str {
        match self {
            SettingChange::Model(_) => "SetModel",
            SettingChange::PermissionMode(_) => "SetPermissionMode",
            SettingChange::MaxThinkingTokens(_) => "SetMaxThinkingTokens",
        }
    }

    pub(super) fn setting(&self) -> pb::Setting {
        match self {
            SettingChange::Model(_) => pb::Setting::Model,
            SettingChange::PermissionMode(_) => pb::Setting::PermissionMode,
            SettingChange::MaxThinkingTokens(_) => pb::Setting::MaxThinkingTokens,
        }
    }

    /// The value as `setting_changed` records it.
    pub(super) fn value(&self) -> String {
        match self {
            SettingChange::Model(m) | SettingChange::PermissionMode(m) => m.clone(),
            SettingChange::MaxThinkingTokens(n) => n.map(|n| n.to_string()).unwrap_or_default(),
        }
    }

    /// The CLI's control request.
    fn request(&self) -> Value {
        match self {
            SettingChange::Model(m) if m.is_empty() => {
                json!({"subtype": "set_model", "model": null})
            }
            SettingChange::Model(m) => json!({"subtype": "set_model", "model": m}),
            SettingChange::PermissionMode(m) => {
                json!({"subtype": "set_permission_mode", "mode": m})
            }
            SettingChange::MaxThinkingTokens(n) => {
                json!({"subtype": "set_max_thinking_tokens", "max_thinking_tokens": n})
            }
        }
    }

    fn event(&self, applied: pb::SettingApplied) -> Payload {
        Payload::SettingChanged(pb::SettingChanged {
            setting: self.setting() as i32,
            value: self.value(),
            applied: applied as i32,
        })
    }
}

fn failure(f: ControlFailure) -> Error {
    match f {
        ControlFailure::Unsupported => Error::Unsupported(
            "control requests (the one-shot adapter has no channel to a running CLI)".into(),
        ),
        ControlFailure::Refused(why) => Error::CliRefused(why),
        ControlFailure::Timeout => Error::CliTimeout(run::CONTROL_TIMEOUT),
        ControlFailure::Ended => {
            Error::ProcessExited("the process ended before it answered".into())
        }
        ControlFailure::NotRecorded(why) => Error::Storage(why),
    }
}

impl SessionManager {
    /// Sends a host `control_request` (`request` holds its `subtype`) to
    /// the session's live process and returns the CLI's answer (its
    /// `response` object). NoLiveProcess when there is none; CliRefused,
    /// CliTimeout or ProcessExited when the CLI does not answer with success.
    pub async fn control(&self, session_id: &str, request: Value) -> Result<Value> {
        self.control_recorded(session_id, request, None)
            .await
            .map(|a| a.response)
    }

    /// Stops one background task (`stop_task`). A keyed repeat of a stop
    /// that succeeded answers success and sends nothing again (its receipt
    /// is committed alone: the task's end is the CLI's to report).
    pub async fn stop_task(&self, request: pb::StopTaskRequest) -> Result<pb::StopTaskResponse> {
        let session_id = request.session_id.as_str();
        if !self.inner.logs.exists(session_id).await? {
            return Err(Error::unknown_session(session_id));
        }
        let task_id = request.task_id.as_str();
        self.idempotent(&request, |_keyed| async move {
            self.control(
                session_id,
                json!({"subtype": "stop_task", "task_id": task_id}),
            )
            .await?;
            Ok(pb::StopTaskResponse {})
        })
        .await
    }

    /// Makes sure the session has a live process to ask: with none, spawns
    /// one resuming its conversation, with no prompt (a run like a Start
    /// with an empty prompt: idle, alive, ending at the idle timeout; the
    /// CLI answers a control request without a turn). The resumed CLI
    /// knows its file checkpoints from its transcript. NoLiveProcess when
    /// the session has no conversation yet or the adapter cannot run
    /// without a prompt (one-shot).
    async fn live_for_control(&self, session_id: &str) -> Result<()> {
        let Some(slot) = self.known_slot(session_id).await? else {
            return Err(Error::unknown_session(session_id));
        };
        let no_process = || Error::NoLiveProcess {
            session_id: session_id.to_owned(),
        };
        self.check_open()?;
        let claim = match slot.enter() {
            Entry::Free(claim) => claim,
            // A run task answers; one that is ending says so.
            Entry::Occupied(_) => return Ok(()),
        };
        let resume = claim
            .fold()
            .current(&self.inner.logs, session_id, |d| d.resume_or_lost())
            .await?;
        if !matches!(resume, Ok(ref id) if !id.is_empty()) {
            return Err(no_process());
        }
        let config = self
            .respawn_config(&slot, session_id, String::new(), Vec::new())
            .await?;
        let probe = crate::adapter::SpawnConfig {
            session_id: session_id.to_owned(),
            config: config.clone(),
            ..Default::default()
        };
        if self.inner.adapter.check(&probe).is_err() {
            return Err(no_process());
        }
        self.spawn_run(session_id, claim, config, Trigger::Control, None)
            .await
            .map(drop)
    }

    /// [`SessionManager::control`], appending `record` when the CLI says
    /// success.
    async fn control_recorded(
        &self,
        session_id: &str,
        request: Value,
        record: Option<Record>,
    ) -> Result<Answered> {
        self.claim(session_id).await?;
        let Some(slot) = self.known_slot(session_id).await? else {
            return Err(Error::unknown_session(session_id));
        };
        let cmd = |reply| RunCmd::Control {
            request: request.clone(),
            record: record.clone().map(Box::new),
            reply,
        };
        match slot.ask_or_claim(cmd).await {
            Ok(answer) => answer.map_err(failure),
            Err(_claim) => Err(Error::NoLiveProcess {
                session_id: session_id.to_owned(),
            }),
        }
    }

    /// Changes a setting (SetModel, SetPermissionMode,
    /// SetMaxThinkingTokens): on the live process, recorded when the CLI
    /// says success; with no live process, recorded for the next spawn.
    /// Returns how it took effect and the seq of its `setting_changed`. A
    /// keyed repeat returns the first call's answer and changes nothing.
    pub async fn change_setting(
        &self,
        session_id: &str,
        key: Option<&str>,
        change: SettingChange,
    ) -> Result<(pb::SettingApplied, u64)> {
        match &change {
            SettingChange::Model(m) => launch::check_model(m).map_err(|e| e.renamed("model"))?,
            SettingChange::PermissionMode(m) if m.is_empty() => {
                return Err(Error::invalid("mode", "empty; name a permission mode"));
            }
            SettingChange::PermissionMode(m) => {
                self.inner.opts.launch.check_permission_mode("mode", m)?
            }
            SettingChange::MaxThinkingTokens(n) => {
                launch::check_thinking_tokens("max_thinking_tokens", *n)?
            }
        }
        let Some(slot) = self.known_slot(session_id).await? else {
            return Err(Error::unknown_session(session_id));
        };
        let request = SettingRequest {
            session_id,
            key: key.unwrap_or_default(),
            change: &change,
        };
        let change = &change;
        let answer = self
            .idempotent(&request, |keyed| async move {
                let (applied, seq) = self
                    .change_setting_inner(session_id, &slot, change, keyed.as_ref())
                    .await?;
                // SetPermissionMode and SetMaxThinkingTokens answer the
                // same message.
                Ok(pb::SetModelResponse {
                    applied: applied as i32,
                    seq,
                })
            })
            .await?;
        Ok((answer.applied(), answer.seq))
    }

    async fn change_setting_inner(
        &self,
        session_id: &str,
        slot: &Arc<Slot>,
        change: &SettingChange,
        keyed: Option<&Keyed>,
    ) -> Result<(pb::SettingApplied, u64)> {
        let cmd = |reply| RunCmd::Control {
            request: change.request(),
            record: Some(Box::new(Record {
                payload: change.event(pb::SettingApplied::Live),
                keyed: keyed.cloned(),
            })),
            reply,
        };
        let claim = match self.run_records_or_claim(session_id, slot, cmd).await? {
            Ok(Answered {
                seq,
                recorded: Some(Payload::SettingChanged(s)),
                ..
            }) => return Ok((s.applied(), seq)),
            Ok(_) => return Err(Error::Internal("a setting change recorded no event".into())),
            Err(claim) => claim,
        };
        let applied = pb::SettingApplied::NextSpawn;
        let seq = self
            .commit_claimed(session_id, slot, claim, change.event(applied), |seq| {
                keyed.put(|| pb::SetModelResponse {
                    applied: applied as i32,
                    seq,
                })
            })
            .await?;
        Ok((applied, seq))
    }

    /// Has the session's live run record an event (`cmd` carries its
    /// [`Record`]; the run appends it in order with its own events, being
    /// the session's one writer while it lives), or, with no run (or once
    /// the one ending is gone), returns the claim so the caller appends it
    /// with [`SessionManager::commit_claimed`].
    pub(super) async fn run_records_or_claim(
        &self,
        session_id: &str,
        slot: &Arc<Slot>,
        cmd: impl Fn(ControlReplyTx) -> RunCmd,
    ) -> Result<std::result::Result<Answered, Claim>> {
        loop {
            self.check_open()?;
            let run = match slot.enter() {
                Entry::Free(claim) => return Ok(Err(claim)),
                Entry::Occupied(run) => run,
            };
            match run.ask(&cmd).await {
                Some(Ok(answered)) => return Ok(Ok(answered)),
                // The process is on its way out: record once it is gone.
                Some(Err(ControlFailure::Ended)) => {
                    self.wait_released(session_id, &run.ended).await?
                }
                Some(Err(f)) => return Err(failure(f)),
                None => {}
            }
        }
    }

    /// Appends `payload` as the session's writer (holding `claim`: no run
    /// lives), with the receipt `receipt` gives for its seq in the same
    /// commit, and folds it; returns its seq.
    pub(super) async fn commit_claimed(
        &self,
        session_id: &str,
        slot: &Arc<Slot>,
        claim: Claim,
        payload: Payload,
        receipt: impl FnOnce(u64) -> Option<ReceiptWrite>,
    ) -> Result<u64> {
        if !self.inner.logs.exists(session_id).await? {
            return Err(Error::unknown_session(session_id));
        }
        let head = self
            .current(slot, session_id, |d| d.fold.status_fold().head_seq())
            .await?;
        let appended = self
            .inner
            .logs
            .commit(
                session_id,
                Commit::events(vec![NewEvent {
                    run_id: String::new(),
                    payload,
                    cli_line: String::new(),
                }])
                .with_receipt(receipt(head + 1)),
            )
            .await?;
        slot.fold.applied(&appended);
        drop(claim);
        Ok(appended.first().map_or(head + 1, |e| e.seq))
    }

    /// Undoes the agent's file edits back to the user message of the
    /// `input_sent` at `to_seq` (`rewind_files`): a dry run first learns
    /// what changes (and whether the CLI can), then, unless `dry_run`, the
    /// rewind itself, recorded as `files_rewound`. Needs the live process.
    pub async fn rewind_files(
        &self,
        request: pb::RewindFilesRequest,
    ) -> Result<pb::RewindFilesResponse> {
        let session_id = request.session_id.as_str();
        let to_seq = request.to_seq;
        if !self.inner.logs.exists(session_id).await? {
            return Err(Error::unknown_session(session_id));
        }
        let uuid = match self.inner.logs.full_event(session_id, to_seq).await? {
            Some(pb::Event {
                payload: Some(Payload::InputSent(i)),
                ..
            }) if !i.message_uuid.is_empty() => i.message_uuid,
            Some(_) => {
                return Err(Error::invalid(
                    "to_seq",
                    format!(
                        "event {to_seq} is not a user message this server sent (an input_sent \
                         with a message_uuid)"
                    ),
                ));
            }
            None => {
                return Err(Error::invalid(
                    "to_seq",
                    format!("session {session_id:?} has no event {to_seq}"),
                ));
            }
        };
        let (req, uuid) = (&request, uuid.as_str());
        self.idempotent(req, |keyed| async move {
            self.rewind_files_inner(req, uuid, keyed.as_ref()).await
        })
        .await
    }

    async fn rewind_files_inner(
        &self,
        request: &pb::RewindFilesRequest,
        uuid: &str,
        keyed: Option<&Keyed>,
    ) -> Result<pb::RewindFilesResponse> {
        let (session_id, to_seq) = (request.session_id.as_str(), request.to_seq);
        let dry_run = json!({"subtype": "rewind_files", "user_message_id": uuid, "dry_run": true});
        self.live_for_control(session_id).await?;
        let preview = match self.control(session_id, dry_run.clone()).await {
            // The run found was ending (an idle timeout: its run_end
            // committed, its task not yet gone) and went away before it
            // was asked: now the slot is free, so spawn one and ask again.
            Err(Error::NoLiveProcess { .. }) => {
                self.live_for_control(session_id).await?;
                self.control(session_id, dry_run).await?
            }
            other => other?,
        };
        let files_changed: Vec<String> = preview
            .get("filesChanged")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|f| f.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default();
        let count = |k: &str| preview.get(k).and_then(Value::as_u64).unwrap_or(0);
        let mut rewound = pb::RewindFilesResponse {
            files_changed,
            insertions: count("insertions"),
            deletions: count("deletions"),
            seq: 0,
        };
        if request.dry_run {
            // A dry run changes nothing: it leaves no receipt, and its
            // repeat asks the CLI again.
            if let Some(k) = keyed {
                k.leave_unrecorded();
            }
            return Ok(rewound);
        }
        let record = Record {
            payload: Payload::FilesRewound(pb::FilesRewound {
                to_seq,
                message_uuid: uuid.to_owned(),
                files_changed: rewound.files_changed.clone(),
                insertions: rewound.insertions,
                deletions: rewound.deletions,
            }),
            keyed: keyed.cloned(),
        };
        let answered = self
            .control_recorded(
                session_id,
                json!({"subtype": "rewind_files", "user_message_id": uuid}),
                Some(record),
            )
            .await?;
        rewound.seq = answered.seq;
        Ok(rewound)
    }
}
