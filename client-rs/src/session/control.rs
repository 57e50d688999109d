//! Controlling the live session: the RPCs that act on the
//! session's CLI process or its settings rather than on the conversation.
//! Each is one logical call with one idempotency key, retried in transit
//! with that key like [`SessionClient::send`]; the `*_with_key` variants
//! take a key the application keeps itself. The settings a client changes
//! are recorded in the log (`setting_changed`), so the snapshot's
//! [`Derived::settings`](crate::derive::Derived::settings) shows what is in
//! force.

use super::{SessionClient, SessionError, new_idempotency_key};
use crate::pb;

impl SessionClient {
    /// Stops one background task of the live process: `task_id` is the
    /// `task_id` of its `task_started` event (a backgrounded Bash, a
    /// background subagent). The turn and the process go on; the CLI's
    /// `task_updated{killed}` / `task_notification{stopped}` follow in the
    /// log. FAILED_PRECONDITION without a live process. Retried in transit
    /// with one fresh idempotency key (stopping a stopped task changes
    /// nothing anyway).
    pub async fn stop_task(&self, task_id: impl Into<String>) -> Result<(), SessionError> {
        self.stop_task_with_key(new_idempotency_key(), task_id)
            .await
    }

    /// [`stop_task`](Self::stop_task) under `key`.
    pub async fn stop_task_with_key(
        &self,
        key: impl Into<String>,
        task_id: impl Into<String>,
    ) -> Result<(), SessionError> {
        let request = pb::StopTaskRequest {
            session_id: self.inner.session_id.clone(),
            task_id: task_id.into(),
            idempotency_key: key.into(),
        };
        self.retrying("StopTask", |mut rpc| {
            let request = request.clone();
            async move { rpc.stop_task(request).await }
        })
        .await
        .map(|_| ())
    }

    /// Deletes the session (DeleteSession): its live run is stopped, then
    /// its log and stored state are removed; the server ends the session's
    /// Subscribe streams with NOT_FOUND. Retried in transit with one fresh
    /// idempotency key, so a retry after the deletion went through succeeds
    /// again.
    pub async fn delete(&self) -> Result<(), SessionError> {
        self.delete_with_key(new_idempotency_key()).await
    }

    /// [`delete`](Self::delete) under `key`.
    pub async fn delete_with_key(&self, key: impl Into<String>) -> Result<(), SessionError> {
        let request = pb::DeleteSessionRequest {
            session_id: self.inner.session_id.clone(),
            idempotency_key: key.into(),
        };
        self.retrying("DeleteSession", |mut rpc| {
            let request = request.clone();
            async move { rpc.delete_session(request).await }
        })
        .await
        .map(|_| ())
    }

    /// How full the live process's context window is, as the CLI counts
    /// it: tokens in use, the window, and the tokens by category (those
    /// other than "Free space" add up to `total_tokens`); `raw` holds the
    /// CLI's whole answer. FAILED_PRECONDITION without a live process.
    /// Read-only, so a call that fails in transit is simply retried.
    pub async fn get_context_usage(&self) -> Result<pb::GetContextUsageResponse, SessionError> {
        let request = pb::GetContextUsageRequest {
            session_id: self.inner.session_id.clone(),
        };
        self.retrying("GetContextUsage", |mut rpc| {
            let request = request.clone();
            async move { rpc.get_context_usage(request).await }
        })
        .await
    }

    /// Switches the model (an alias or name; empty: back to the CLI's
    /// default) on the live process at once (`applied` LIVE), or, with no
    /// live process, records it for the next spawn (NEXT_SPAWN); every
    /// later spawn applies it too. Recorded as a `setting_changed` event at
    /// the response's `seq`.
    pub async fn set_model(
        &self,
        model: impl Into<String>,
    ) -> Result<pb::SetModelResponse, SessionError> {
        self.set_model_with_key(new_idempotency_key(), model).await
    }

    /// [`set_model`](Self::set_model) under `key`: a repeat answers the
    /// first call's response and records nothing again.
    pub async fn set_model_with_key(
        &self,
        key: impl Into<String>,
        model: impl Into<String>,
    ) -> Result<pb::SetModelResponse, SessionError> {
        let request = pb::SetModelRequest {
            session_id: self.inner.session_id.clone(),
            model: model.into(),
            idempotency_key: key.into(),
        };
        self.retrying("SetModel", |mut rpc| {
            let request = request.clone();
            async move { rpc.set_model(request).await }
        })
        .await
    }

    /// Switches the permission mode (`default`, `plan`, `dontAsk`,
    /// `acceptEdits`, `auto`, `bypassPermissions`) like
    /// [`set_model`](Self::set_model). PERMISSION_DENIED for a mode beyond
    /// the operator's policy.
    pub async fn set_permission_mode(
        &self,
        mode: impl Into<String>,
    ) -> Result<pb::SetPermissionModeResponse, SessionError> {
        self.set_permission_mode_with_key(new_idempotency_key(), mode)
            .await
    }

    /// [`set_permission_mode`](Self::set_permission_mode) under `key`.
    pub async fn set_permission_mode_with_key(
        &self,
        key: impl Into<String>,
        mode: impl Into<String>,
    ) -> Result<pb::SetPermissionModeResponse, SessionError> {
        let request = pb::SetPermissionModeRequest {
            session_id: self.inner.session_id.clone(),
            mode: mode.into(),
            idempotency_key: key.into(),
        };
        self.retrying("SetPermissionMode", |mut rpc| {
            let request = request.clone();
            async move { rpc.set_permission_mode(request).await }
        })
        .await
    }

    /// Sets the thinking budget per turn (`Some(0)` turns thinking off;
    /// `None` goes back to the CLI's default) like
    /// [`set_model`](Self::set_model).
    pub async fn set_max_thinking_tokens(
        &self,
        max_thinking_tokens: Option<u32>,
    ) -> Result<pb::SetMaxThinkingTokensResponse, SessionError> {
        self.set_max_thinking_tokens_with_key(new_idempotency_key(), max_thinking_tokens)
            .await
    }

    /// [`set_max_thinking_tokens`](Self::set_max_thinking_tokens) under `key`.
    pub async fn set_max_thinking_tokens_with_key(
        &self,
        key: impl Into<String>,
        max_thinking_tokens: Option<u32>,
    ) -> Result<pb::SetMaxThinkingTokensResponse, SessionError> {
        let request = pb::SetMaxThinkingTokensRequest {
            session_id: self.inner.session_id.clone(),
            max_thinking_tokens,
            idempotency_key: key.into(),
        };
        self.retrying("SetMaxThinkingTokens", |mut rpc| {
            let request = request.clone();
            async move { rpc.set_max_thinking_tokens(request).await }
        })
        .await
    }

    /// Names the session (trimmed, one line, at most 200 characters;
    /// empty: back to the title derived from its first prompt), with or
    /// without a live process; the CLI is not involved. Recorded as a
    /// `title_set` event at the response's `seq`, and derived into
    /// `Snapshot::derived.title` (and GetSession's `Session.title`).
    pub async fn set_title(
        &self,
        title: impl Into<String>,
    ) -> Result<pb::SetTitleResponse, SessionError> {
        self.set_title_with_key(new_idempotency_key(), title).await
    }

    /// [`set_title`](Self::set_title) under `key`.
    pub async fn set_title_with_key(
        &self,
        key: impl Into<String>,
        title: impl Into<String>,
    ) -> Result<pb::SetTitleResponse, SessionError> {
        let request = pb::SetTitleRequest {
            session_id: self.inner.session_id.clone(),
            title: title.into(),
            idempotency_key: key.into(),
        };
        self.retrying("SetTitle", |mut rpc| {
            let request = request.clone();
            async move { rpc.set_title(request).await }
        })
        .await
    }

    /// Undoes the agent's file edits back to a user message: `to_seq` is
    /// the seq of its `input_sent` event, and every file the CLI changed
    /// since is restored to its state just before it. Returns the files and
    /// line counts; with `dry_run` it only lists them (and records
    /// nothing). A real rewind is recorded as a `files_rewound` event at
    /// the response's `seq`. Needs the live process that made the edits
    /// (FAILED_PRECONDITION otherwise).
    pub async fn rewind_files(
        &self,
        to_seq: u64,
        dry_run: bool,
    ) -> Result<pb::RewindFilesResponse, SessionError> {
        self.rewind_files_with_key(new_idempotency_key(), to_seq, dry_run)
            .await
    }

    /// [`rewind_files`](Self::rewind_files) under `key`.
    pub async fn rewind_files_with_key(
        &self,
        key: impl Into<String>,
        to_seq: u64,
        dry_run: bool,
    ) -> Result<pb::RewindFilesResponse, SessionError> {
        let request = pb::RewindFilesRequest {
            session_id: self.inner.session_id.clone(),
            to_seq,
            dry_run,
            idempotency_key: key.into(),
        };
        self.retrying("RewindFiles", |mut rpc| {
            let request = request.clone();
            async move { rpc.rewind_files(request).await }
        })
        .await
    }
}
