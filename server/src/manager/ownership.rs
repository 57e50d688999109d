//! One conversation, one session: which CLI conversation a run may resume.
//!
//! A conversation (`--resume <id>`) holds everything said in it and the
//! CLI appends to it, so two sessions resuming one conversation would write
//! into each other's history. A session may therefore resume only a
//! conversation its own log names (a `run_ready` announced it, or an
//! earlier run of the session resumed it); the store keeps that as an index
//! committed with the event that names it ([`crate::store::conversations`]).
//! A conversation the server never saw (made by a CLI outside it) may be
//! imported only when the operator allows it (`--allow-resume-import`),
//! and never one another session of this server names. A fork needs none
//! of this: the server takes the source's conversation itself and the CLI
//! copies it into a new one (`--fork-session`).

use tokio::sync::MutexGuard;

use super::SessionManager;
use crate::error::{Error, Result};

impl SessionManager {
    /// Whether `session_id` may resume conversation `resume_id` given by a
    /// client (`config.resume`); refuses with PERMISSION_DENIED naming
    /// `config.resume`, before anything is appended. An import returns a
    /// guard, to hold until its `run_start` (which names the conversation
    /// for this session) is committed, so two sessions cannot import one
    /// conversation at once.
    pub(super) async fn check_resume(
        &self,
        session_id: &str,
        resume_id: &str,
    ) -> Result<Option<MutexGuard<'_, ()>>> {
        let owners = self.inner.logs.conversation_sessions(resume_id).await?;
        if owners.iter().any(|s| s == session_id) {
            return Ok(None);
        }
        if !owners.is_empty() {
            return Err(Error::PolicyDenied(format!(
                "config.resume: conversation {resume_id:?} belongs to another session of this \
                 server; a session resumes only its own conversation (fork that session to \
                 continue from it: config.fork)"
            )));
        }
        if !self.inner.opts.allow_resume_import {
            return Err(Error::PolicyDenied(format!(
                "config.resume: conversation {resume_id:?} was not recorded for session \
                 {session_id:?}; leave config.resume empty to continue the session's own \
                 conversation (importing one made outside this server needs \
                 --allow-resume-import)"
            )));
        }
        // Checked again under the import lock: another session may have
        // imported it while this one waited.
        let guard = self.inner.imports.lock().await;
        let owners = self.inner.logs.conversation_sessions(resume_id).await?;
        if owners.iter().any(|s| s != session_id) {
            return Err(Error::PolicyDenied(format!(
                "config.resume: conversation {resume_id:?} belongs to another session of this \
                 server"
            )));
        }
        Ok(Some(guard))
    }
}
