//! A reconnecting session client: the Rust side of the seed's `useSession`.
//!
//! [`SessionClient`] keeps one `Subscribe` stream to a session open and turns
//! it into a stream of [`Snapshot`]s on a [`tokio::sync::watch`] channel: the
//! events held, the state [`derive`](crate::derive) computes from them,
//! whether the stream is connected, and the hydration phase.
//!
//! What it guarantees, whatever the network does:
//! - **No gap, no duplicate.** It resubscribes from the last seq it holds;
//!   events at or below it are dropped; an event that skips a seq is treated
//!   as a broken stream (resubscribe from the last good seq).
//! - **Resets rebuild.** When the server answers `ReplayStart{reset: true}`
//!   (the client's cursor is past the server's head, or too old to replay),
//!   the list is cleared and rebuilt from the replayed tail.
//! - **Reconnects back off.** Any stream error or end schedules a new
//!   Subscribe after a delay with full jitter, growing from 200 ms to 10 s
//!   ([`BackoffPolicy`]), reset once the stream makes progress.
//! - **A silent stream is a dead stream.** The server sends a heartbeat
//!   every `--heartbeat` (15 s by default) while a stream is idle; any
//!   message counts as proof of life. When nothing at all arrives for two
//!   [`SessionOptions::heartbeat_interval`]s (a half-open connection, a
//!   proxy that swallowed the stream), the client drops the stream and
//!   resubscribes from its cursor like after any other break. A channel the
//!   client builds itself ([`SessionClient::connect`]) also sends HTTP/2
//!   keepalive pings every interval, idle or not, and closes the connection
//!   when one goes unanswered for [`KEEPALIVE_TIMEOUT`].
//! - **An undeliverable message stops the stream, not the program.** The
//!   client decodes messages up to [`SessionOptions::max_message_bytes`]
//!   (4 MiB, the bound the server keeps every message under). A message
//!   over it (an older server, a proxy, a smaller limit) would come back at
//!   the same cursor on every resubscribe, so the client does not retry: it
//!   sets [`Snapshot::fatal`] and stays stopped until
//!   [`SessionClient::reconnect`].
//! - **Retries are safe.** [`start`](SessionClient::start),
//!   [`send`](SessionClient::send), [`stop`](SessionClient::stop),
//!   [`respond_permission`](SessionClient::respond_permission),
//!   [`stop_task`](SessionClient::stop_task) and the setting and rewind
//!   calls ([`set_model`](SessionClient::set_model),
//!   [`set_permission_mode`](SessionClient::set_permission_mode),
//!   [`set_max_thinking_tokens`](SessionClient::set_max_thinking_tokens),
//!   [`rewind_files`](SessionClient::rewind_files)) give each logical call a
//!   fresh `idempotency_key` ([`new_idempotency_key`]) and
//!   retry a transport failure (UNAVAILABLE, UNKNOWN, DEADLINE_EXCEEDED) up
//!   to [`SessionOptions::call_retries`] times with that same key, so a
//!   call whose answer was lost is applied once: the server answers the
//!   repeat with the first response. The `*_with_key` variants take a key
//!   the application keeps itself (to retry across its own restarts).
//!   The read-only [`get_context_usage`](SessionClient::get_context_usage)
//!   is retried the same way, without a key.
//! - **Live typing.** With [`SessionOptions::include_deltas`] (the default)
//!   the stream also carries the `delta`s of the assistant message being
//!   written, folded into [`Snapshot::partial`] by the rules of
//!   [`partial`](crate::partial): fragments grow a block, the `content`
//!   event of that message supersedes its blocks, `turn_end` and `run_end`
//!   drop them all, and each new stream starts empty (its replay header
//!   drops them) until the server's snapshot after `caught_up` restores
//!   what is still being written. Never part of `events` or `derived`.
//! - **Hydration settles once.** [`Hydration::Hydrating`] until the first
//!   replay has caught up and any history page requested meanwhile has
//!   arrived, then [`Hydration::Ready`] for good: use it to keep replayed
//!   history from animating like live output.
//!
//! One task per client owns all of this state; the [`SessionClient`] handle
//! (cheap to clone) sends it commands and runs the unary RPCs itself. The
//! task ends on [`SessionClient::close`] or when the last handle is dropped.
//!
//! # Example
//! ```no_run
//! use agent_harness_client::session::{Hydration, SessionClient, SessionOptions};
//!
//! # async fn demo() -> Result<(), agent_harness_client::session::SessionError> {
//! let client = SessionClient::connect(
//!     "http://127.0.0.1:50051",
//!     "my-session",
//!     SessionOptions::default().with_auth_token("secret"),
//! )?;
//! // Wait for the replay before showing anything as live.
//! let ready = client.wait_for(|s| s.hydration == Hydration::Ready).await?;
//! println!("{} events, status {}", ready.events.len(), ready.derived.status.as_str());
//!
//! client.send("what changed in the last commit?", Vec::new()).await?;
//! let mut updates = client.watch();
//! while updates.changed().await.is_ok() {
//!     let snapshot = updates.borrow_and_update().clone();
//!     if let Some(event) = snapshot.events.last() {
//!         println!("seq {} status {}", event.seq, snapshot.derived.status.as_str());
//!     }
//!     // What the assistant is typing right now, before its `content` lands.
//!     print!("\r{}", snapshot.partial.main_text());
//! }
//! # Ok(())
//! # }
//! ```

mod backoff;
mod control;
mod error;
mod events;
mod headers;
mod log;
mod task;

use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinHandle;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::{Channel, Endpoint};

use crate::derive::{self, Derived};
use crate::partial::Partial;
use crate::pb::{self, session_service_client::SessionServiceClient};

pub use backoff::{Backoff, BackoffPolicy};
pub use error::SessionError;
pub use events::Events;
pub use headers::{CallHeaders, SESSION_HEADER};

use task::{Command, SessionTask};

/// The generated client behind the interceptor adding the call headers.
type Rpc = SessionServiceClient<InterceptedService<Channel, CallHeaders>>;

/// Whether the client is still catching up with the session's past.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Hydration {
    /// The first replay, or a history page requested during it, is still
    /// arriving: what is shown is history, not live output.
    #[default]
    Hydrating,
    /// Caught up. Set once and never left, even across reconnects.
    Ready,
}

/// Everything a UI shows about a session, as of one moment.
///
/// Cheap to clone: the events and the derived state are shared.
#[derive(Debug, Clone)]
pub struct Snapshot {
    /// The events held, oldest first: server events in seq order, plus
    /// local events added with [`SessionClient::inject_event`].
    pub events: Events,
    /// Equal to [`derive::derive_all`] over `events`; kept by a
    /// [`derive::Fold`], so an appended event costs O(1), not a refold.
    pub derived: Arc<Derived>,
    /// True while a Subscribe stream is open (from its ReplayStart until it
    /// breaks).
    pub connected: bool,
    /// See [`Hydration`].
    pub hydration: Hydration,
    /// True when older events than the oldest held exist on the server:
    /// [`SessionClient::fetch_history`] would return some.
    pub has_more_history: bool,
    /// The last seq taken from the stream: the next Subscribe's `after_seq`.
    pub cursor: u64,
    /// Why the last subscription broke; cleared when a new one opens.
    pub error: Option<String>,
    /// Live typing: the blocks of the assistant message being written, not
    /// yet superseded by their `content` event (empty without
    /// [`SessionOptions::include_deltas`]). See [`crate::partial`] for when
    /// blocks grow, reset and drop. Shared; a new `Arc` when it changes.
    pub partial: Arc<Partial>,
    /// Set when the subscription stopped for good: a message was too large
    /// to decode ([`SessionOptions::max_message_bytes`]), and resubscribing
    /// at the same cursor would only fail again. The client does not retry
    /// until [`SessionClient::reconnect`] (which clears it).
    pub fatal: Option<SessionError>,
}

impl Snapshot {
    /// What the agent is doing this instant: the derived activity refined
    /// by live typing ("Writing" while answer text streams, "Running Bash"
    /// while a tool's input streams; [`crate::live`]).
    pub fn live_activity(&self) -> derive::Activity {
        crate::live::live_activity(&self.derived.activity, &self.partial)
    }
}

impl Default for Snapshot {
    fn default() -> Self {
        Self {
            events: Events::default(),
            derived: Arc::new(derive::derive_all(&[])),
            partial: Arc::default(),
            connected: false,
            hydration: Hydration::Hydrating,
            has_more_history: false,
            cursor: 0,
            error: None,
            fatal: None,
        }
    }
}

/// The server's default `--heartbeat`: the default of
/// [`SessionOptions::heartbeat_interval`].
pub const DEFAULT_HEARTBEAT_INTERVAL: Duration = Duration::from_secs(15);

/// How long an HTTP/2 keepalive ping may go unanswered before the channel
/// built by [`SessionClient::connect`] closes the connection (tonic's own
/// default).
pub const KEEPALIVE_TIMEOUT: Duration = Duration::from_secs(20);

/// gRPC's default receive limit, which the server keeps every message
/// under: the default of [`SessionOptions::max_message_bytes`].
pub const MAX_MESSAGE_BYTES: usize = 4 * 1024 * 1024;

/// How a [`SessionClient`] behaves.
#[derive(Clone)]
pub struct SessionOptions {
    /// Reconnect delays (default 200 ms growing to 10 s, full jitter).
    pub backoff: BackoffPolicy,
    /// Seeds the backoff jitter, for reproducible runs; None seeds from the OS.
    pub backoff_seed: Option<u64>,
    /// Page size of [`SessionClient::fetch_history`] when called with no
    /// limit (default 50, the server's default too).
    pub history_page: u32,
    /// Bearer token sent as `authorization: Bearer <token>` on every call;
    /// required by servers bound beyond loopback.
    pub auth_token: Option<String>,
    /// The server's heartbeat interval (its `--heartbeat`, default 15 s).
    /// A Subscribe stream that delivers nothing, heartbeat or otherwise,
    /// for twice this long is treated as broken and resubscribed from the
    /// cursor. Also the HTTP/2 keepalive interval of the channel
    /// [`SessionClient::connect`] builds. Zero turns both off.
    pub heartbeat_interval: Duration,
    /// Largest message the client decodes (default [`MAX_MESSAGE_BYTES`],
    /// the server's bound). A larger one stops the subscription with
    /// [`Snapshot::fatal`] instead of resubscribing at the same cursor.
    pub max_message_bytes: usize,
    /// How many times Start, Send, Stop, RespondPermission, StopTask,
    /// SetModel, SetPermissionMode, SetMaxThinkingTokens and RewindFiles
    /// are retried (with the same idempotency key, after a
    /// [`SessionOptions::backoff`] delay), and GetContextUsage, when the
    /// call fails in transit: UNAVAILABLE, UNKNOWN or DEADLINE_EXCEEDED
    /// (default 3; 0: never).
    pub call_retries: u32,
    /// Ask the server for live typing (`SubscribeRequest.include_deltas`)
    /// and keep [`Snapshot::partial`] (default true: this client is for
    /// UIs). False leaves it empty and saves the server the work.
    pub include_deltas: bool,
}

impl Default for SessionOptions {
    fn default() -> Self {
        Self {
            backoff: BackoffPolicy::default(),
            backoff_seed: None,
            history_page: 50,
            auth_token: None,
            heartbeat_interval: DEFAULT_HEARTBEAT_INTERVAL,
            max_message_bytes: MAX_MESSAGE_BYTES,
            call_retries: 3,
            include_deltas: true,
        }
    }
}

impl SessionOptions {
    /// Sets the bearer token.
    pub fn with_auth_token(mut self, token: impl Into<String>) -> Self {
        self.auth_token = Some(token.into());
        self
    }

    /// Sets the reconnect delays.
    pub fn with_backoff(mut self, backoff: BackoffPolicy) -> Self {
        self.backoff = backoff;
        self
    }

    /// Makes the backoff jitter reproducible.
    pub fn with_backoff_seed(mut self, seed: u64) -> Self {
        self.backoff_seed = Some(seed);
        self
    }

    /// Sets the expected heartbeat interval (match the server's
    /// `--heartbeat`); zero turns stall detection and keepalive off.
    pub fn with_heartbeat_interval(mut self, interval: Duration) -> Self {
        self.heartbeat_interval = interval;
        self
    }

    /// Sets the largest message the client decodes.
    pub fn with_max_message_bytes(mut self, bytes: usize) -> Self {
        self.max_message_bytes = bytes;
        self
    }

    /// Sets how often a call that failed in transit is retried with its key.
    pub fn with_call_retries(mut self, retries: u32) -> Self {
        self.call_retries = retries;
        self
    }

    /// Asks for live typing (true, the default) or not.
    pub fn with_include_deltas(mut self, include: bool) -> Self {
        self.include_deltas = include;
        self
    }

    /// Sets the default history page size.
    pub fn with_history_page(mut self, limit: u32) -> Self {
        self.history_page = limit;
        self
    }
}

impl fmt::Debug for SessionOptions {
    /// Never prints the token.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SessionOptions")
            .field("backoff", &self.backoff)
            .field("backoff_seed", &self.backoff_seed)
            .field("history_page", &self.history_page)
            .field("heartbeat_interval", &self.heartbeat_interval)
            .field("max_message_bytes", &self.max_message_bytes)
            .field("call_retries", &self.call_retries)
            .field("include_deltas", &self.include_deltas)
            .field(
                "auth_token",
                &self.auth_token.as_ref().map(|_| "<redacted>"),
            )
            .finish()
    }
}

/// A handle on one session: a live [`Snapshot`] plus the session's RPCs.
///
/// Clones share the subscription task; it ends when [`close`](Self::close)
/// is called or the last clone is dropped.
#[derive(Clone)]
pub struct SessionClient {
    inner: Arc<Inner>,
}

struct Inner {
    session_id: String,
    rpc: Rpc,
    /// See [`SessionOptions::call_retries`].
    call_retries: u32,
    /// Delays between those retries.
    retry_backoff: BackoffPolicy,
    commands: mpsc::UnboundedSender<Command>,
    state: watch::Receiver<Snapshot>,
    task: Mutex<Option<JoinHandle<()>>>,
}

impl SessionClient {
    /// Opens a client for `session_id` on the server at `endpoint` (e.g.
    /// `http://127.0.0.1:50051`).
    ///
    /// The connection is made lazily, so this succeeds while the server is
    /// down; the subscription keeps retrying. The channel sends HTTP/2
    /// keepalive pings every [`SessionOptions::heartbeat_interval`] (idle
    /// or not) and drops a connection whose ping goes unanswered for
    /// [`KEEPALIVE_TIMEOUT`]. Must be called inside a Tokio runtime (it
    /// spawns the subscription task).
    pub fn connect(
        endpoint: impl Into<String>,
        session_id: impl Into<String>,
        options: SessionOptions,
    ) -> Result<Self, SessionError> {
        let endpoint = endpoint.into();
        let mut builder = Endpoint::from_shared(endpoint.clone())
            .map_err(|e| SessionError::Config(format!("endpoint {endpoint:?}: {e}")))?;
        if !options.heartbeat_interval.is_zero() {
            builder = builder
                .http2_keep_alive_interval(options.heartbeat_interval)
                .keep_alive_timeout(KEEPALIVE_TIMEOUT)
                .keep_alive_while_idle(true);
        }
        let channel = builder.connect_lazy();
        Self::with_channel(channel, session_id, options)
    }

    /// Opens a client for `session_id` over an existing channel (to share one
    /// HTTP/2 connection between sessions, or to configure TLS and timeouts).
    /// The channel is used as given: set HTTP/2 keepalive on its `Endpoint`
    /// yourself (stall detection still applies). Must be called inside a
    /// Tokio runtime.
    pub fn with_channel(
        channel: Channel,
        session_id: impl Into<String>,
        options: SessionOptions,
    ) -> Result<Self, SessionError> {
        let session_id = session_id.into();
        let headers = CallHeaders::new(options.auth_token.as_deref(), Some(&session_id))?;
        let rpc = SessionServiceClient::with_interceptor(channel, headers)
            .max_decoding_message_size(options.max_message_bytes);
        let (state_tx, state_rx) = watch::channel(Snapshot::default());
        let (commands, commands_rx) = mpsc::unbounded_channel();
        let backoff = match options.backoff_seed {
            Some(seed) => Backoff::with_seed(options.backoff, seed),
            None => Backoff::new(options.backoff),
        };
        let initial = state_rx.borrow().derived.clone();
        let task = SessionTask {
            rpc: rpc.clone(),
            session_id: session_id.clone(),
            history_page: options.history_page,
            stall_after: options.heartbeat_interval * 2,
            include_deltas: options.include_deltas,
            backoff,
            state: state_tx,
            log: Default::default(),
            connected: false,
            hydration: Hydration::Hydrating,
            caught_up_once: false,
            backfill_pending: false,
            error: None,
            fatal: None,
            meta_dirty: false,
            derived: initial,
            partial: Arc::default(),
            partial_dirty: false,
        };
        let handle = tokio::spawn(task.run(commands_rx));
        Ok(Self {
            inner: Arc::new(Inner {
                session_id,
                rpc,
                call_retries: options.call_retries,
                retry_backoff: options.backoff,
                commands,
                state: state_rx,
                task: Mutex::new(Some(handle)),
            }),
        })
    }

    /// The session this client follows.
    pub fn session_id(&self) -> &str {
        &self.inner.session_id
    }

    /// A receiver of every snapshot from now on (`changed()` fires once per
    /// published batch).
    pub fn watch(&self) -> watch::Receiver<Snapshot> {
        self.inner.state.clone()
    }

    /// The current snapshot.
    pub fn snapshot(&self) -> Snapshot {
        self.inner.state.borrow().clone()
    }

    /// The events held now, oldest first.
    pub fn events(&self) -> Events {
        self.inner.state.borrow().events.clone()
    }

    /// Waits until a snapshot satisfies `pred` (checked on the current one
    /// first) and returns it. `Closed` if the client closes first.
    pub async fn wait_for(
        &self,
        mut pred: impl FnMut(&Snapshot) -> bool,
    ) -> Result<Snapshot, SessionError> {
        let mut rx = self.watch();
        let snapshot = rx
            .wait_for(|s| pred(s))
            .await
            .map_err(|_| SessionError::Closed)?;
        Ok(snapshot.clone())
    }

    /// Spawns the CLI for this session, creating the session on first use
    /// (FAILED_PRECONDITION when a run is already live: use
    /// [`send`](Self::send)). One logical call: retried in transit with one
    /// fresh idempotency key.
    pub async fn start(&self, config: pb::StartConfig) -> Result<pb::StartResponse, SessionError> {
        self.start_with_key(new_idempotency_key(), config).await
    }

    /// [`start`](Self::start) under `key`: a repeat of a Start this session
    /// applied with `key` (within the server's TTL, at least 10 minutes)
    /// returns that Start's response and starts nothing.
    pub async fn start_with_key(
        &self,
        key: impl Into<String>,
        config: pb::StartConfig,
    ) -> Result<pb::StartResponse, SessionError> {
        let request = pb::StartRequest {
            session_id: self.inner.session_id.clone(),
            config: Some(config),
            idempotency_key: key.into(),
        };
        self.retrying("Start", |mut rpc| {
            let request = request.clone();
            async move { rpc.start(request).await }
        })
        .await
    }

    /// The agents the server runs (ListAgents): the names
    /// [`pb::StartConfig::agent`] takes, each with its kind (`vocab::agent_kind`)
    /// and whether it is the default. Read-only, so retried in transit.
    pub async fn list_agents(&self) -> Result<Vec<pb::AgentInfo>, SessionError> {
        self.retrying("ListAgents", |mut rpc| async move {
            rpc.list_agents(pb::ListAgentsRequest {}).await
        })
        .await
        .map(|r| r.agents)
    }

    /// Sends a user message (content blocks, e.g. images, go before the
    /// text). The server writes it to the live process or starts a resumed
    /// run; the response names the run that got it. One logical call:
    /// retried in transit with one fresh idempotency key, so the message is
    /// delivered once.
    pub async fn send(
        &self,
        input: impl Into<String>,
        content_blocks: Vec<pbjson_types::Struct>,
    ) -> Result<pb::SendResponse, SessionError> {
        self.send_with_key(new_idempotency_key(), input, content_blocks)
            .await
    }

    /// [`send`](Self::send) under `key`: a repeat of a Send this session
    /// applied with `key` returns its run id and delivers nothing again.
    pub async fn send_with_key(
        &self,
        key: impl Into<String>,
        input: impl Into<String>,
        content_blocks: Vec<pbjson_types::Struct>,
    ) -> Result<pb::SendResponse, SessionError> {
        let request = pb::SendRequest {
            session_id: self.inner.session_id.clone(),
            input: input.into(),
            content_blocks,
            idempotency_key: key.into(),
        };
        self.retrying("Send", |mut rpc| {
            let request = request.clone();
            async move { rpc.send(request).await }
        })
        .await
    }

    /// Stops the current turn (accepted in any state). Retried in transit
    /// with one fresh idempotency key: a retry never stops a later turn.
    pub async fn stop(&self) -> Result<pb::StopResponse, SessionError> {
        self.stop_with_key(new_idempotency_key()).await
    }

    /// [`stop`](Self::stop) under `key`.
    pub async fn stop_with_key(
        &self,
        key: impl Into<String>,
    ) -> Result<pb::StopResponse, SessionError> {
        let request = pb::StopRequest {
            session_id: self.inner.session_id.clone(),
            idempotency_key: key.into(),
        };
        self.retrying("Stop", |mut rpc| {
            let request = request.clone();
            async move { rpc.stop(request).await }
        })
        .await
    }

    /// Answers a pending permission request. When allowing, `updated_input`
    /// replaces the tool's input (None: run it as requested); when denying,
    /// `message` is what the model is told. Retried in transit with one
    /// fresh idempotency key (a retry of an answer that landed succeeds
    /// instead of NOT_FOUND).
    pub async fn respond_permission(
        &self,
        request_id: impl Into<String>,
        allow: bool,
        updated_input: Option<pbjson_types::Struct>,
        message: impl Into<String>,
    ) -> Result<(), SessionError> {
        let key = new_idempotency_key();
        self.respond_permission_with_key(key, request_id, allow, updated_input, message)
            .await
    }

    /// [`respond_permission`](Self::respond_permission) under `key`.
    pub async fn respond_permission_with_key(
        &self,
        key: impl Into<String>,
        request_id: impl Into<String>,
        allow: bool,
        updated_input: Option<pbjson_types::Struct>,
        message: impl Into<String>,
    ) -> Result<(), SessionError> {
        let request = pb::RespondPermissionRequest {
            session_id: self.inner.session_id.clone(),
            request_id: request_id.into(),
            allow,
            updated_input,
            message: message.into(),
            idempotency_key: key.into(),
        };
        self.retrying("RespondPermission", |mut rpc| {
            let request = request.clone();
            async move { rpc.respond_permission(request).await }
        })
        .await
        .map(|_| ())
    }

    /// Runs one logical call: `call` once, and again (same request, so the
    /// same idempotency key) after a backoff delay while it fails in transit,
    /// at most [`SessionOptions::call_retries`] more times.
    async fn retrying<T, F, Fut>(&self, rpc: &'static str, mut call: F) -> Result<T, SessionError>
    where
        F: FnMut(Rpc) -> Fut,
        Fut: std::future::Future<Output = Result<tonic::Response<T>, tonic::Status>>,
    {
        let mut backoff = Backoff::new(self.inner.retry_backoff);
        let mut retries = 0;
        loop {
            match call(self.inner.rpc.clone()).await {
                Ok(response) => return Ok(response.into_inner()),
                Err(status) if retries < self.inner.call_retries && in_transit(&status) => {
                    retries += 1;
                    tracing::debug!(rpc, retries, code = ?status.code(), "retrying with the same idempotency key");
                    tokio::time::sleep(backoff.next_delay()).await;
                }
                Err(status) => return Err(SessionError::Rpc { rpc, status }),
            }
        }
    }

    /// Prepends the next older page (History before the oldest seq held) and
    /// returns whether still older events exist. `limit` None uses
    /// [`SessionOptions::history_page`].
    ///
    /// Concurrent calls are coalesced: while one History call is in flight,
    /// later callers wait for it and get its result (so it is safe to fire
    /// from every scroll event). Before any event has arrived there is
    /// nothing to page from, and it returns `Ok(false)` without a call.
    pub async fn fetch_history(&self, limit: impl Into<Option<u32>>) -> Result<bool, SessionError> {
        let (reply, rx) = oneshot::channel();
        self.command(Command::FetchHistory {
            limit: limit.into().unwrap_or(0),
            reply,
        })?;
        rx.await.map_err(|_| SessionError::Closed)?
    }

    /// Adds a local event, e.g. an optimistic copy of a message being sent.
    /// An event with seq 0 is appended; one with a seq is ignored when that
    /// seq is already held and otherwise placed in seq order (the server's
    /// copy replaces it when streamed). Returns whether it was added. A
    /// reset drops local events along with everything else.
    pub async fn inject_event(&self, event: pb::Event) -> Result<bool, SessionError> {
        let (reply, rx) = oneshot::channel();
        self.command(Command::Inject {
            event: Box::new(event),
            reply,
        })?;
        rx.await.map_err(|_| SessionError::Closed)
    }

    /// Drops the current stream (or backoff wait) and resubscribes now.
    pub fn reconnect(&self) -> Result<(), SessionError> {
        self.command(Command::Reconnect)
    }

    /// Ends the subscription task and waits for it; every clone of this
    /// handle then answers `Closed` to commands (unary RPCs still work).
    pub async fn close(&self) {
        let _ = self.command(Command::Close);
        let handle = self
            .inner
            .task
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .take();
        if let Some(handle) = handle {
            let _ = handle.await;
        }
    }

    fn command(&self, command: Command) -> Result<(), SessionError> {
        self.inner
            .commands
            .send(command)
            .map_err(|_| SessionError::Closed)
    }
}

/// A fresh idempotency key: 128 random bits as 32 hex digits. Use one per
/// logical call and the same one for every retry of it.
pub fn new_idempotency_key() -> String {
    format!("{:032x}", rand::random::<u128>())
}

/// Whether a failed call may not have reached the server, or its answer
/// was lost: the codes a transport failure produces. Anything else is the
/// server's answer and retrying would get the same.
fn in_transit(status: &tonic::Status) -> bool {
    matches!(
        status.code(),
        tonic::Code::Unavailable | tonic::Code::Unknown | tonic::Code::DeadlineExceeded
    )
}

impl fmt::Debug for SessionClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SessionClient")
            .field("session_id", &self.inner.session_id)
            .finish_non_exhaustive()
    }
}
