//! The tonic `SessionService`: validation and mapping only.
//!
//! Each handler checks the `x-session-id` header against its session
//! ([`crate::routing`]), validates its request (INVALID_ARGUMENT naming the field),
//! calls the [`SessionManager`] or the [`EventLogs`], and maps the crate's
//! domain [`Error`] to a gRPC status with the one `From<Error> for Status`
//! below (the only place that picks codes). No state lives here.

use std::pin::Pin;
use std::sync::Arc;

use agent_harness_protocol::pb;
use agent_harness_protocol::pb::session_service_server::SessionService;
use futures::{Stream, StreamExt};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tonic::{Code, Request, Response, Status};

use crate::adapter::claude::context_usage;
use crate::error::Error;
use crate::log::{EventLogs, Frame, HistoryPage};
use crate::manager::{SessionManager, SettingChange};
use crate::routing::routed;
use crate::start_limit::StartLimit;
use crate::validate;

mod drain;
use drain::drain_on_shutdown;

/// The SessionService implementation.
#[derive(Debug, Clone)]
pub struct Rpc {
    manager: SessionManager,
    logs: EventLogs,
    /// Cancelled at shutdown: ends every Subscribe stream cleanly, so the
    /// server's graceful shutdown does not wait on them.
    shutdown: CancellationToken,
    /// One permit per open Subscribe stream (`--max-streams`), held by the
    /// stream and released when it is dropped.
    streams: Arc<Semaphore>,
    /// The cap, for the error message.
    max_streams: usize,
    /// `--max-sessions-per-minute`: Starts that create a session, per peer.
    start_limit: Arc<StartLimit>,
}

impl Rpc {
    /// SetModel, SetPermissionMode, SetMaxThinkingTokens.
    async fn change_setting(
        &self,
        session_id: &str,
        key: &str,
        change: SettingChange,
    ) -> Result<(pb::SettingApplied, u64), Error> {
        validate::session_id(session_id)?;
        let key = validate::idempotency_key(key)?;
        self.manager.change_setting(session_id, key, change).await
    }

    /// NOT_FOUND unless the session exists (an unknown id costs a store
    /// lookup and leaves nothing behind).
    async fn require_session(&self, session_id: &str) -> Result<(), Error> {
        if self.logs.exists(session_id).await? {
            Ok(())
        } else {
            Err(Error::unknown_session(session_id))
        }
    }

    /// A permit for one more open stream (Subscribe, ReadFullEvent), or
    /// RESOURCE_EXHAUSTED past `--max-streams`.
    fn stream_permit(&self) -> Result<tokio::sync::OwnedSemaphorePermit, Error> {
        self.streams.clone().try_acquire_owned().map_err(|_| {
            Error::ResourceLimit(format!(
                "{} streams (Subscribe, ReadFullEvent) are open, the most this server allows \
                 (--max-streams); close one or retry later",
                self.max_streams
            ))
        })
    }

    /// A service over `manager` (whose logs it streams); streams end when
    /// `shutdown` is cancelled.
    pub fn new(manager: SessionManager, shutdown: CancellationToken) -> Self {
        let logs = manager.logs().clone();
        let max_streams = DEFAULT_MAX_STREAMS;
        Self {
            manager,
            logs,
            shutdown,
            streams: Arc::new(Semaphore::new(max_streams)),
            max_streams,
            start_limit: Arc::new(StartLimit::new(0)),
        }
    }

    /// Streams (Subscribe, ReadFullEvent) open now, over every clone.
    pub fn open_streams(&self) -> usize {
        self.max_streams
            .saturating_sub(self.streams.available_permits())
    }

    /// Most streams open at once (`--max-streams`).
    pub fn max_streams(&self) -> usize {
        self.max_streams
    }

    /// Limits how many sessions one peer may create per minute (0 =
    /// unlimited; see [`StartLimit`]).
    pub fn with_max_sessions_per_minute(mut self, per_minute: u32) -> Self {
        self.start_limit = Arc::new(StartLimit::new(per_minute));
        self
    }

    /// A Start that would create a session takes a token of its peer's
    /// bucket: [`Error::RateLimited`] when it is empty.
    async fn admit_new_session(
        &self,
        session_id: &str,
        peer: Option<std::net::IpAddr>,
    ) -> Result<(), Error> {
        if !self.start_limit.enabled() || self.logs.exists(session_id).await? {
            return Ok(());
        }
        self.start_limit
            .take(peer)
            .map_err(|retry_after| Error::RateLimited {
                per_minute: self.start_limit.per_minute(),
                retry_after,
            })
    }

    /// Caps the Subscribe streams open at once; one more gets
    /// RESOURCE_EXHAUSTED.
    pub fn with_max_streams(mut self, max_streams: usize) -> Self {
        self.streams = Arc::new(Semaphore::new(max_streams));
        self.max_streams = max_streams;
        self
    }
}

/// The gRPC code a client gets for each domain error: what it can act on.
/// (docs/api.md, "Errors", lists the same table.)
fn code(e: &Error) -> Code {
    match e {
        // Fix the request.
        Error::InvalidField { .. } | Error::IdempotencyKeyReused { .. } => Code::InvalidArgument,
        // Nothing by that name.
        Error::UnknownSession { .. }
        | Error::UnknownEvent { .. }
        | Error::PermissionRequestNotPending { .. } => Code::NotFound,
        // Not in this state: retrying the same call does not help until
        // the state changes (the run ends, the operator fixes something).
        Error::RunLive { .. }
        | Error::RunNotOwned { .. }
        | Error::OneShotBusy { .. }
        | Error::RespawnImpossible { .. }
        | Error::ProcessExited(_)
        | Error::NoLiveProcess { .. }
        | Error::NotForkable(_)
        | Error::CliRefused(_)
        | Error::BinaryNotFound(_)
        | Error::Unsupported(_)
        | Error::Config(_) => Code::FailedPrecondition,
        Error::PolicyDenied(_) => Code::PermissionDenied,
        Error::ResourceLimit(_) | Error::RateLimited { .. } => Code::ResourceExhausted,
        // Transient: the same call may work a little later.
        Error::ShuttingDown | Error::StillEnding { .. } | Error::NotOwner { .. } => {
            Code::Unavailable
        }
        Error::CliTimeout(_) => Code::DeadlineExceeded,
        Error::Storage(_) | Error::Spawn(_) | Error::Internal(_) => Code::Internal,
    }
}

impl From<Error> for Status {
    fn from(e: Error) -> Self {
        let mut status = Status::new(code(&e), crate::error::bounded(e.to_string()));
        if let Error::RateLimited { retry_after, .. } = &e {
            // Whole seconds, rounded up, as HTTP's Retry-After.
            let secs = retry_after.as_secs() + u64::from(retry_after.subsec_nanos() > 0);
            if let Ok(v) = secs.to_string().parse() {
                status.metadata_mut().insert("retry-after", v);
            }
        }
        if let Error::NotOwner {
            owner: Some((node, _)),
            ..
        } = &e
            && let Ok(v) = node.parse()
        {
            status.metadata_mut().insert(OWNER_HEADER, v);
        }
        status
    }
}

/// The trailer naming the node that owns a session, on an UNAVAILABLE
/// answer to a write that reached another node.
pub const OWNER_HEADER: &str = "x-agent-harness-owner";

/// Default of `--max-streams` (and of a new [`Rpc`]): an idle stream costs
/// a few KiB.
pub const DEFAULT_MAX_STREAMS: usize = 16_384;

/// Largest (and default) ReadFullEvent chunk.
pub const FULL_EVENT_CHUNK: usize = 1024 * 1024;

/// The ReadFullEvent stream type.
pub type ReadFullEventStream =
    Pin<Box<dyn Stream<Item = Result<pb::ReadFullEventResponse, Status>> + Send + 'static>>;

/// The bytes of one part of a whole event.
fn full_event_part(event: pb::Event, part: pb::FullEventPart) -> Result<Vec<u8>, Error> {
    use prost::Message;
    Ok(match part {
        pb::FullEventPart::Unspecified | pb::FullEventPart::CliLine => event.cli_line.into_bytes(),
        pb::FullEventPart::Event => event.encode_to_vec(),
        pb::FullEventPart::EventJson => serde_json::to_vec(&event)
            .map_err(|e| Error::Internal(format!("event {} as JSON: {e}", event.seq)))?,
    })
}

/// The Subscribe stream type.
pub type SubscribeStream =
    Pin<Box<dyn Stream<Item = Result<pb::SubscribeResponse, Status>> + Send + 'static>>;

/// A Subscribe stream as the wire sends it (see [`Rpc::subscribe_frames`]).
pub type FrameStream = Pin<Box<dyn Stream<Item = Result<Frame, Status>> + Send + 'static>>;

/// Subscribe and History, as `crate::wire` serves them: each event as the
/// bytes encoded once at its commit. The generated trait's `subscribe` and
/// `history` are these, decoded, so the two paths cannot disagree.
impl Rpc {
    /// Subscribe: validation, a `--max-streams` permit, the log's frames,
    /// drained at shutdown, and NOT_FOUND when the session is deleted.
    pub async fn subscribe_frames(
        &self,
        request: Request<pb::SubscribeRequest>,
    ) -> Result<Response<FrameStream>, Status> {
        let req = routed(request)?;
        validate::session_id(&req.session_id)?;
        let permit = self.stream_permit()?;
        let inner = self
            .logs
            .subscribe_frames(&req.session_id, req.after_seq, req.include_deltas)
            .await
            .map_err(Error::from)?;
        let stream = drain_on_shutdown(
            Box::pin(inner),
            self.logs.clone(),
            req.session_id.clone(),
            self.shutdown.clone(),
        );
        // The permit lives as long as the stream: dropped with it.
        let stream = stream.map(move |m| {
            let _held = &permit;
            Ok(m)
        });
        // The log's stream ends only at shutdown or when the session was
        // deleted; the client is told which.
        let (logs, shutdown, sid) = (self.logs.clone(), self.shutdown.clone(), req.session_id);
        let deleted = futures::stream::once(async move {
            let why = format!("session {sid:?} deleted");
            (!shutdown.is_cancelled() && !logs.is_closed()).then(|| Err(Status::not_found(why)))
        })
        .filter_map(std::future::ready);
        Ok(Response::new(Box::pin(stream.chain(deleted))))
    }

    /// History: validation, NOT_FOUND for an unknown session, the page's
    /// events as stored.
    pub async fn history_page(
        &self,
        request: Request<pb::HistoryRequest>,
    ) -> Result<Response<HistoryPage>, Status> {
        let req = routed(request)?;
        validate::session_id(&req.session_id)?;
        self.require_session(&req.session_id).await?;
        let page = self
            .logs
            .history_page(&req.session_id, req.before_seq, req.limit)
            .await
            .map_err(Error::from)?;
        Ok(Response::new(page))
    }
}

#[tonic::async_trait]
impl SessionService for Rpc {
    async fn start(
        &self,
        request: Request<pb::StartRequest>,
    ) -> Result<Response<pb::StartResponse>, Status> {
        let peer = request.remote_addr().map(|a| a.ip());
        let mut req = routed(request)?;
        validate::session_id(&req.session_id)?;
        validate::idempotency_key(&req.idempotency_key)?;
        validate::start_config(req.config.get_or_insert_default())?;
        self.admit_new_session(&req.session_id, peer).await?;
        Ok(Response::new(self.manager.start(req).await?))
    }

    async fn send(
        &self,
        request: Request<pb::SendRequest>,
    ) -> Result<Response<pb::SendResponse>, Status> {
        let req = routed(request)?;
        validate::session_id(&req.session_id)?;
        validate::idempotency_key(&req.idempotency_key)?;
        validate::send_input(&req.input, &req.content_blocks)?;
        validate::nesting("content_blocks", &req.content_blocks)?;
        Ok(Response::new(self.manager.send(req).await?))
    }

    async fn stop(
        &self,
        request: Request<pb::StopRequest>,
    ) -> Result<Response<pb::StopResponse>, Status> {
        let req = routed(request)?;
        validate::session_id(&req.session_id)?;
        validate::idempotency_key(&req.idempotency_key)?;
        Ok(Response::new(self.manager.stop(req).await?))
    }

    type SubscribeStream = SubscribeStream;

    async fn subscribe(
        &self,
        request: Request<pb::SubscribeRequest>,
    ) -> Result<Response<Self::SubscribeStream>, Status> {
        let sid = request.get_ref().session_id.clone();
        let frames = self.subscribe_frames(request).await?;
        Ok(frames.map(|stream| -> SubscribeStream {
            Box::pin(stream.map(move |f| f.map(|f| f.into_response(&sid))))
        }))
    }

    async fn history(
        &self,
        request: Request<pb::HistoryRequest>,
    ) -> Result<Response<pb::HistoryResponse>, Status> {
        let sid = request.get_ref().session_id.clone();
        let page = self.history_page(request).await?;
        Ok(page.map(|p| p.into_response(&sid)))
    }

    type ReadFullEventStream = ReadFullEventStream;

    async fn stop_task(
        &self,
        request: Request<pb::StopTaskRequest>,
    ) -> Result<Response<pb::StopTaskResponse>, Status> {
        let req = routed(request)?;
        validate::session_id(&req.session_id)?;
        validate::idempotency_key(&req.idempotency_key)?;
        if req.task_id.is_empty() || req.task_id.len() > 256 {
            return Err(Error::invalid(
                "task_id",
                "1 to 256 bytes: a task_started event's task_id",
            )
            .into());
        }
        Ok(Response::new(self.manager.stop_task(req).await?))
    }

    async fn set_model(
        &self,
        request: Request<pb::SetModelRequest>,
    ) -> Result<Response<pb::SetModelResponse>, Status> {
        let req = routed(request)?;
        let (applied, seq) = self
            .change_setting(
                &req.session_id,
                &req.idempotency_key,
                SettingChange::Model(req.model),
            )
            .await?;
        Ok(Response::new(pb::SetModelResponse {
            applied: applied as i32,
            seq,
        }))
    }

    async fn set_permission_mode(
        &self,
        request: Request<pb::SetPermissionModeRequest>,
    ) -> Result<Response<pb::SetPermissionModeResponse>, Status> {
        let req = routed(request)?;
        let (applied, seq) = self
            .change_setting(
                &req.session_id,
                &req.idempotency_key,
                SettingChange::PermissionMode(req.mode),
            )
            .await?;
        Ok(Response::new(pb::SetPermissionModeResponse {
            applied: applied as i32,
            seq,
        }))
    }

    async fn set_max_thinking_tokens(
        &self,
        request: Request<pb::SetMaxThinkingTokensRequest>,
    ) -> Result<Response<pb::SetMaxThinkingTokensResponse>, Status> {
        let req = routed(request)?;
        let (applied, seq) = self
            .change_setting(
                &req.session_id,
                &req.idempotency_key,
                SettingChange::MaxThinkingTokens(req.max_thinking_tokens),
            )
            .await?;
        Ok(Response::new(pb::SetMaxThinkingTokensResponse {
            applied: applied as i32,
            seq,
        }))
    }

    async fn rewind_files(
        &self,
        request: Request<pb::RewindFilesRequest>,
    ) -> Result<Response<pb::RewindFilesResponse>, Status> {
        let req = routed(request)?;
        validate::session_id(&req.session_id)?;
        validate::idempotency_key(&req.idempotency_key)?;
        Ok(Response::new(self.manager.rewind_files(req).await?))
    }

    async fn get_context_usage(
        &self,
        request: Request<pb::GetContextUsageRequest>,
    ) -> Result<Response<pb::GetContextUsageResponse>, Status> {
        let req = routed(request)?;
        validate::session_id(&req.session_id)?;
        let answer = self
            .manager
            .control(&req.session_id, context_usage::request())
            .await?;
        Ok(Response::new(context_usage::response(answer)))
    }

    async fn read_full_event(
        &self,
        request: Request<pb::ReadFullEventRequest>,
    ) -> Result<Response<Self::ReadFullEventStream>, Status> {
        let req = routed(request)?;
        validate::session_id(&req.session_id)?;
        let part = pb::FullEventPart::try_from(req.part)
            .map_err(|_| Error::invalid("part", format!("unknown part {}", req.part)))?;
        self.require_session(&req.session_id).await?;
        let event = self
            .logs
            .full_event(&req.session_id, req.seq)
            .await
            .map_err(Error::from)?
            .ok_or_else(|| Error::UnknownEvent {
                session_id: req.session_id.clone(),
                seq: req.seq,
            })?;
        let chunk = match req.chunk_size as usize {
            0 => FULL_EVENT_CHUNK,
            n => n.min(FULL_EVENT_CHUNK),
        };
        // It holds a whole event (up to --max-line-bytes and its parsed
        // form) while it streams: counted against --max-streams.
        let permit = self.stream_permit()?;
        // The part is held once; each message copies one chunk of it, made
        // only when the client is ready for it.
        let bytes = match (&event.payload, part) {
            // What could not be decoded is streamed as it is stored.
            (Some(pb::event::Payload::Unreadable(_)), pb::FullEventPart::Event) => self
                .logs
                .full_event_bytes(&req.session_id, req.seq)
                .await
                .map_err(Error::from)?
                .unwrap_or_default(),
            _ => full_event_part(event, part)?,
        };
        let total = bytes.len();
        let starts: Vec<usize> = if total == 0 {
            vec![0]
        } else {
            (0..total).step_by(chunk).collect()
        };
        let stream = futures::stream::iter(starts).map(move |start| {
            let _held = &permit;
            let end = (start + chunk).min(total);
            Ok(pb::ReadFullEventResponse {
                chunk: bytes[start..end].to_vec(),
                offset: start as u64,
                total_size: total as u64,
            })
        });
        Ok(Response::new(Box::pin(stream)))
    }

    async fn respond_permission(
        &self,
        request: Request<pb::RespondPermissionRequest>,
    ) -> Result<Response<pb::RespondPermissionResponse>, Status> {
        let req = routed(request)?;
        validate::session_id(&req.session_id)?;
        validate::request_id(&req.request_id)?;
        validate::idempotency_key(&req.idempotency_key)?;
        validate::nesting("updated_input", &req.updated_input)?;
        Ok(Response::new(self.manager.respond_permission(req).await?))
    }

    async fn delete_session(
        &self,
        request: Request<pb::DeleteSessionRequest>,
    ) -> Result<Response<pb::DeleteSessionResponse>, Status> {
        let req = routed(request)?;
        validate::session_id(&req.session_id)?;
        validate::idempotency_key(&req.idempotency_key)?;
        Ok(Response::new(self.manager.delete(req).await?))
    }

    async fn get_session(
        &self,
        request: Request<pb::GetSessionRequest>,
    ) -> Result<Response<pb::GetSessionResponse>, Status> {
        let req = routed(request)?;
        validate::session_id(&req.session_id)?;
        let session = self.manager.get(&req.session_id).await?;
        Ok(Response::new(pb::GetSessionResponse {
            session: Some(session),
        }))
    }

    async fn list_sessions(
        &self,
        request: Request<pb::ListSessionsRequest>,
    ) -> Result<Response<pb::ListSessionsResponse>, Status> {
        let listing = crate::listing::Listing::parse(request.get_ref())?;
        Ok(Response::new(self.manager.list_sessions(&listing).await?))
    }

    async fn set_title(
        &self,
        request: Request<pb::SetTitleRequest>,
    ) -> Result<Response<pb::SetTitleResponse>, Status> {
        let mut req = routed(request)?;
        validate::session_id(&req.session_id)?;
        validate::idempotency_key(&req.idempotency_key)?;
        req.title = validate::title(&req.title)?.to_owned();
        Ok(Response::new(self.manager.set_title(req).await?))
    }

    async fn list_agents(
        &self,
        _request: Request<pb::ListAgentsRequest>,
    ) -> Result<Response<pb::ListAgentsResponse>, Status> {
        Ok(Response::new(pb::ListAgentsResponse {
            agents: self.manager.agents(),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// Every variant and the code clients see for it; a new variant fails
    /// to compile in `code` until it is given one, and this table pins it.
    #[test]
    fn each_domain_error_has_its_code() {
        let s = || "s".to_owned();
        let table = [
            (Error::invalid("config.cwd", "x"), Code::InvalidArgument),
            (
                Error::IdempotencyKeyReused {
                    session_id: s(),
                    first_rpc: "Send".into(),
                    ttl: Duration::from_secs(900),
                },
                Code::InvalidArgument,
            ),
            (Error::unknown_session("s"), Code::NotFound),
            (
                Error::RateLimited {
                    per_minute: 60,
                    retry_after: Duration::from_millis(1500),
                },
                Code::ResourceExhausted,
            ),
            (
                Error::UnknownEvent {
                    session_id: s(),
                    seq: 9,
                },
                Code::NotFound,
            ),
            (
                Error::PermissionRequestNotPending {
                    session_id: s(),
                    request_id: "r".into(),
                },
                Code::NotFound,
            ),
            (
                Error::RunLive {
                    session_id: s(),
                    run_id: "r".into(),
                },
                Code::FailedPrecondition,
            ),
            (
                Error::RunNotOwned { session_id: s() },
                Code::FailedPrecondition,
            ),
            (
                Error::OneShotBusy {
                    session_id: s(),
                    run_id: "r".into(),
                },
                Code::FailedPrecondition,
            ),
            (
                Error::RespawnImpossible {
                    session_id: s(),
                    reason: "x".into(),
                },
                Code::FailedPrecondition,
            ),
            (Error::ProcessExited("x".into()), Code::FailedPrecondition),
            (Error::BinaryNotFound("x".into()), Code::FailedPrecondition),
            (Error::Unsupported("x".into()), Code::FailedPrecondition),
            (Error::Config("x".into()), Code::FailedPrecondition),
            (Error::PolicyDenied("x".into()), Code::PermissionDenied),
            (Error::ResourceLimit("x".into()), Code::ResourceExhausted),
            (Error::ShuttingDown, Code::Unavailable),
            (Error::StillEnding { session_id: s() }, Code::Unavailable),
            (Error::Storage("x".into()), Code::Internal),
            (Error::Spawn("x".into()), Code::Internal),
            (Error::Internal("x".into()), Code::Internal),
        ];
        for (e, want) in table {
            let shown = e.to_string();
            let status = Status::from(e);
            assert_eq!(status.code(), want, "{shown}");
            assert_eq!(status.message(), shown);
        }
    }

    #[test]
    fn invalid_fields_are_named_in_the_message() {
        let status = Status::from(Error::invalid("config.args[2]", "not allowed"));
        assert!(status.message().contains("config.args[2]"), "{status:?}");
    }

    #[test]
    fn errors_from_below_map_to_their_domain_variant() {
        use crate::adapter::AdapterError as A;
        let code_of = |e: Error| Status::from(e).code();
        assert_eq!(
            code_of(A::BinaryNotFound("x".into()).into()),
            Code::FailedPrecondition
        );
        // A process that is gone: retrying cannot help (was UNAVAILABLE).
        assert_eq!(code_of(A::NotRunning.into()), Code::FailedPrecondition);
        assert_eq!(
            code_of(
                A::InvalidConfig {
                    field: "config.prompt",
                    reason: "x".into()
                }
                .into()
            ),
            Code::InvalidArgument
        );
        assert_eq!(code_of(A::Spawn("x".into()).into()), Code::Internal);
        assert_eq!(
            code_of(crate::log::LogError::Closed.into()),
            Code::Unavailable
        );
    }
}
