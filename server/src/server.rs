//! One port, every protocol: native gRPC (HTTP/2) and grpc-web (HTTP/1.1
//! or HTTP/2) for the SessionService, plus gRPC reflection (v1 and v1alpha)
//! and grpc.health.v1, behind the origin and Host checks, CORS, a request
//! size limit ([`crate::body_limit`]) and bearer-token auth.
//!
//! Layers, outermost first: the `x-agent-harness-node` response header
//! ([`crate::node::HEADER`]) → the client's `grpc-timeout`
//! ([`crate::deadline`]) → the origin and Host checks → `GET /healthz`
//! ([`crate::health`], no token) → `GET /metrics`
//! ([`crate::scrape`], token checked like an RPC's) → the web console's
//! GETs at `/` ([`crate::web`]: files without data, no token) → CORS (answers
//! preflights, exposes the grpc-* headers to browsers) → grpc-web
//! translation → request size limit → the services, each wrapped in the
//! auth interceptor.
//!
//! Connections are accepted and served by [`crate::connections`] (the cap
//! on connections, header and idle timeouts, HTTP/2 pings), which hands
//! every request to these layers.
//!
//! Shutdown order: the shutdown future resolves → health goes NOT_SERVING →
//! every live run is stopped and gets its run_end (SERVER_RESTART, source
//! "shutdown"), which subscribers still receive → Subscribe streams end →
//! the server stops accepting and drains its connections → every task the
//! server and its runs started (reapers, readers, cassette writes) has ended,
//! waited for at most [`TASKS_WAIT`] and named in the log if not → the log
//! flushes and closes.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use agent_harness_protocol::proto::FILE_DESCRIPTOR_SET;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;
use tonic::service::interceptor::InterceptedService;
use tonic::service::{RecoverErrorLayer, Routes};
use tower::ServiceExt;

use crate::access::{AccessLayer, AccessPolicy, cors_layer};
use crate::adapter::ProcessAdapter;
use crate::adapter::acp::{AcpAdapter, AcpOptions};
use crate::adapter::agents::Agents;
use crate::adapter::cassette::CassetteAdapter;
use crate::adapter::claude::{ClaudeCliAdapter, ClaudeInteractiveAdapter, ClaudeOptions};
use crate::adapter::codex::{CodexAdapter, CodexOptions};
use crate::auth::{self, AuthInterceptor};
use crate::body_limit::RequestLimitLayer;
use crate::config::{AdapterKind, ServeConfig};
use crate::connections::{ConnectionLimits, ConnectionStats, HttpService};
use crate::deadline::DeadlineLayer;
use crate::error::{Error, Result};
use crate::health::Health;
use crate::launch::LaunchPolicy;
use crate::log::EventLogs;
use crate::manager::{ManagerOptions, SessionManager};
use crate::node::NodeId;
use crate::plain::PlainLayer;
use crate::rpc::Rpc;
use crate::scrape::Scrape;
use crate::store::{PostgresStore, RedbStore, Store};
use crate::web::Console;

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
    /// Serve Prometheus metrics at `GET /metrics` ([`crate::scrape`]).
    pub metrics: bool,
    /// Serve the web console at `/` ([`crate::web`]); `--no-ui` turns it off.
    pub ui: bool,
    /// Most sessions one peer may create per minute; 0 (the default here;
    /// `serve` defaults to 60) = unlimited.
    pub max_sessions_per_minute: u32,
    /// The cap on connections and their timeouts ([`crate::connections`]).
    pub connections: ConnectionLimits,
    /// The node every answer names ([`crate::node::HEADER`]); `None`: the
    /// default id of the listen address.
    pub node: Option<NodeId>,
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
            .field("metrics", &self.metrics)
            .field("ui", &self.ui)
            .field("max_sessions_per_minute", &self.max_sessions_per_minute)
            .field("connections", &self.connections)
            .field("node", &self.node)
            .finish()
    }
}

impl Default for ServeOptions {
    fn default() -> Self {
        Self {
            max_request_bytes: crate::body_limit::DEFAULT_MAX_REQUEST_BYTES,
            auth_token: None,
            access: AccessPolicy::loopback_only(),
            tls: None,
            max_streams: crate::rpc::DEFAULT_MAX_STREAMS,
            metrics: true,
            ui: true,
            max_sessions_per_minute: 0,
            connections: ConnectionLimits::default(),
            node: None,
        }
    }
}

/// The connection-level options from the serve configuration: token,
/// origin and host rules, TLS, limits. Fails with a message naming the flag
/// when they do not fit together ([`ServeConfig::check`]).
pub fn serve_options(config: &ServeConfig) -> Result<ServeOptions> {
    config.check()?;
    let token = config
        .auth_token_file
        .as_deref()
        .map(auth::load_token)
        .transpose()?;
    let access = AccessPolicy::new(
        &config.access.allowed_origins,
        &config.access.allowed_hosts,
        token.is_some(),
        Some(config.listen),
    )?;
    let tls = match (&config.tls_cert, &config.tls_key) {
        (Some(cert), Some(key)) => Some(crate::listen::tls_acceptor(cert, key)?),
        _ => None,
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
        metrics: !config.no_metrics,
        ui: !config.no_ui,
        max_sessions_per_minute: config.max_sessions_per_minute,
        connections: ConnectionLimits {
            max_connections: config.max_connections,
            ..ConnectionLimits::default()
        },
        node: Some(config.node()?),
    })
}

/// Runs the whole server from its configuration until `shutdown` resolves:
/// opens the store, recovers sessions a previous instance left live,
/// binds, serves, and on shutdown stops every run and flushes the log.
pub async fn run(config: ServeConfig, shutdown: impl Future<Output = ()> + Send) -> Result<()> {
    let serve = serve_options(&config)?;
    // Every flag is checked before the store is opened or anything recovered.
    let launch = Arc::new(launch_policy(&config)?);
    crate::private_files::ensure_dir(&config.data_dir, "--data-dir")?;
    let secrets = Arc::new(crate::secrets::SecretsKey::open(
        config.secrets_key_file.as_deref(),
        &config.data_dir,
    )?);
    let (store, shown) = open_store(&config)?;
    let logs = EventLogs::open(store.clone(), config.event_log.clone())?;
    let address = config
        .advertise_addr
        .clone()
        .unwrap_or_else(|| config.listen.to_string());
    let node = crate::node::Node::join(store, config.node()?.as_str(), &address, config.node_lease)
        .await?;
    if node.is_none() {
        let recovered =
            crate::recovery::recover(&logs, &crate::supervise::kill_recorded_run).await?;
        tracing::info!(store = %shown, recovered = recovered.len(), "event store open");
    } else {
        // On a shared store, the runs a previous instance left live are
        // this node's sessions under its earlier epoch: a first reaper pass
        // takes them over before the server serves (other nodes' live runs
        // are theirs until their leases lapse).
        tracing::info!(store = %shown, "event store open (shared)");
    }
    let adapter = build_adapter(&config)?;
    let mopts = ManagerOptions {
        launch,
        secrets,
        node,
        ..manager_options(&config)
    };
    let manager = SessionManager::new(adapter, logs, mopts);
    let listener = TcpListener::bind(config.listen)
        .await
        .map_err(|e| Error::Config(format!("cannot listen on {}: {e}", config.listen)))?;
    serve_on(listener, manager, serve, shutdown).await
}

/// The event store: PostgreSQL at `--store-url`, else redb in
/// `--data-dir`; with how to name it in logs (never the password).
fn open_store(config: &ServeConfig) -> Result<(Arc<dyn Store>, String)> {
    if let Some(url) = &config.store_url {
        let store = PostgresStore::open(url.expose())?;
        let shown = store.redacted_url().to_owned();
        return Ok((Arc::new(store), shown));
    }
    let path = config.data_dir.join("events.redb");
    let store = RedbStore::open_with_cache(&path, config.store_cache_bytes)?;
    Ok((Arc::new(store), path.display().to_string()))
}

/// The launch policy from `--allow-arg`, `--allow-env`, `--allowed-cwd`,
/// `--permissions` with `--allow-permission-mode`, and
/// `--allow-slash-command`; an error names the flag.
pub fn launch_policy(config: &ServeConfig) -> Result<LaunchPolicy> {
    config.launch.policy(config.claude.permissions)
}

/// The manager's options from the serve configuration, except the launch
/// policy: building it can fail, so [`run`] sets it from [`launch_policy`];
/// here it is the default (safe arg set, no env, any cwd).
pub fn manager_options(config: &ServeConfig) -> ManagerOptions {
    ManagerOptions {
        max_line_bytes: config.max_line_bytes,
        max_partial_bytes: config.max_partial_bytes,
        cache_sessions: config.event_log.cache_sessions,
        ..config.manager.options()
    }
}

/// The agents' adapters behind the router: claude's as `--adapter` names
/// it (for the claude adapters this prepares the CLI's configuration
/// directory the server owns, [`claude_options`]), and Codex's when it is
/// enabled ([`codex_options`]), and each ACP agent configured
/// ([`acp_options`]). A cassette (`--adapter cassette:FILE`)
/// stands for both.
pub fn build_adapter(config: &ServeConfig) -> Result<Arc<dyn ProcessAdapter>> {
    let claude = claude_adapter(config)?;
    if let AdapterKind::Cassette(_) = &config.adapter {
        // A cassette replays one agent's session: every Start reaches it,
        // and it refuses the other agent's by name (its `check`).
        return Ok(Arc::new(Agents::new(claude.clone()).with_codex(claude)));
    }
    if let Some(how) = crate::supervise::trampoline::how() {
        tracing::info!("{how}");
    }
    let mut agents = Agents::new(claude);
    if let Some(codex) = codex_options(config)? {
        tracing::info!(codex_bin = %codex.codex_bin.display(), "codex enabled");
        agents = agents.with_codex(Arc::new(CodexAdapter::new(codex)));
    }
    for acp in acp_options(config)? {
        tracing::info!(agent = %acp.name, program = %acp.program.display(), "ACP agent enabled");
        let name = acp.name.clone();
        agents = agents.with_acp(&name, Arc::new(AcpAdapter::new(acp)));
    }
    Ok(Arc::new(agents))
}

/// The options of every ACP agent `--acp-agent` configures; an error names
/// the entry at fault.
pub fn acp_options(config: &ServeConfig) -> Result<Vec<AcpOptions>> {
    let specs = config.acp.agents().map_err(Error::Config)?;
    Ok(specs
        .into_iter()
        .map(|spec| AcpOptions {
            permissions: config.claude.permissions,
            max_line_bytes: config.max_line_bytes,
            ..AcpOptions::new(spec)
        })
        .collect())
}

/// The Codex adapter's options, `None` when Codex is not enabled (no
/// `--codex-bin` and none found); an error names the flag.
pub fn codex_options(config: &ServeConfig) -> Result<Option<CodexOptions>> {
    config
        .codex
        .options(config.claude.permissions, config.max_line_bytes)
        .map_err(Error::Config)
}

/// The claude adapter `--adapter` names.
fn claude_adapter(config: &ServeConfig) -> Result<Arc<dyn ProcessAdapter>> {
    match &config.adapter {
        AdapterKind::Interactive => Ok(Arc::new(ClaudeInteractiveAdapter::new(claude_options(
            config,
        )?))),
        AdapterKind::Cli => Ok(Arc::new(ClaudeCliAdapter::new(claude_options(config)?))),
        AdapterKind::Cassette(path) => {
            let cassette = CassetteAdapter::from_file(path, config.cassette_timescale)
                .map_err(|e| Error::Config(format!("--adapter cassette: {e}")))?;
            Ok(Arc::new(cassette))
        }
    }
}

/// The claude adapters' options from the serve configuration: the claude
/// flags ([`ClaudeFlags::options`](crate::adapter::claude::ClaudeFlags::options)
/// prepares the configuration directory the server owns) with the data
/// directory, the line limit and live typing.
pub fn claude_options(config: &ServeConfig) -> Result<ClaudeOptions> {
    config
        .claude
        .options(
            &config.data_dir,
            config.max_line_bytes,
            config.deltas == crate::config::Toggle::On,
        )
        .map_err(Error::Config)
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
    // Before serving: a session whose index row is missing or behind (a
    // store written before the index existed) would be missing from
    // filtered listings until its next commit.
    if let Err(e) = manager.logs().rebuild_index().await {
        tracing::error!(error = %e, "rebuilding the session index failed; filtered listings may miss sessions until the next start");
    }
    let addr: Option<SocketAddr> = listener.local_addr().ok();
    let streams = CancellationToken::new();
    let auth = AuthInterceptor::new(opts.auth_token.clone());
    let rpc = Rpc::new(manager.clone(), streams.clone())
        .with_max_streams(opts.max_streams)
        .with_max_sessions_per_minute(opts.max_sessions_per_minute);
    let connection_stats = Arc::new(ConnectionStats::new(&opts.connections));
    let metrics = opts.metrics.then(|| {
        crate::scrape::Source::new(manager.clone(), rpc.clone(), connection_stats.clone())
    });
    // Subscribe and History send each event's shared bytes (`wire`); the
    // other RPCs go through the generated server inside.
    let session_service = crate::wire::SessionRoutes::new(
        rpc,
        opts.max_request_bytes,
        // Every response is built under 4 MiB (events are cut to their
        // budget, pages bounded by bytes); this is the backstop.
        crate::log::cut::MAX_MESSAGE_BYTES,
    );
    let node = match (&opts.node, addr) {
        (Some(node), _) => node.clone(),
        (None, Some(addr)) => NodeId::resolve(None, addr).map_err(Error::Config)?,
        (None, None) => NodeId::parse("localhost").map_err(Error::Config)?,
    };
    let (health_reporter, health_service) = tonic_health::server::health_reporter();
    let health = Health::new(health_reporter);
    health.set(true).await;
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

    // Health follows storage: NOT_SERVING while commits fail (every run
    // that could not record its output is being stopped), SERVING again
    // after the next commit succeeds; NOT_SERVING for good at shutdown.
    let tasks = manager.tasks().clone();
    // Cancelled by shutdown (aborted once health is NOT_SERVING for good).
    let storage_health = {
        let health = health.clone();
        let mut storage_ok = manager.logs().storage_ok();
        tasks.spawn("storage health", async move {
            while storage_ok.changed().await.is_ok() {
                let ok = *storage_ok.borrow_and_update();
                if ok {
                    tracing::info!("storage works again: SERVING");
                    health.set(true).await;
                } else {
                    tracing::error!("storage failing: NOT_SERVING");
                    health.set(false).await;
                }
            }
        })
    };
    // Expired receipts of keyed calls and sessions past the retention
    // options are deleted once a minute (and at start-up); the task ends
    // with the streams, at shutdown (it finishes a pass already begun).
    let pruning = tasks.spawn("pruning", prune_receipts(manager.clone(), streams.clone()));
    // On a shared store: the node's lease and the reaper, until shutdown.
    if let Some(node) = manager.node() {
        // The runs a previous instance of this node left live (its
        // sessions under the earlier epoch) end before anything is served.
        crate::cluster::reaper::pass(&node, &manager).await;
        tasks.spawn(
            "node lease",
            crate::cluster::lease::keep(node.clone(), manager.clone(), streams.clone()),
        );
        tasks.spawn(
            "reaper",
            crate::cluster::reaper::reap(node, manager.clone(), streams.clone()),
        );
    }
    let signal = {
        let manager = manager.clone();
        let streams = streams.clone();
        let health = health.clone();
        let storage_health = storage_health.abort_handle();
        async move {
            shutdown.await;
            storage_health.abort();
            tracing::info!("shutting down: stopping live runs");
            health.set(false).await;
            manager.shutdown().await;
            // After the runs' run_end were appended, so subscribers see them.
            streams.cancel();
            // Its runs ended and its lease renewal stopped with the streams:
            // other nodes may claim its sessions at once.
            if manager.node().is_some()
                && let Err(e) = manager.logs().leave_node().await
            {
                tracing::warn!(error = %e, "could not end the node lease; other nodes wait for it to run out");
            }
        }
    };
    tracing::info!(
        addr = ?addr,
        node = %node,
        auth = auth.required(),
        tls = opts.tls.is_some(),
        metrics = opts.metrics,
        ui = opts.ui,
        "serving gRPC and grpc-web"
    );
    let routes = Routes::new(InterceptedService::new(session_service, auth.clone()))
        .add_service(InterceptedService::new(health_service, auth.clone()))
        .add_service(InterceptedService::new(reflection_v1, auth.clone()))
        .add_service(InterceptedService::new(reflection_v1alpha, auth.clone()))
        .prepare();
    let node_header = node.header_value();
    let service = tower::ServiceBuilder::new()
        // Outermost, so every answer names this node: RPCs, errors of the
        // layers below, preflights and the plain HTTP answers alike.
        .map_response(move |mut resp: http::Response<_>| {
            resp.headers_mut()
                .insert(crate::node::HEADER, node_header.clone());
            resp
        })
        // As tonic's own server: an error of a layer becomes a gRPC status,
        // and the client's grpc-timeout bounds the wait for a response.
        .layer(RecoverErrorLayer::new())
        .layer(DeadlineLayer)
        .layer(AccessLayer::new(opts.access.clone()))
        .layer(PlainLayer::new(health.healthz()))
        .layer(PlainLayer::new(Scrape::new(metrics, auth)))
        .layer(PlainLayer::new(Console::new(opts.ui)))
        .layer(cors_layer(opts.access.clone()))
        .layer(tonic_web::GrpcWebLayer::new())
        .layer(RequestLimitLayer::new(opts.max_request_bytes))
        .service(routes);
    let service: HttpService = tower::util::BoxCloneService::new(ServiceExt::<
        http::Request<tonic::body::Body>,
    >::map_response(
        service,
        |resp| resp.map(tonic::body::Body::new),
    ));
    crate::connections::serve(
        listener,
        opts.tls,
        service,
        opts.connections,
        connection_stats,
        &tasks,
        signal,
    )
    .await;
    // Whatever ended the server, the runs get their run_end and the log its flush.
    manager.shutdown().await;
    streams.cancel();
    storage_health.abort();
    let _ = pruning.await;
    // The runs have ended; their reapers may still be killing what is left
    // of a group or sweeping the run marker, and a recorder writing its
    // cassette. They finish before the log closes and the runtime drops.
    tasks.wait(TASKS_WAIT).await;
    manager.logs().shutdown().await;
    Ok(())
}

/// The longest shutdown waits for the server's tasks once the runs have
/// ended: a reaper's kill and marker sweep take milliseconds; a task still
/// running after this is named in the log and left to the runtime.
pub const TASKS_WAIT: Duration = Duration::from_secs(10);

/// How often expired idempotency receipts are deleted and the retention
/// pass runs.
const PRUNE_EVERY: Duration = Duration::from_secs(60);

/// Deletes expired receipts every [`PRUNE_EVERY`] (the first time at once)
/// until `stop` is cancelled. A failed pass is logged and tried again next
/// time: an expired receipt is ignored whether pruned or not.
///
/// The retention pass ([`SessionManager::retain`]: `--retention-days`,
/// `--max-sessions`) runs on the same tick, after it, and is retried the
/// same way.
async fn prune_receipts(manager: SessionManager, stop: CancellationToken) {
    let mut every = tokio::time::interval(PRUNE_EVERY);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = every.tick() => {}
        }
        match manager.prune_receipts().await {
            Ok(0) => {}
            Ok(pruned) => tracing::debug!(pruned, "expired idempotency receipts deleted"),
            Err(e) => tracing::warn!(error = %e, "could not prune idempotency receipts"),
        }
        if let Err(e) = manager.retain().await {
            tracing::warn!(error = %e, "retention pass failed; retrying next minute");
        }
    }
}
