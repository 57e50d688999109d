//! The tonic `SessionService`: validation and mapping only.
//!
//! Each handler validates its request (INVALID_ARGUMENT naming the field),
//! calls the [`SessionManager`] or the [`EventLogs`], and maps the crate's
//! [`Error`](crate::error::Error) with its one `From` impl. No state lives
//! here.

use std::pin::Pin;

use agent_harness_client::pb;
use agent_harness_client::pb::session_service_server::SessionService;
use futures::{Stream, StreamExt};
use tokio_util::sync::CancellationToken;
use tonic::{Request, Response, Status};

use crate::error::Error;
use crate::log::EventLogs;
use crate::manager::{PermissionAnswer, SessionManager};
use crate::validate;

/// The SessionService implementation.
#[derive(Debug, Clone)]
pub struct Rpc {
    manager: SessionManager,
    logs: EventLogs,
    /// Cancelled at shutdown: ends every Subscribe stream cleanly, so the
    /// server's graceful shutdown does not wait on them.
    shutdown: CancellationToken,
}

impl Rpc {
    /// A service over `manager` (whose logs it streams); streams end when
    /// `shutdown` is cancelled.
    pub fn new(manager: SessionManager, shutdown: CancellationToken) -> Self {
        let logs = manager.logs().clone();
        Self {
            manager,
            logs,
            shutdown,
        }
    }
}

/// The Subscribe stream type.
pub type SubscribeStream =
    Pin<Box<dyn Stream<Item = Result<pb::SubscribeResponse, Status>> + Send + 'static>>;

#[tonic::async_trait]
impl SessionService for Rpc {
    async fn start(
        &self,
        request: Request<pb::StartRequest>,
    ) -> Result<Response<pb::StartResponse>, Status> {
        let req = request.into_inner();
        validate::session_id(&req.session_id)?;
        let config = req.config.unwrap_or_default();
        validate::start_config(&config)?;
        let started = self.manager.start(&req.session_id, config).await?;
        Ok(Response::new(pb::StartResponse {
            run_id: started.run_id,
            process_id: started.process_id,
        }))
    }

    async fn send(
        &self,
        request: Request<pb::SendRequest>,
    ) -> Result<Response<pb::SendResponse>, Status> {
        let req = request.into_inner();
        validate::session_id(&req.session_id)?;
        validate::send_input(&req.input, &req.content_blocks)?;
        let run_id = self
            .manager
            .send(&req.session_id, req.input, req.content_blocks)
            .await?;
        Ok(Response::new(pb::SendResponse { run_id }))
    }

    async fn stop(
        &self,
        request: Request<pb::StopRequest>,
    ) -> Result<Response<pb::StopResponse>, Status> {
        let req = request.into_inner();
        validate::session_id(&req.session_id)?;
        let stopping = self.manager.stop(&req.session_id).await?;
        Ok(Response::new(pb::StopResponse { stopping }))
    }

    type SubscribeStream = SubscribeStream;

    async fn subscribe(
        &self,
        request: Request<pb::SubscribeRequest>,
    ) -> Result<Response<Self::SubscribeStream>, Status> {
        let req = request.into_inner();
        validate::session_id(&req.session_id)?;
        let shutdown = self.shutdown.clone().cancelled_owned();
        let stream = self
            .logs
            .subscribe(&req.session_id, req.after_seq)
            .map(Ok)
            .take_until(shutdown);
        Ok(Response::new(Box::pin(stream)))
    }

    async fn history(
        &self,
        request: Request<pb::HistoryRequest>,
    ) -> Result<Response<pb::HistoryResponse>, Status> {
        let req = request.into_inner();
        validate::session_id(&req.session_id)?;
        if !self.logs.exists(&req.session_id) {
            return Err(Error::unknown_session(&req.session_id).into());
        }
        let (events, has_more) = self
            .logs
            .history(&req.session_id, req.before_seq, req.limit)
            .await
            .map_err(Error::from)?;
        Ok(Response::new(pb::HistoryResponse { events, has_more }))
    }

    async fn respond_permission(
        &self,
        request: Request<pb::RespondPermissionRequest>,
    ) -> Result<Response<pb::RespondPermissionResponse>, Status> {
        let req = request.into_inner();
        validate::session_id(&req.session_id)?;
        validate::request_id(&req.request_id)?;
        self.manager
            .respond_permission(
                &req.session_id,
                &req.request_id,
                PermissionAnswer {
                    allow: req.allow,
                    updated_input: req.updated_input,
                    message: req.message,
                },
            )
            .await?;
        Ok(Response::new(pb::RespondPermissionResponse {}))
    }

    async fn get_session(
        &self,
        request: Request<pb::GetSessionRequest>,
    ) -> Result<Response<pb::GetSessionResponse>, Status> {
        let req = request.into_inner();
        validate::session_id(&req.session_id)?;
        let session = self.manager.get(&req.session_id).await?;
        Ok(Response::new(pb::GetSessionResponse {
            session: Some(session),
        }))
    }

    async fn list_sessions(
        &self,
        _request: Request<pb::ListSessionsRequest>,
    ) -> Result<Response<pb::ListSessionsResponse>, Status> {
        let sessions = self.manager.list().await?;
        Ok(Response::new(pb::ListSessionsResponse { sessions }))
    }
}
