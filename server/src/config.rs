//! Command line and environment configuration (clap). The doc comments on
//! these fields are the `--help` text.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

use crate::error::Error;
use crate::{body_limit, connections, log, manager, partial, rpc, start_limit, store, supervise};

/// A default duration as `--help` shows it and [`parse_duration`] reads it
/// ("30m", "50ms"), from the subsystem's own constant: each default is
/// written once, where it is used.
macro_rules! duration_default {
    ($d:expr) => {{
        static TEXT: std::sync::OnceLock<String> = std::sync::OnceLock::new();
        TEXT.get_or_init(|| format_duration($d)).as_str()
    }};
}

/// agent-harness: runs Claude Code CLI sessions behind a gRPC API with a
/// durable event log.
#[derive(Debug, Parser)]
#[command(name = "agent-harness", version, about, long_about = None)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve the SessionService (native gRPC and grpc-web on one port).
    Serve(Box<ServeConfig>),
    /// Record a cassette: run the real claude CLI once and write every
    /// stdout/stdin line with its time offset to a JSONL file.
    Record(RecordConfig),
    /// Write a new random 256-bit bearer token to a file (mode 0600) and
    /// print how to pass it to `serve` and to each client.
    Token(TokenConfig),
}

/// Which process adapter runs the CLI.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AdapterKind {
    /// One keep-alive `claude --input-format stream-json` process per run:
    /// follow-ups are stdin writes, Stop interrupts the turn.
    Interactive,
    /// One `claude --print` process per turn.
    Cli,
    /// Replays a recorded cassette instead of running the CLI.
    Cassette(PathBuf),
}

impl FromStr for AdapterKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "interactive" => Ok(AdapterKind::Interactive),
            "cli" => Ok(AdapterKind::Cli),
            _ => match s.strip_prefix("cassette:") {
                Some(path) if !path.is_empty() => Ok(AdapterKind::Cassette(PathBuf::from(path))),
                _ => Err(format!(
                    "unknown adapter {s:?}: use interactive, cli or cassette:FILE"
                )),
            },
        }
    }
}

pub use crate::adapter::claude::PermissionMode;

/// Configuration of `agent-harness serve`. Every flag can also be set with
/// the environment variable shown in `--help`.
///
/// Each default is the constant of the subsystem the flag sizes (the log's
/// window, the manager's timeouts, ...); [`crate::server`] maps the fields
/// into each subsystem's options, so nothing below it reads this.
#[derive(Debug, Clone, PartialEq, Args)]
pub struct ServeConfig {
    /// Address to listen on (native gRPC and grpc-web share it). A
    /// non-loopback address requires --auth-token-file.
    #[arg(long, env = "AGENT_HARNESS_LISTEN", default_value = "127.0.0.1:50051")]
    pub listen: SocketAddr,

    /// Directory holding the event store (`events.redb`, unless
    /// --store-url is given), the secrets key and the CLI's config.
    #[arg(long, env = "AGENT_HARNESS_DATA_DIR", default_value = "./data")]
    pub data_dir: PathBuf,

    /// Keep the event log in PostgreSQL 15+ instead of redb:
    /// `postgres://user:password@host:port/database`, with
    /// `?sslmode=require` (encrypted) or `?sslmode=verify-full` (encrypted,
    /// certificate checked; `sslrootcert=FILE` for a private CA). The URL is
    /// only ever shown with its password left out.
    #[arg(long, env = "AGENT_HARNESS_STORE_URL", hide_env_values = true)]
    pub store_url: Option<StoreUrl>,

    /// Path of the claude binary. Default: $CLAUDE_BIN, then the usual
    /// install locations, then PATH.
    #[arg(long, env = "AGENT_HARNESS_CLAUDE_BIN")]
    pub claude_bin: Option<PathBuf>,

    /// Process adapter: `interactive` (keep-alive stream-json process),
    /// `cli` (one `--print` process per turn) or `cassette:FILE` (replay a
    /// recording; no CLI needed).
    #[arg(long, env = "AGENT_HARNESS_ADAPTER", default_value = "interactive")]
    pub adapter: AdapterKind,

    /// With `--adapter cassette:FILE`: multiplies the recorded gaps between
    /// lines (1 = as recorded, 0 = as fast as possible, for load tests).
    #[arg(long, env = "AGENT_HARNESS_CASSETTE_TIMESCALE", default_value_t = 1.0)]
    pub cassette_timescale: f64,

    /// Tool permission prompts: `relay` them to clients, leave them to the
    /// CLI's `settings`, or `skip` them (--dangerously-skip-permissions).
    #[arg(
        long,
        env = "AGENT_HARNESS_PERMISSIONS",
        value_enum,
        default_value = "relay"
    )]
    pub permissions: PermissionMode,

    /// End a keep-alive process that has had no turn in progress for this
    /// long (run_end IDLE_TIMEOUT). 0 = never.
    #[arg(long, env = "AGENT_HARNESS_IDLE_TIMEOUT", default_value = duration_default!(manager::DEFAULT_IDLE_TIMEOUT), value_parser = parse_duration)]
    pub idle_timeout: Duration,

    /// Deny a relayed permission request nobody answered within this time.
    #[arg(long, env = "AGENT_HARNESS_PERMISSION_TIMEOUT", default_value = duration_default!(manager::DEFAULT_PERMISSION_TIMEOUT), value_parser = parse_duration)]
    pub permission_timeout: Duration,

    /// After a Stop's interrupt, how long to wait for the turn to end before
    /// signalling the process group (SIGINT).
    #[arg(long, env = "AGENT_HARNESS_STOP_GRACE", default_value = duration_default!(manager::DEFAULT_STOP_GRACE), value_parser = parse_duration)]
    pub stop_grace: Duration,

    /// Time between SIGINT, SIGTERM and SIGKILL while stopping a process.
    #[arg(long, env = "AGENT_HARNESS_KILL_GRACE", default_value = duration_default!(manager::DEFAULT_KILL_GRACE), value_parser = parse_duration)]
    pub kill_grace: Duration,

    /// Most events a Subscribe replays before going live; an older cursor
    /// gets a reset and the tail.
    #[arg(long, env = "AGENT_HARNESS_MAX_REPLAY", default_value_t = log::DEFAULT_MAX_REPLAY)]
    pub max_replay: usize,

    /// Events kept in memory per session; older reads fall through to the
    /// store.
    #[arg(long, env = "AGENT_HARNESS_WINDOW", default_value_t = log::DEFAULT_WINDOW)]
    pub window: usize,

    /// Most bytes (encoded events) one session keeps in memory; its newest
    /// event always stays.
    #[arg(long, env = "AGENT_HARNESS_WINDOW_BYTES", default_value_t = log::DEFAULT_WINDOW_BYTES)]
    pub window_bytes: usize,

    /// Most bytes all sessions keep in memory together; past it the least
    /// recently used sessions' windows are dropped (reads go to the store).
    #[arg(long, env = "AGENT_HARNESS_CACHE_BYTES", default_value_t = log::DEFAULT_WINDOW_CACHE_BYTES)]
    pub cache_bytes: usize,

    /// Most idle sessions (no live run, no open stream) whose state stays in
    /// memory; past it the least recently used are evicted and reloaded
    /// from the store when used again.
    #[arg(long, env = "AGENT_HARNESS_CACHE_SESSIONS", default_value_t = log::DEFAULT_CACHE_SESSIONS)]
    pub cache_sessions: usize,

    /// Size of the embedded store's page cache (redb), bytes: what it keeps
    /// of the file in memory.
    #[arg(long, env = "AGENT_HARNESS_STORE_CACHE_BYTES", default_value_t = store::DEFAULT_PAGE_CACHE_BYTES)]
    pub store_cache_bytes: usize,

    /// Heartbeat interval of idle Subscribe streams.
    #[arg(long, env = "AGENT_HARNESS_HEARTBEAT", default_value = duration_default!(log::DEFAULT_HEARTBEAT), value_parser = parse_duration)]
    pub heartbeat: Duration,

    /// Largest request message accepted, in bytes (larger: RESOURCE_EXHAUSTED).
    #[arg(long, env = "AGENT_HARNESS_MAX_REQUEST_BYTES", default_value_t = body_limit::DEFAULT_MAX_REQUEST_BYTES)]
    pub max_request_bytes: usize,

    /// Longest CLI stdout line accepted, in bytes. A longer line is not
    /// buffered: the run gets `run_error{kind: "line_too_large"}` with its
    /// length and goes on.
    #[arg(long, env = "AGENT_HARNESS_MAX_LINE_BYTES", default_value_t = supervise::DEFAULT_MAX_LINE_BYTES)]
    pub max_line_bytes: usize,

    /// Live typing: run the CLI with `--include-partial-messages` and stream
    /// the message being written to subscribers that set `include_deltas`.
    /// `off` leaves the CLI's output as it was (deltas never come).
    #[arg(long, env = "AGENT_HARNESS_DELTAS", value_enum, default_value = "on")]
    pub deltas: Toggle,

    /// Live typing: each stream sends deltas at most this often, what was
    /// typed meanwhile coalesced into one delta per block (a stream never
    /// wakes per fragment). 0 = every change as it comes. Before an event a
    /// stream always sends what precedes it first, whatever the interval.
    #[arg(long, env = "AGENT_HARNESS_DELTA_INTERVAL", default_value = duration_default!(log::DEFAULT_DELTA_INTERVAL), value_parser = parse_duration)]
    pub delta_interval: Duration,

    /// Most bytes of partial text (live typing) held per session; past it a
    /// block stops growing until its `content` event lands. At most 4177920
    /// (one block's snapshot must fit in a 4 MiB message).
    #[arg(long, env = "AGENT_HARNESS_MAX_PARTIAL_BYTES", default_value_t = partial::DEFAULT_MAX_PARTIAL_BYTES, value_parser = parse_partial_bytes)]
    pub max_partial_bytes: usize,

    /// Largest event streamed whole, in bytes of its protobuf encoding. A
    /// larger one (a long answer, a Read of a big file) is stored whole but
    /// streamed cut down and marked `truncated`; ReadFullEvent returns the
    /// whole. At most 4177920 (4 MiB less room for the message around it),
    /// at least 16384.
    #[arg(long, env = "AGENT_HARNESS_MAX_EVENT_BYTES", default_value_t = log::cut::DEFAULT_MAX_EVENT_BYTES)]
    pub max_event_bytes: usize,

    /// File holding the bearer token every RPC must carry
    /// (`authorization: Bearer TOKEN`). Required for a non-loopback --listen.
    #[arg(long, env = "AGENT_HARNESS_AUTH_TOKEN_FILE")]
    pub auth_token_file: Option<PathBuf>,

    /// File holding the key (64 hex digits, mode 0600) that encrypts the
    /// env values of client runs (`StartConfig.env`) in the store, so a
    /// respawn has them without the store holding them in clear. Default:
    /// `<data-dir>/secrets.key`, written on the first start; a named file
    /// must exist (`agent-harness token --out FILE` writes one).
    #[arg(long, env = "AGENT_HARNESS_SECRETS_KEY_FILE")]
    pub secrets_key_file: Option<PathBuf>,

    /// A browser origin allowed to call the API (repeatable; env:
    /// comma-separated), e.g. `https://ui.example:8443`. Default: loopback
    /// origins only (http/https, localhost, 127.0.0.1, [::1], any port).
    /// `*` allows every origin and requires --auth-token-file.
    #[arg(
        long = "allowed-origin",
        env = "AGENT_HARNESS_ALLOWED_ORIGINS",
        value_delimiter = ','
    )]
    pub allowed_origins: Vec<String>,

    /// A Host / :authority name (or address) accepted besides the loopback
    /// names and the listen address (repeatable; env: comma-separated).
    /// Requires --auth-token-file; `*` accepts any host.
    #[arg(
        long = "allowed-host",
        env = "AGENT_HARNESS_ALLOWED_HOSTS",
        value_delimiter = ','
    )]
    pub allowed_hosts: Vec<String>,

    /// A CLI flag a client may pass in `StartConfig.args`, besides the
    /// default set (repeatable; env: comma-separated), e.g.
    /// `--allow-arg=--max-budget-usd`; its value passes through. Flags that
    /// widen permissions, redirect the API or that the server owns are a
    /// start-up error here.
    #[arg(
        long = "allow-arg",
        env = "AGENT_HARNESS_ALLOW_ARGS",
        value_delimiter = ',',
        allow_hyphen_values = true
    )]
    pub allow_args: Vec<String>,

    /// An environment variable a client may set in `StartConfig.env`
    /// (repeatable; env: comma-separated). None by default. Variables that
    /// redirect the API or inject code are a start-up error here.
    #[arg(
        long = "allow-env",
        env = "AGENT_HARNESS_ALLOW_ENV",
        value_delimiter = ','
    )]
    pub allow_env: Vec<String>,

    /// A directory a session's `config.cwd` must lie under (symlinks
    /// resolved; repeatable; env: comma-separated). Default: any directory.
    #[arg(
        long = "allowed-cwd",
        env = "AGENT_HARNESS_ALLOWED_CWDS",
        value_delimiter = ','
    )]
    pub allowed_cwds: Vec<PathBuf>,

    /// A permission mode a client may choose (`StartConfig.permission_mode`,
    /// SetPermissionMode) besides default, plan and dontAsk: acceptEdits or
    /// auto (repeatable; env: comma-separated). bypassPermissions only with
    /// `--permissions skip`, which allows every mode.
    #[arg(
        long = "allow-permission-mode",
        env = "AGENT_HARNESS_ALLOW_PERMISSION_MODES",
        value_delimiter = ','
    )]
    pub allow_permission_modes: Vec<String>,

    /// A slash command a client's message may be, besides /compact and
    /// /context (repeatable; env: comma-separated), e.g.
    /// `--allow-slash-command usage`. Any other message the CLI would run as
    /// a command (`/config ...`) is refused with INVALID_ARGUMENT.
    #[arg(
        long = "allow-slash-command",
        env = "AGENT_HARNESS_ALLOW_SLASH_COMMANDS",
        value_delimiter = ','
    )]
    pub allow_slash_commands: Vec<String>,

    /// The CLI's configuration directory (`CLAUDE_CONFIG_DIR` of every CLI
    /// the server runs): its settings, login and transcripts. Default:
    /// `<data-dir>/claude`, created 0700 and seeded with the operator's
    /// login (~/.claude/.credentials.json and the account keys of
    /// ~/.claude.json), never their settings, hooks or MCP servers.
    #[arg(long, env = "AGENT_HARNESS_CLAUDE_CONFIG_DIR")]
    pub claude_config_dir: Option<PathBuf>,

    /// Let the CLI read a session folder's project settings
    /// (`.claude/settings.json`, `.claude/settings.local.json`: hooks,
    /// permissions): `--setting-sources user,project,local`. Default: user
    /// settings only (those in the configuration directory).
    #[arg(long, env = "AGENT_HARNESS_ALLOW_PROJECT_SETTINGS")]
    pub allow_project_settings: bool,

    /// An MCP server configuration file (JSON, as `claude --mcp-config`
    /// takes it) for every CLI (repeatable; env: comma-separated). The CLI
    /// always runs with `--strict-mcp-config`: MCP servers come only from
    /// these files, never from a session folder's `.mcp.json`.
    #[arg(
        long = "mcp-config",
        env = "AGENT_HARNESS_MCP_CONFIG",
        value_delimiter = ','
    )]
    pub mcp_config: Vec<PathBuf>,

    /// PEM certificate chain: serve gRPC and grpc-web over TLS (with --tls-key).
    #[arg(long, env = "AGENT_HARNESS_TLS_CERT", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,

    /// PEM private key of --tls-cert.
    #[arg(long, env = "AGENT_HARNESS_TLS_KEY", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,

    /// Most CLI processes alive at once; a Start or a respawning Send beyond
    /// it gets RESOURCE_EXHAUSTED and appends nothing.
    #[arg(long, env = "AGENT_HARNESS_MAX_LIVE_RUNS", default_value_t = manager::DEFAULT_MAX_LIVE_RUNS)]
    pub max_live_runs: usize,

    /// Most streams (Subscribe, ReadFullEvent) open at once; one more gets
    /// RESOURCE_EXHAUSTED.
    #[arg(long, env = "AGENT_HARNESS_MAX_STREAMS", default_value_t = rpc::DEFAULT_MAX_STREAMS)]
    pub max_streams: usize,

    /// Most sessions one client (peer IP address; an IPv6 peer by its /64)
    /// may create per minute: a Start that would create one beyond it gets
    /// RESOURCE_EXHAUSTED with the seconds to wait (`retry-after`) and
    /// appends nothing. Starts of existing sessions do not count. 0 =
    /// unlimited.
    #[arg(
        long,
        env = "AGENT_HARNESS_MAX_SESSIONS_PER_MINUTE",
        default_value_t = start_limit::DEFAULT_MAX_SESSIONS_PER_MINUTE
    )]
    pub max_sessions_per_minute: u32,

    /// Delete sessions with no live run whose last event is older than this
    /// many days (checked every minute). 0 = keep sessions however old.
    #[arg(long, env = "AGENT_HARNESS_RETENTION_DAYS", default_value_t = 0)]
    pub retention_days: u32,

    /// Most sessions stored: a Start that creates one more first deletes the
    /// least recently active sessions with no live run (down to nine tenths
    /// of the cap); RESOURCE_EXHAUSTED when none can go. 0 = no cap.
    #[arg(long, env = "AGENT_HARNESS_MAX_SESSIONS", default_value_t = 0)]
    pub max_sessions: usize,

    /// Let a Start resume (`config.resume`) a CLI conversation that no
    /// session of this server has recorded (one made by a CLI outside it).
    /// A conversation another session of this server has stays refused.
    #[arg(long, env = "AGENT_HARNESS_ALLOW_RESUME_IMPORT")]
    pub allow_resume_import: bool,
    /// Most connections open at once (TLS handshakes included); one more
    /// is closed at once and counted in the metrics.
    #[arg(long, env = "AGENT_HARNESS_MAX_CONNECTIONS", default_value_t = connections::DEFAULT_MAX_CONNECTIONS)]
    pub max_connections: usize,

    /// How long the receipt of a call carrying an `idempotency_key` is kept
    /// (on disk, across restarts): a repeat within it returns the first
    /// response and does nothing. At least 10m.
    #[arg(long, env = "AGENT_HARNESS_IDEMPOTENCY_TTL", default_value = duration_default!(manager::receipts::DEFAULT_IDEMPOTENCY_TTL), value_parser = parse_idempotency_ttl)]
    pub idempotency_ttl: Duration,

    /// Do not serve Prometheus metrics at `GET /metrics` (served by
    /// default, behind the same origin, Host and token rules as the RPCs).
    #[arg(long, env = "AGENT_HARNESS_NO_METRICS")]
    pub no_metrics: bool,

    /// Do not serve the web console at `/` (served by default, behind the
    /// same origin and Host rules as the RPCs; every call it makes needs
    /// the token like any other). With it, every plain GET is 404.
    #[arg(long, env = "AGENT_HARNESS_NO_UI")]
    pub no_ui: bool,

    /// Log filter (tracing EnvFilter syntax, e.g. `info,agent_harness_server=debug`).
    #[arg(long, env = "AGENT_HARNESS_LOG", default_value = "info")]
    pub log: String,
}

impl ServeConfig {
    /// The checks across flags, all in one place, each error naming the
    /// flags: `--tls-cert` with `--tls-key`, `--max-event-bytes` in range,
    /// `--max-connections` above 0, and a non-loopback `--listen` only
    /// with `--auth-token-file`. (The origin and host rules that depend on
    /// the token are the access policy's own, checked where it is built.)
    pub fn check(&self) -> Result<(), Error> {
        if self.tls_cert.is_some() != self.tls_key.is_some() {
            return Err(Error::Config("--tls-cert and --tls-key go together".into()));
        }
        check_max_event_bytes(self.max_event_bytes)?;
        if self.max_connections == 0 {
            return Err(Error::Config(
                "--max-connections 0 would refuse every connection".into(),
            ));
        }
        crate::auth::check_bind(&self.listen, self.auth_token_file.is_some())
    }
}

/// `--max-event-bytes` must leave room for the message around one event
/// under gRPC's default 4 MiB receive limit, and room for an event's ids.
fn check_max_event_bytes(bytes: usize) -> Result<(), Error> {
    use log::cut::{MAX_EVENT_BYTES_CEILING, MAX_MESSAGE_BYTES, MIN_EVENT_BYTES};
    if (MIN_EVENT_BYTES..=MAX_EVENT_BYTES_CEILING).contains(&bytes) {
        return Ok(());
    }
    Err(Error::Config(format!(
        "--max-event-bytes {bytes} is out of range: it must be between {MIN_EVENT_BYTES} and \
         {MAX_EVENT_BYTES_CEILING}, so that every message stays under {MAX_MESSAGE_BYTES} bytes \
         (gRPC's default receive limit); larger events are streamed cut down and ReadFullEvent \
         returns them whole"
    )))
}

/// A `--store-url`: shown (`Debug`, `Display`) with its password left
/// out, so printing a config never leaks it.
#[derive(Clone, PartialEq, Eq)]
pub struct StoreUrl(String);

impl StoreUrl {
    /// The URL as given, password included: only for connecting.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl FromStr for StoreUrl {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<Self, Self::Err> {
        Ok(Self(s.to_owned()))
    }
}

impl std::fmt::Display for StoreUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&store::redact_store_url(&self.0))
    }
}

impl std::fmt::Debug for StoreUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "StoreUrl({self})")
    }
}

impl Default for ServeConfig {
    fn default() -> Self {
        Self {
            listen: "127.0.0.1:50051".parse().expect("valid default address"),
            data_dir: PathBuf::from("./data"),
            store_url: None,
            claude_bin: None,
            adapter: AdapterKind::Interactive,
            cassette_timescale: 1.0,
            permissions: PermissionMode::Relay,
            idle_timeout: manager::DEFAULT_IDLE_TIMEOUT,
            permission_timeout: manager::DEFAULT_PERMISSION_TIMEOUT,
            stop_grace: manager::DEFAULT_STOP_GRACE,
            kill_grace: manager::DEFAULT_KILL_GRACE,
            max_replay: log::DEFAULT_MAX_REPLAY,
            window: log::DEFAULT_WINDOW,
            window_bytes: log::DEFAULT_WINDOW_BYTES,
            cache_bytes: log::DEFAULT_WINDOW_CACHE_BYTES,
            cache_sessions: log::DEFAULT_CACHE_SESSIONS,
            store_cache_bytes: store::DEFAULT_PAGE_CACHE_BYTES,
            heartbeat: log::DEFAULT_HEARTBEAT,
            max_request_bytes: body_limit::DEFAULT_MAX_REQUEST_BYTES,
            max_line_bytes: supervise::DEFAULT_MAX_LINE_BYTES,
            deltas: Toggle::On,
            delta_interval: log::DEFAULT_DELTA_INTERVAL,
            max_partial_bytes: partial::DEFAULT_MAX_PARTIAL_BYTES,
            max_event_bytes: log::cut::DEFAULT_MAX_EVENT_BYTES,
            auth_token_file: None,
            secrets_key_file: None,
            allowed_origins: Vec::new(),
            allowed_hosts: Vec::new(),
            allow_args: Vec::new(),
            allow_env: Vec::new(),
            allowed_cwds: Vec::new(),
            allow_permission_modes: Vec::new(),
            allow_slash_commands: Vec::new(),
            claude_config_dir: None,
            allow_project_settings: false,
            mcp_config: Vec::new(),
            tls_cert: None,
            tls_key: None,
            max_live_runs: manager::DEFAULT_MAX_LIVE_RUNS,
            max_streams: rpc::DEFAULT_MAX_STREAMS,
            max_sessions_per_minute: start_limit::DEFAULT_MAX_SESSIONS_PER_MINUTE,
            retention_days: 0,
            max_sessions: 0,
            allow_resume_import: false,
            max_connections: connections::DEFAULT_MAX_CONNECTIONS,
            idempotency_ttl: manager::receipts::DEFAULT_IDEMPOTENCY_TTL,
            no_metrics: false,
            no_ui: false,
            log: "info".into(),
        }
    }
}

/// Configuration of `agent-harness token`.
#[derive(Debug, Clone, Args)]
pub struct TokenConfig {
    /// Where to write the token (created or replaced, mode 0600).
    #[arg(long, short, default_value = "agent-harness.token")]
    pub out: PathBuf,
}

/// Configuration of `agent-harness record`.
#[derive(Debug, Clone, Args)]
pub struct RecordConfig {
    /// Output cassette (JSONL).
    #[arg(long, short)]
    pub out: PathBuf,
    /// Path of the claude binary (default: as for serve).
    #[arg(long, env = "AGENT_HARNESS_CLAUDE_BIN")]
    pub claude_bin: Option<PathBuf>,
    /// Working directory of the CLI.
    #[arg(long)]
    pub cwd: Option<PathBuf>,
    /// The prompt; further prompts are sent as follow-up turns.
    #[arg(required = true)]
    pub prompts: Vec<String>,
    /// Extra CLI arguments (after `--`).
    #[arg(last = true)]
    pub args: Vec<String>,
}

/// `--idempotency-ttl`: a duration of at least
/// [`MIN_IDEMPOTENCY_TTL`](crate::manager::receipts::MIN_IDEMPOTENCY_TTL)
/// (retries are safe for at least 10 minutes: docs/api.md, "Retry safety").
pub fn parse_idempotency_ttl(s: &str) -> Result<Duration, String> {
    let ttl = parse_duration(s)?;
    let min = manager::receipts::MIN_IDEMPOTENCY_TTL;
    if ttl < min {
        return Err(format!(
            "{s:?} is shorter than {}m: retries must stay safe for at least that long",
            min.as_secs() / 60
        ));
    }
    Ok(ttl)
}

/// A feature switch (`on` / `off`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Toggle {
    /// Enabled.
    On,
    /// Disabled.
    Off,
}

/// `--max-partial-bytes`: 0 ..= 4177920.
fn parse_partial_bytes(s: &str) -> Result<usize, String> {
    let n: usize = s
        .parse()
        .map_err(|e| format!("{s:?} is not a byte count: {e}"))?;
    if n > log::cut::MAX_EVENT_BYTES_CEILING {
        return Err(format!(
            "{n} is over {} (a block's snapshot must fit in one 4 MiB message)",
            log::cut::MAX_EVENT_BYTES_CEILING
        ));
    }
    Ok(n)
}

/// Writes `d` the way [`parse_duration`] reads it, in the largest unit that
/// holds it whole: 1800 s is "30m", 50 ms is "50ms".
pub fn format_duration(d: Duration) -> String {
    let ms = d.as_millis();
    if ms % 1000 != 0 {
        return format!("{ms}ms");
    }
    let secs = ms / 1000;
    match secs {
        0 => "0s".into(),
        s if s % 3600 == 0 => format!("{}h", s / 3600),
        s if s % 60 == 0 => format!("{}m", s / 60),
        s => format!("{s}s"),
    }
}

/// Parses "1500ms", "30s", "5m", "2h" or a bare number of seconds.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let value: f64 = num
        .parse()
        .map_err(|_| format!("invalid duration {s:?}: expected e.g. 30s, 5m, 1500ms"))?;
    let secs = match unit.trim() {
        "" | "s" | "sec" | "secs" => value,
        "ms" => value / 1000.0,
        "m" | "min" | "mins" => value * 60.0,
        "h" | "hr" | "hours" => value * 3600.0,
        other => {
            return Err(format!(
                "invalid duration unit {other:?} in {s:?}: use ms, s, m or h"
            ));
        }
    };
    if !secs.is_finite() || secs < 0.0 {
        return Err(format!("invalid duration {s:?}"));
    }
    Ok(Duration::from_secs_f64(secs))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("30s").unwrap(), Duration::from_secs(30));
        assert_eq!(parse_duration("5m").unwrap(), Duration::from_secs(300));
        assert_eq!(
            parse_duration("1500ms").unwrap(),
            Duration::from_millis(1500)
        );
        assert_eq!(parse_duration("0").unwrap(), Duration::ZERO);
        assert_eq!(parse_duration("2h").unwrap(), Duration::from_secs(7200));
        assert!(parse_duration("5 parsecs").is_err());
        assert!(parse_duration("").is_err());
    }

    #[test]
    fn adapters() {
        assert_eq!("cli".parse::<AdapterKind>().unwrap(), AdapterKind::Cli);
        assert_eq!(
            "cassette:x.jsonl".parse::<AdapterKind>().unwrap(),
            AdapterKind::Cassette("x.jsonl".into())
        );
        assert!("cassette:".parse::<AdapterKind>().is_err());
    }

    #[test]
    fn cli_parses_defaults() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
        let cli = Cli::try_parse_from(["agent-harness", "serve"]).unwrap();
        let Command::Serve(cfg) = cli.command else {
            panic!("expected serve")
        };
        assert_eq!(cfg.listen.to_string(), "127.0.0.1:50051");
        assert_eq!(cfg.stop_grace, Duration::from_secs(5));
        assert_eq!(cfg.idle_timeout, Duration::from_secs(1800));
        assert_eq!(cfg.max_line_bytes, 8 * 1024 * 1024);
        assert_eq!(cfg.max_line_bytes, ServeConfig::default().max_line_bytes);
        assert_eq!(cfg.idempotency_ttl, Duration::from_secs(15 * 60));
        assert_eq!(cfg.idempotency_ttl, ServeConfig::default().idempotency_ttl);
    }

    #[test]
    fn serve_without_flags_is_the_default_config() {
        let Command::Serve(cfg) = Cli::try_parse_from(["agent-harness", "serve"])
            .unwrap()
            .command
        else {
            panic!("expected serve")
        };
        assert_eq!(*cfg, ServeConfig::default());
        cfg.check().unwrap();
    }

    #[test]
    fn the_store_url_is_shown_without_its_password() {
        let url = "postgres://app:s3cret@db.example:5432/log?sslmode=require";
        let Command::Serve(cfg) =
            Cli::try_parse_from(["agent-harness", "serve", "--store-url", url])
                .unwrap()
                .command
        else {
            panic!("expected serve")
        };
        let store_url = cfg.store_url.as_ref().expect("set");
        assert_eq!(store_url.expose(), url);
        for shown in [
            store_url.to_string(),
            format!("{store_url:?}"),
            format!("{cfg:?}"),
        ] {
            assert!(!shown.contains("s3cret"), "{shown}");
        }
        assert!(
            store_url
                .to_string()
                .contains("app:***@db.example:5432/log")
        );
    }

    #[test]
    fn durations_are_written_as_they_are_read() {
        for (d, text) in [
            (Duration::from_secs(1800), "30m"),
            (Duration::from_secs(300), "5m"),
            (Duration::from_secs(15), "15s"),
            (Duration::from_millis(50), "50ms"),
            (Duration::from_secs(7200), "2h"),
            (Duration::ZERO, "0s"),
        ] {
            assert_eq!(format_duration(d), text);
            assert_eq!(parse_duration(text).unwrap(), d);
        }
    }

    #[test]
    fn flags_that_go_together_are_checked_together() {
        let check = |args: &[&str]| {
            let mut argv = vec!["agent-harness", "serve"];
            argv.extend_from_slice(args);
            let Command::Serve(cfg) = Cli::try_parse_from(argv).unwrap().command else {
                panic!("expected serve")
            };
            cfg.check().map_err(|e| e.to_string())
        };
        let err = check(&["--max-connections", "0"]).unwrap_err();
        assert!(err.contains("--max-connections"), "{err}");
        let err = check(&["--listen", "0.0.0.0:50051"]).unwrap_err();
        assert!(err.contains("--auth-token-file"), "{err}");
        check(&["--listen", "0.0.0.0:50051", "--auth-token-file", "t"]).unwrap();
        let lone_cert = ServeConfig {
            tls_cert: Some("c.pem".into()),
            ..ServeConfig::default()
        };
        let err = lone_cert.check().unwrap_err().to_string();
        assert!(err.contains("--tls-key"), "{err}");
    }

    #[test]
    fn idempotency_ttl_is_at_least_ten_minutes_and_reaches_the_manager() {
        let parse =
            |v: &str| Cli::try_parse_from(["agent-harness", "serve", "--idempotency-ttl", v]);
        let Command::Serve(cfg) = parse("1h").unwrap().command else {
            panic!("expected serve")
        };
        let ttl = crate::server::manager_options(&cfg).idempotency.ttl;
        assert_eq!(ttl, Duration::from_secs(3600));
        assert!(parse("10m").is_ok());
        let err = parse("9m").unwrap_err().to_string();
        assert!(err.contains("at least"), "{err}");
    }

    #[test]
    fn max_event_bytes_is_checked_at_start_up() {
        use crate::log::cut::{MAX_EVENT_BYTES_CEILING, MIN_EVENT_BYTES};
        let parse = |v: &str| {
            let cli = Cli::try_parse_from(["agent-harness", "serve", "--max-event-bytes", v])
                .expect("parses");
            let Command::Serve(cfg) = cli.command else {
                panic!("expected serve")
            };
            crate::server::serve_options(&cfg).map(|_| cfg.max_event_bytes)
        };
        assert_eq!(ServeConfig::default().max_event_bytes, 1024 * 1024);
        assert_eq!(parse("65536").unwrap(), 65536);
        assert_eq!(
            parse(&MAX_EVENT_BYTES_CEILING.to_string()).unwrap(),
            MAX_EVENT_BYTES_CEILING
        );
        for bad in [
            MAX_EVENT_BYTES_CEILING + 1,
            8 * 1024 * 1024,
            MIN_EVENT_BYTES - 1,
        ] {
            let err = parse(&bad.to_string()).unwrap_err().to_string();
            assert!(err.contains("--max-event-bytes"), "{err}");
        }
    }

    #[test]
    fn deltas_flags_reach_the_adapter_and_the_manager() {
        use crate::adapter::claude::{ClaudeInteractiveAdapter, ClaudeOptions};
        use crate::adapter::{SpawnConfig, claude::ClaudeCliAdapter};
        let serve = |args: &[&str]| {
            let mut argv = vec!["agent-harness", "serve"];
            argv.extend_from_slice(args);
            match Cli::try_parse_from(argv).map(|c| c.command) {
                Ok(Command::Serve(cfg)) => Ok(cfg),
                Ok(_) => panic!("expected serve"),
                Err(e) => Err(e),
            }
        };
        let on = serve(&[]).unwrap();
        assert_eq!(on.deltas, Toggle::On, "live typing is on by default");
        assert_eq!(on.max_partial_bytes, 1024 * 1024);
        let off = serve(&["--deltas", "off", "--max-partial-bytes", "65536"]).unwrap();
        assert_eq!(off.deltas, Toggle::Off);
        assert_eq!(
            crate::server::manager_options(&off).max_partial_bytes,
            65536
        );
        assert!(serve(&["--deltas", "maybe"]).is_err());
        assert!(
            serve(&["--max-partial-bytes", "5000000"]).is_err(),
            "a snapshot must fit in one message"
        );
        let config = SpawnConfig {
            session_id: "s".into(),
            run_id: "r".into(),
            config: agent_harness_client::pb::StartConfig {
                prompt: "hi".into(),
                ..Default::default()
            },
            ..Default::default()
        };
        for partial_messages in [true, false] {
            let options = ClaudeOptions {
                partial_messages,
                ..ClaudeOptions::default()
            };
            for args in [
                ClaudeInteractiveAdapter::new(options.clone()).args(&config),
                ClaudeCliAdapter::new(options).args(&config),
            ] {
                assert_eq!(
                    args.iter().any(|a| a == "--include-partial-messages"),
                    partial_messages,
                    "{args:?}"
                );
            }
        }
    }

    #[test]
    fn the_server_owns_the_cli_configuration() {
        use crate::adapter::SpawnConfig;
        use crate::adapter::claude::ClaudeInteractiveAdapter;
        use crate::launch::LaunchPolicy;
        let tmp = tempfile::tempdir().unwrap();
        let data = tmp.path().join("data");
        let mcp = tmp.path().join("mcp.json");
        std::fs::write(&mcp, r#"{"mcpServers":{}}"#).unwrap();
        let serve = |extra: &[&str]| {
            let mut argv = vec![
                "agent-harness",
                "serve",
                "--data-dir",
                data.to_str().unwrap(),
            ];
            argv.extend_from_slice(extra);
            let Command::Serve(cfg) = Cli::try_parse_from(argv).unwrap().command else {
                panic!("expected serve")
            };
            cfg
        };
        let argv = |cfg: &ServeConfig| -> Vec<String> {
            let options = crate::server::claude_options(cfg).unwrap();
            ClaudeInteractiveAdapter::new(options)
                .args(&SpawnConfig::default())
                .iter()
                .map(|a| a.to_string_lossy().into_owned())
                .collect()
        };
        let plain = serve(&[]);
        let options = crate::server::claude_options(&plain).unwrap();
        let dir = options.config_dir.clone().unwrap();
        assert!(dir.is_absolute() && dir.ends_with("data/claude"), "{dir:?}");
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700);
        let args = argv(&plain);
        assert!(
            args.iter().any(|a| a == "--setting-sources=user"),
            "{args:?}"
        );
        assert!(args.iter().any(|a| a == "--strict-mcp-config"), "{args:?}");
        assert!(
            !args.iter().any(|a| a.starts_with("--mcp-config")),
            "{args:?}"
        );

        let own = tmp.path().join("own");
        let wide = serve(&[
            "--allow-project-settings",
            "--mcp-config",
            mcp.to_str().unwrap(),
            "--claude-config-dir",
            own.to_str().unwrap(),
        ]);
        assert_eq!(
            crate::server::claude_options(&wide).unwrap().config_dir,
            Some(own)
        );
        let args = argv(&wide);
        assert!(
            args.iter()
                .any(|a| a == "--setting-sources=user,project,local"),
            "{args:?}"
        );
        let want = format!("--mcp-config={}", mcp.display());
        assert!(args.contains(&want), "{args:?}");
        let missing = serve(&["--mcp-config", "/nonexistent/mcp.json"]);
        let err = crate::server::claude_options(&missing)
            .unwrap_err()
            .to_string();
        assert!(err.contains("--mcp-config"), "{err}");

        // A client can pass none of it.
        let policy = LaunchPolicy::default();
        for flag in ["--setting-sources", "--strict-mcp-config", "--mcp-config"] {
            assert!(policy.check_args(&[format!("{flag}=x")]).is_err(), "{flag}");
        }
        let env = [("CLAUDE_CONFIG_DIR".to_owned(), "/tmp".to_owned())].into();
        assert!(policy.check_env(&env).is_err());
    }

    #[test]
    fn max_line_bytes_flag_reaches_the_manager() {
        let cli =
            Cli::try_parse_from(["agent-harness", "serve", "--max-line-bytes", "4096"]).unwrap();
        let Command::Serve(cfg) = cli.command else {
            panic!("expected serve")
        };
        assert_eq!(cfg.max_line_bytes, 4096);
        assert_eq!(crate::server::manager_options(&cfg).max_line_bytes, 4096);
        assert!(
            Cli::try_parse_from(["agent-harness", "serve", "--max-line-bytes", "lots"]).is_err()
        );
    }
}
