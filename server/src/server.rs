//! One port, every protocol: native gRPC (HTTP/2) and grpc-web (HTTP/1.1
//! or HTTP/2) for the SessionService, plus gRPC reflection (v1 and v1alpha)
//! and grpc.health.v1, behind CORS, a request size limit and bearer-token
//! auth.
//!
//! Layers, outermost first: CORS (answers preflights, exposes the grpc-*
//! headers to browsers) → grpc-web translation → request size limit →
//! the services, each wrapped in the auth interceptor.
//!
//! Shutdown order: the shutdown future resolves → health goes NOT_SERVING →
//! every live run is stopped and gets its run_end (SERVER_RESTART, source
//! "shutdown"), which subscribers still receive → Subscribe streams end →
//! tonic stops accepting and drains → the log flushes and closes.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use agent_harness_client::pb::session_service_server::SessionServiceServer;
use agent_harness_client::proto::FILE_DESCRIPTOR_SET;
use bytes::Bytes;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;
use tonic::Status;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::Server;

use crate::access::{AccessLayer, AccessPolicy, cors_layer};
use crate::adapter::cassette::{CassetteAdapter, ScriptStep, record_cassette};
use crate::adapter::claude_cli::ClaudeCliAdapter;
use crate::adapter::claude_interactive::{
    ClaudeInteractiveAdapter, ClaudeOptions, PermissionsMode,
};
use crate::adapter::{ProcessAdapter, SpawnConfig};
use crate::auth::{self, AuthInterceptor};
use crate::config::{AdapterKind, PermissionMode, RecordConfig, ServeConfig};
use crate::error::{Error, Result};
use crate::log::{EventLogs, LogOptions};
use crate::manager::{ManagerOptions, SessionManager};
use crate::rpc::Rpc;
use crate::store::RedbStore;

/// What `serve_on` needs besides the manager.
#[derive(Clone)]
pub struct ServeOptions {
    /// Largest request accepted, in bytes (RESOURCE_EXHAUSTED above).
    pub max_request_bytes: usize,
    /// The bearer token every RPC must carry; `None`: no auth.
    pub auth_token: Option<String>,
    /// Which origins and hosts may reach the services at all.
    pub access: AccessPolicy,
    /// Serve TLS with this acceptor (`--tls-cert`/`--tls-key`); `None`: plain.
    pub tls: Option<TlsAcceptor>,
    /// Most Subscribe streams open at once.
    pub max_streams: usize,
}

impl std::fmt::Debug for ServeOptions {
    // Never print the token.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServeOptions")
            .field("max_request_bytes", &self.max_request_bytes)
            .field("auth", &self.auth_token.is_some())
            .field("access", &self.access)
            .field("tls", &self.tls.is_some())
            .field("max_streams", &self.max_streams)
            .finish()
    }
}

impl Default for ServeOptions {
    fn default() -> Self {
        Self {
            max_request_bytes: 4 * 1024 * 1024,
            auth_token: None,
            access: AccessPolicy::loopback_only(),
            tls: None,
            max_streams: crate::config::DEFAULT_MAX_STREAMS,
        }
    }
}

/// The connection-level options from the serve configuration: token,
/// origin and host rules, TLS, limits. Fails with a message naming the flag
/// when they do not fit together.
pub fn serve_options(config: &ServeConfig) -> Result<ServeOptions> {
    let token = config
        .auth_token_file
        .as_deref()
        .map(auth::load_token)
        .transpose()?;
    auth::check_bind(&config.listen, token.is_some())?;
    let access = AccessPolicy::new(
        &config.allowed_origins,
        &config.allowed_hosts,
        token.is_some(),
        Some(config.listen),
    )?;
    let tls = match (&config.tls_cert, &config.tls_key) {
        (Some(cert), Some(key)) => Some(crate::listen::tls_acceptor(cert, key)?),
        (None, None) => None,
        _ => {
            return Err(Error::Config("--tls-cert and --tls-key go together".into()));
        }
    };
    if access.any_origin() {
        tracing::warn!(
            "--allowed-origin '*': every web page may call the API; the bearer token is the only protection"
        );
    }
    if !config.listen.ip().is_loopback() && tls.is_none() {
        tracing::warn!(
            listen = %config.listen,
            "listening beyond loopback without TLS: the bearer token and every event travel in clear text; \
             pass --tls-cert/--tls-key or put a TLS proxy in front"
        );
    }
    Ok(ServeOptions {
        max_request_bytes: config.max_request_bytes,
        auth_token: token,
        access,
        tls,
        max_streams: config.max_streams,
    })
}

/// Runs the whole server from its configuration until `shutdown` resolves:
/// opens the store, recovers sessions a previous instance left live,
/// binds, serves, and on shutdown stops every run and flushes the log.
pub async fn run(config: ServeConfig, shutdown: impl Future<Output = ()> + Send) -> Result<()> {
    let serve = serve_options(&config)?;
    // Every flag is checked before the store is opened or anything recovered.
    let launch = Arc::new(crate::launch::LaunchPolicy::from_config(&config)?);
    std::fs::create_dir_all(&config.data_dir).map_err(|e| {
        Error::Config(format!(
            "cannot create --data-dir {}: {e}",
            config.data_dir.display()
        ))
    })?;
    let path = config.data_dir.join("events.redb");
    let store = RedbStore::open(&path)?;
    let logs = EventLogs::open(
        Arc::new(store),
        LogOptions {
            window: config.window,
            max_replay: config.max_replay as u64,
            heartbeat: config.heartbeat,
            ..LogOptions::default()
        },
    )?;
    let recovered = crate::recovery::recover(&logs, &crate::supervise::kill_recorded_group).await?;
    tracing::info!(store = %path.display(), recovered = recovered.len(), "event store open");
    let adapter = build_adapter(&config)?;
    let mopts = ManagerOptions {
        launch,
        ..manager_options(&config)
    };
    let manager = SessionManager::new(adapter, logs, mopts);
    let listener = TcpListener::bind(config.listen)
        .await
        .map_err(|e| Error::Config(format!("cannot listen on {}: {e}", config.listen)))?;
    serve_on(listener, manager, serve, shutdown).await
}

/// The manager's options from the serve configuration, except the launch
/// policy: building it from `--allow-arg`/`--allow-env`/`--allowed-cwd` can
/// fail, so [`run`] sets it from
/// [`LaunchPolicy::from_config`](crate::launch::LaunchPolicy::from_config);
/// here it is the default (safe arg set, no env, any cwd).
pub fn manager_options(config: &ServeConfig) -> ManagerOptions {
    ManagerOptions {
        idle_timeout: config.idle_timeout,
        permission_timeout: config.permission_timeout,
        stop_grace: config.stop_grace,
        kill_grace: config.kill_grace,
        max_line_bytes: config.max_line_bytes,
        max_live_runs: config.max_live_runs,
        ..ManagerOptions::default()
    }
}

/// The adapter `--adapter` names.
pub fn build_adapter(config: &ServeConfig) -> Result<Arc<dyn ProcessAdapter>> {
    let options = ClaudeOptions {
        claude_bin: config.claude_bin.clone(),
        permissions: match config.permissions {
            PermissionMode::Relay => PermissionsMode::Relay,
            PermissionMode::Settings => PermissionsMode::Settings,
            PermissionMode::Skip => PermissionsMode::Skip,
        },
        // The reader stops buffering at the same limit the normalizer enforces.
        max_line_bytes: config.max_line_bytes,
        ..ClaudeOptions::default()
    };
    match &config.adapter {
        AdapterKind::Interactive => Ok(Arc::new(ClaudeInteractiveAdapter::new(options))),
        AdapterKind::Cli => Ok(Arc::new(ClaudeCliAdapter::new(options))),
        AdapterKind::Cassette(path) => {
            let cassette = CassetteAdapter::from_file(path, 1.0)
                .map_err(|e| Error::Config(format!("--adapter cassette: {e}")))?;
            Ok(Arc::new(cassette))
        }
    }
}

/// `agent-harness record`: runs the real CLI (interactive adapter) once
/// through the prompts and writes the cassette.
pub async fn record(config: RecordConfig) -> Result<()> {
    let adapter = ClaudeInteractiveAdapter::new(ClaudeOptions {
        claude_bin: config.claude_bin.clone(),
        ..ClaudeOptions::default()
    });
    let mut prompts = config.prompts.into_iter();
    let first = prompts.next().unwrap_or_default();
    let spawn = SpawnConfig {
        session_id: "record".into(),
        run_id: uuid::Uuid::new_v4().to_string(),
        config: agent_harness_client::pb::StartConfig {
            prompt: first,
            cwd: config
                .cwd
                .map(|p| p.display().to_string())
                .unwrap_or_default(),
            args: config.args,
            ..Default::default()
        },
    };
    let argv = adapter
        .args(&spawn)
        .into_iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let mut steps = vec![ScriptStep::WaitTurnEnd];
    for p in prompts {
        steps.push(ScriptStep::Send(p));
        steps.push(ScriptStep::WaitTurnEnd);
    }
    let exit = record_cassette(
        adapter,
        argv,
        spawn,
        &steps,
        &config.out,
        Duration::from_secs(600),
    )
    .await
    .map_err(|e| Error::Internal(format!("recording failed: {e}")))?;
    tracing::info!(out = %config.out.display(), code = ?exit.code, signal = ?exit.signal, "cassette written");
    Ok(())
}

/// Serves on an already bound listener until `shutdown` resolves, then
/// stops every live run, ends the streams and flushes the log. Tests bind
/// 127.0.0.1:0 and call this in-process.
pub async fn serve_on(
    listener: TcpListener,
    manager: SessionManager,
    opts: ServeOptions,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<()> {
    let addr: Option<SocketAddr> = listener.local_addr().ok();
    let streams = CancellationToken::new();
    let auth = AuthInterceptor::new(opts.auth_token.clone());
    let rpc = Rpc::new(manager.clone(), streams.clone()).with_max_streams(opts.max_streams);
    let session_service = SessionServiceServer::new(rpc)
        .max_decoding_message_size(opts.max_request_bytes)
        .max_encoding_message_size(usize::MAX);
    let (health_reporter, health_service) = tonic_health::server::health_reporter();
    health_reporter
        .set_serving::<SessionServiceServer<Rpc>>()
        .await;
    let reflection_v1 = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
        .build_v1()
        .map_err(|e| Error::Internal(format!("reflection v1: {e}")))?;
    let reflection_v1alpha = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
        .build_v1alpha()
        .map_err(|e| Error::Internal(format!("reflection v1alpha: {e}")))?;

    let signal = {
        let manager = manager.clone();
        let streams = streams.clone();
        let health = health_reporter.clone();
        async move {
            shutdown.await;
            tracing::info!("shutting down: stopping live runs");
            health.set_not_serving::<SessionServiceServer<Rpc>>().await;
            manager.shutdown().await;
            // After the runs' run_end were appended, so subscribers see them.
            streams.cancel();
        }
    };
    tracing::info!(
        addr = ?addr,
        auth = auth.required(),
        tls = opts.tls.is_some(),
        "serving gRPC and grpc-web"
    );
    let router = Server::builder()
        .accept_http1(true)
        .http2_keepalive_interval(Some(Duration::from_secs(30)))
        .layer(AccessLayer::new(opts.access.clone()))
        .layer(cors_layer(opts.access.clone()))
        .layer(tonic_web::GrpcWebLayer::new())
        .layer(RequestLimitLayer {
            max: opts.max_request_bytes,
        })
        .add_service(InterceptedService::new(session_service, auth.clone()))
        .add_service(InterceptedService::new(health_service, auth.clone()))
        .add_service(InterceptedService::new(reflection_v1, auth.clone()))
        .add_service(InterceptedService::new(reflection_v1alpha, auth));
    let accepting = CancellationToken::new();
    let result = match opts.tls {
        Some(acceptor) => {
            let incoming = crate::listen::tls(listener, acceptor, accepting.clone());
            router.serve_with_incoming_shutdown(incoming, signal).await
        }
        None => {
            let incoming = crate::listen::plain(listener, accepting.clone());
            router.serve_with_incoming_shutdown(incoming, signal).await
        }
    };
    accepting.cancel();
    // Whatever ended the server, the runs get their run_end and the log its flush.
    manager.shutdown().await;
    streams.cancel();
    manager.logs().shutdown().await;
    result.map_err(|e| Error::Internal(format!("server: {e}")))
}

/// Refuses request messages larger than `max` bytes with RESOURCE_EXHAUSTED.
///
/// tonic's own limit answers OUT_OF_RANGE, and the API promises
/// RESOURCE_EXHAUSTED; so this layer reads each gRPC frame header as it
/// streams by and fails the body with that status as soon as a frame
/// declares (or a body carries) more than the limit, before anything is
/// buffered.
#[derive(Debug, Clone, Copy)]
struct RequestLimitLayer {
    max: usize,
}

impl<S> tower::Layer<S> for RequestLimitLayer {
    type Service = RequestLimit<S>;
    fn layer(&self, inner: S) -> Self::Service {
        RequestLimit {
            inner,
            max: self.max,
        }
    }
}

/// See [`RequestLimitLayer`].
#[derive(Debug, Clone)]
struct RequestLimit<S> {
    inner: S,
    max: usize,
}

impl<S> tower::Service<http::Request<tonic::body::Body>> for RequestLimit<S>
where
    S: tower::Service<http::Request<tonic::body::Body>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<tonic::body::Body>) -> Self::Future {
        let max = self.max;
        let req = req.map(|body| tonic::body::Body::new(FrameLimit::new(body, max)));
        self.inner.call(req)
    }
}

/// A request body that checks gRPC frame lengths as they pass.
struct FrameLimit {
    inner: tonic::body::Body,
    max: usize,
    /// Bytes of the current frame header seen so far (0..5).
    header: [u8; 5],
    header_len: usize,
    /// Payload bytes of the current frame still to come.
    remaining: usize,
}

impl FrameLimit {
    fn new(inner: tonic::body::Body, max: usize) -> Self {
        Self {
            inner,
            max,
            header: [0; 5],
            header_len: 0,
            remaining: 0,
        }
    }

    /// Walks the frame structure through `data`.
    fn check(&mut self, mut data: &[u8]) -> Result<(), Status> {
        while !data.is_empty() {
            if self.remaining > 0 {
                let n = self.remaining.min(data.len());
                self.remaining -= n;
                data = &data[n..];
                continue;
            }
            let n = (5 - self.header_len).min(data.len());
            self.header[self.header_len..self.header_len + n].copy_from_slice(&data[..n]);
            self.header_len += n;
            data = &data[n..];
            if self.header_len == 5 {
                let len = u32::from_be_bytes([
                    self.header[1],
                    self.header[2],
                    self.header[3],
                    self.header[4],
                ]) as usize;
                if len > self.max {
                    return Err(Status::resource_exhausted(format!(
                        "request message of {len} bytes exceeds the limit of {} bytes (--max-request-bytes)",
                        self.max
                    )));
                }
                self.header_len = 0;
                self.remaining = len;
            }
        }
        Ok(())
    }
}

impl http_body::Body for FrameLimit {
    type Data = Bytes;
    type Error = Status;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, Status>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        match polled {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref()
                    && let Err(status) = self.check(data)
                {
                    return Poll::Ready(Some(Err(status)));
                }
                Poll::Ready(Some(Ok(frame)))
            }
            other => other,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frame_limit_reads_split_headers() {
        let mut f = FrameLimit::new(tonic::body::Body::empty(), 10);
        // A 10-byte frame, header split across chunks: fine.
        assert!(f.check(&[0, 0, 0]).is_ok());
        assert!(f.check(&[0, 10, 1, 2, 3]).is_ok());
        assert!(f.check(&[4, 5, 6, 7, 8, 9, 10]).is_ok());
        // The next frame declares 11 bytes: refused.
        let err = f.check(&[0, 0, 0, 0, 11]).unwrap_err();
        assert_eq!(err.code(), tonic::Code::ResourceExhausted);
    }
}
