//! Forking a session (`StartConfig.fork`): the new session's first run
//! resumes the source's CLI conversation with `--fork-session` (and
//! `--resume-session-at` the message at `at_seq`), so the CLI copies it
//! into a new conversation of its own and the source is left untouched.

use agent_harness_protocol::pb;
use agent_harness_protocol::pb::event::Payload;

use super::SessionManager;
use super::fold::FoldCell;
use crate::error::{Error, Result};
use crate::validate;

/// What a fork request must be before any state is looked at: a valid
/// source id that is not the session itself, and no resume id of its own.
pub(super) fn check_fork(session_id: &str, config: &pb::StartConfig) -> Result<()> {
    let Some(fork) = &config.fork else {
        return Ok(());
    };
    validate::session_id(&fork.from_session_id)
        .map_err(|e| e.renamed("config.fork.from_session_id"))?;
    if fork.from_session_id == session_id {
        return Err(Error::invalid(
            "config.fork.from_session_id",
            "a session cannot fork itself; Start the fork under a new session id",
        ));
    }
    if !config.resume.is_empty() {
        return Err(Error::invalid(
            "config.resume",
            "a fork resumes its source's conversation; leave resume empty",
        ));
    }
    Ok(())
}

impl SessionManager {
    /// Fills in a fork's Start config from its source: the source's
    /// conversation as `resume`, the CLI's uuid of the message at `at_seq`,
    /// and the source's cwd and settings where the config leaves them
    /// empty. No-op without `fork`. Refused for a session that already has
    /// a conversation of its own (fork into a new session id). The request
    /// itself passed [`check_fork`].
    pub(super) async fn resolve_fork(
        &self,
        session_id: &str,
        target: &FoldCell,
        config: &mut pb::StartConfig,
    ) -> Result<()> {
        // check_fork has passed (before the slot was claimed).
        let Some(fork) = config.fork.as_mut() else {
            return Ok(());
        };
        let source = fork.from_session_id.clone();
        let own = target
            .current(&self.inner.logs, session_id, |d| {
                d.fold.resume_id().map(str::to_owned)
            })
            .await?;
        if own.is_some() {
            return Err(Error::invalid(
                "config.fork",
                format!(
                    "session {session_id:?} already has a conversation; fork into a new session id"
                ),
            ));
        }
        if !self.inner.logs.exists(&source).await? {
            return Err(Error::invalid(
                "config.fork.from_session_id",
                format!("no session {source:?}"),
            ));
        }
        let src = FoldCell::default();
        let (resume, last, changed, head, agent) = src
            .current(&self.inner.logs, &source, |d| {
                (
                    d.fold.resume_id().map(str::to_owned),
                    d.last_config.clone().unwrap_or_default(),
                    d.changed.clone(),
                    d.fold.status_fold().head_seq(),
                    d.fold.agent().map(str::to_owned),
                )
            })
            .await?;
        let Some(resume) = resume else {
            return Err(Error::NotForkable(format!(
                "session {source:?} has no CLI conversation to fork yet (no run_ready with a \
                 resume id)"
            )));
        };
        fork.message_uuid = String::new();
        if fork.at_seq != 0 {
            if fork.at_seq > head {
                return Err(Error::invalid(
                    "config.fork.at_seq",
                    format!("session {source:?} has no event {}", fork.at_seq),
                ));
            }
            fork.message_uuid = self.message_uuid_at(&source, fork.at_seq).await?;
        }
        super::keep_agent(config, agent.as_deref(), "the source session")?;
        config.resume = resume;
        if config.cwd.is_empty() {
            config.cwd = last.cwd.clone();
        }
        let mut inherited = last;
        changed.apply_to(&mut inherited);
        if config.model.is_empty() {
            config.model = inherited.model;
        }
        if config.permission_mode.is_empty() {
            config.permission_mode = inherited.permission_mode;
        }
        if config.max_thinking_tokens.is_none() {
            config.max_thinking_tokens = inherited.max_thinking_tokens;
        }
        Ok(())
    }

    /// The CLI's uuid of the assistant message at `seq` (its `content`
    /// event's CLI line).
    async fn message_uuid_at(&self, source: &str, seq: u64) -> Result<String> {
        let not_content = || {
            Error::invalid(
                "config.fork.at_seq",
                format!(
                    "event {seq} of session {source:?} is not an assistant message (a content \
                     event); fork at one of those"
                ),
            )
        };
        let Some(e) = self.inner.logs.full_event(source, seq).await? else {
            return Err(not_content());
        };
        if !matches!(e.payload, Some(Payload::Content(_))) {
            return Err(not_content());
        }
        serde_json::from_str::<serde_json::Value>(&e.cli_line)
            .ok()
            .and_then(|v| v.get("uuid").and_then(|u| u.as_str()).map(str::to_owned))
            .filter(|u| !u.is_empty())
            .ok_or_else(|| {
                Error::invalid(
                    "config.fork.at_seq",
                    format!("event {seq} of session {source:?} has no CLI message uuid to fork at"),
                )
            })
    }
}
