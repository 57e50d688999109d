//! Subscribe and History on the wire: every event goes out as the bytes
//! the writer encoded once at its commit (or the store's row holds), never
//! decoded and encoded again per subscriber or per page.
//!
//! [`SessionRoutes`] stands where the generated `SessionServiceServer`
//! stood, under the same name (so the same auth interceptor wraps it, and
//! `Routes` routes to it): it serves exactly Subscribe and History itself,
//! with tonic's own gRPC machinery (`tonic::server::Grpc`) and a codec of
//! ours ([`codec`]), and hands every other path to the generated server.
//! The handlers are the same ([`Rpc::subscribe_frames`],
//! [`Rpc::history_page`]: routing, validation, `--max-streams` permits, the
//! drain at shutdown), the message size limits are the generated server's,
//! and compression is as the generated server has it (none configured).
//! grpc-web needs nothing here: its layer translates outside. A client
//! decodes exactly the messages the generated server would have sent.

pub mod codec;

use std::convert::Infallible;
use std::sync::Arc;
use std::task::{Context, Poll};

use agent_harness_protocol::pb;
use agent_harness_protocol::pb::session_service_server::SessionServiceServer;
use futures::future::BoxFuture;
use tonic::body::Body;
use tonic::server::{Grpc, NamedService, ServerStreamingService, UnaryService};
use tonic::{Request, Response, Status};

use self::codec::WireCodec;
use crate::log::{Frame, HistoryPage};
use crate::rpc::{FrameStream, Rpc};

const SUBSCRIBE: &str = "/agentharness.v1.SessionService/Subscribe";
const HISTORY: &str = "/agentharness.v1.SessionService/History";

/// The SessionService: Subscribe and History on the shared bytes, the
/// rest through the generated server.
#[derive(Clone)]
pub struct SessionRoutes {
    rpc: Arc<Rpc>,
    generated: SessionServiceServer<Rpc>,
    max_decoding_message_size: Option<usize>,
    max_encoding_message_size: Option<usize>,
}

impl SessionRoutes {
    /// Serves `rpc`; the limits apply to every RPC, as the generated
    /// server's own do.
    pub fn new(
        rpc: Rpc,
        max_decoding_message_size: usize,
        max_encoding_message_size: usize,
    ) -> Self {
        let rpc = Arc::new(rpc);
        let generated = SessionServiceServer::from_arc(rpc.clone())
            .max_decoding_message_size(max_decoding_message_size)
            .max_encoding_message_size(max_encoding_message_size);
        Self {
            rpc,
            generated,
            max_decoding_message_size: Some(max_decoding_message_size),
            max_encoding_message_size: Some(max_encoding_message_size),
        }
    }

    fn grpc<T, U>(&self) -> Grpc<WireCodec<T, U>>
    where
        T: codec::WireMessage + Send + 'static,
        U: prost::Message + Default + Send + 'static,
    {
        Grpc::new(WireCodec::default()).apply_max_message_size_config(
            self.max_decoding_message_size,
            self.max_encoding_message_size,
        )
    }
}

impl NamedService for SessionRoutes {
    const NAME: &'static str = <SessionServiceServer<Rpc> as NamedService>::NAME;
}

impl tower::Service<http::Request<Body>> for SessionRoutes {
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = BoxFuture<'static, Result<Self::Response, Infallible>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<Body>) -> Self::Future {
        match req.uri().path() {
            SUBSCRIBE => {
                let mut grpc = self.grpc::<Frame, pb::SubscribeRequest>();
                let method = Subscribe(self.rpc.clone());
                Box::pin(async move { Ok(grpc.server_streaming(method, req).await) })
            }
            HISTORY => {
                let mut grpc = self.grpc::<HistoryPage, pb::HistoryRequest>();
                let method = History(self.rpc.clone());
                Box::pin(async move { Ok(grpc.unary(method, req).await) })
            }
            _ => self.generated.call(req),
        }
    }
}

struct Subscribe(Arc<Rpc>);

impl ServerStreamingService<pb::SubscribeRequest> for Subscribe {
    type Response = Frame;
    type ResponseStream = FrameStream;
    type Future = BoxFuture<'static, Result<Response<FrameStream>, Status>>;

    fn call(&mut self, request: Request<pb::SubscribeRequest>) -> Self::Future {
        let rpc = self.0.clone();
        Box::pin(async move { rpc.subscribe_frames(request).await })
    }
}

struct History(Arc<Rpc>);

impl UnaryService<pb::HistoryRequest> for History {
    type Response = HistoryPage;
    type Future = BoxFuture<'static, Result<Response<HistoryPage>, Status>>;

    fn call(&mut self, request: Request<pb::HistoryRequest>) -> Self::Future {
        let rpc = self.0.clone();
        Box::pin(async move { rpc.history_page(request).await })
    }
}
