//! The path of a Send: to the live process when its run task takes it,
//! else (after waiting out a process on its way out) as the prompt of a
//! respawn that continues the session's conversation with its last config.

use std::sync::Arc;

use agent_harness_protocol::pb;
use agent_harness_protocol::pb::event::Payload;
use pbjson_types::Struct;

use super::receipts::Keyed;
use super::run::{RunCmd, WriteRefused};
use super::slot::{Entry, Slot};
use super::spawn::Trigger;
use super::{SEND_FIELDS, SessionManager};
use crate::adapter::UserInput;
use crate::error::{Error, Result};

impl SessionManager {
    /// Delivers user input: to the live keep-alive process, or as the prompt
    /// of a new run resuming the session. Returns the run that got it. A
    /// repeat of a Send this session applied with the same
    /// `idempotency_key` returns its run and writes nothing.
    pub async fn send(&self, request: pb::SendRequest) -> Result<pb::SendResponse> {
        let session_id = request.session_id.as_str();
        let Some(slot) = self.known_slot(session_id).await? else {
            return Err(Error::unknown_session(session_id));
        };
        self.check_input(SEND_FIELDS, &request.input, &request.content_blocks)?;
        let req = &request;
        self.idempotent(req, |keyed| async move {
            let run_id = self.send_inner(&slot, req, keyed.as_ref()).await?;
            Ok(pb::SendResponse { run_id })
        })
        .await
    }

    async fn send_inner(
        &self,
        slot: &Arc<Slot>,
        request: &pb::SendRequest,
        keyed: Option<&Keyed>,
    ) -> Result<String> {
        let session_id = request.session_id.as_str();
        let (text, content_blocks) = (&request.input, &request.content_blocks);
        // One uuid per message, whichever way it goes in.
        let uuid = uuid::Uuid::new_v4().to_string();
        let claim = loop {
            self.check_open()?;
            let run = match slot.enter() {
                Entry::Free(claim) => break claim,
                Entry::Occupied(run) => run,
            };
            let input = UserInput {
                text: text.clone(),
                content_blocks: content_blocks.clone(),
                uuid: uuid.clone(),
            };
            let keyed = keyed.cloned();
            match run
                .ask(|reply| RunCmd::Write {
                    input,
                    keyed,
                    reply,
                })
                .await
            {
                Some(Ok(run_id)) => return Ok(run_id),
                Some(Err(WriteRefused::QueueFull(why))) => return Err(Error::ResourceLimit(why)),
                Some(Err(WriteRefused::NotRecorded(why))) => return Err(Error::Storage(why)),
                Some(Err(WriteRefused::Unable(why))) => return Err(Error::Unsupported(why)),
                Some(Err(WriteRefused::OneShotBusy { run_id })) => {
                    return Err(Error::OneShotBusy {
                        session_id: session_id.to_owned(),
                        run_id,
                    });
                }
                // The process is on its way out: wait for its run_end, then
                // respawn, so the caller never sees the difference.
                Some(Err(WriteRefused::Ending)) => {
                    self.wait_released(session_id, &run.ended).await?
                }
                None => {}
            }
        };
        let config = self
            .respawn_config(slot, session_id, text.clone(), content_blocks.clone())
            .await?;
        let started = self
            .spawn_run_with(session_id, claim, config, Trigger::Send, keyed, uuid)
            .await?;
        Ok(started.run_id)
    }

    /// The config a respawn of this session (no live process; the caller
    /// holds its claim) starts with: the last run's cwd, env, args and
    /// settings, with the settings changed since (the env's values from the
    /// meta: the log has only the names), and `prompt`. It continues the
    /// session's own conversation (a fork's source is behind it).
    /// [`Error::RunNotOwned`] when the log shows a live run anyway.
    pub(super) async fn respawn_config(
        &self,
        slot: &Slot,
        session_id: &str,
        prompt: String,
        content_blocks: Vec<Struct>,
    ) -> Result<pb::StartConfig> {
        if !self.inner.logs.exists(session_id).await? {
            return Err(Error::unknown_session(session_id));
        }
        let (run_live, mut last, last_cut, changed) = self
            .current(slot, session_id, |d| {
                (
                    d.fold.status_fold().run_live(),
                    d.last_config.clone(),
                    d.last_config_cut,
                    d.changed.clone(),
                )
            })
            .await?;
        if let Some(seq) = last_cut {
            // Its event was streamed cut down: take the args from the whole one.
            if let Some(pb::Event {
                payload: Some(Payload::RunStart(rs)),
                ..
            }) = self.inner.logs.full_event(session_id, seq).await?
            {
                last = rs.config;
            }
        }
        if run_live {
            return Err(Error::RunNotOwned {
                session_id: session_id.to_owned(),
            });
        }
        let last = last.unwrap_or_default();
        let env = self.respawn_env(session_id, &last.env).await?;
        let mut config = pb::StartConfig {
            prompt,
            content_blocks,
            resume: String::new(),
            fork: None,
            env,
            ..last
        };
        changed.apply_to(&mut config);
        Ok(config)
    }
}
