//! Command line and environment configuration (clap). The doc comments on
//! these fields are the `--help` text.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

use crate::adapter::acp::AcpFlags;
use crate::adapter::claude::ClaudeFlags;
use crate::adapter::codex::CodexFlags;
pub use crate::duration::{format_duration, parse_duration};
use crate::error::Error;
use crate::{
    access, body_limit, connections, launch, log, manager, partial, rpc, start_limit, store,
    supervise,
};

/// What `--version` prints after the name: the crate's version and the
/// commit the binary was built from (`build.rs`: `unknown` outside git).
pub const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("AGENT_HARNESS_COMMIT"),
    ")"
);

/// agent-harness: runs Claude Code CLI sessions behind a gRPC API with a
/// durable event log.
#[derive(Debug, Parser)]
#[command(name = "agent-harness", version = VERSION, about, long_about = None)]
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
    /// Check that this machine can serve with these flags (the claude CLI,
    /// its version and login, the data dir, the port, the token file, the
    /// store), without serving: each line ok, warn or fail with what to
    /// fix; exit 1 on any fail. Takes every flag of `serve`.
    Doctor(Box<ServeConfig>),
    /// Print the shell completion script for SHELL (e.g.
    /// `agent-harness completions bash > /etc/bash_completion.d/agent-harness`).
    Completions(CompletionsConfig),
    /// Print the man page (roff) of agent-harness, or of one of its
    /// commands (e.g. `agent-harness man serve | man -l -`).
    Man(ManConfig),
    /// Write a session's log as JSON lines, one whole event a line in seq
    /// order, read from the store of a stopped server (redb) or from
    /// PostgreSQL.
    Export(crate::export::ExportArgs),
    /// The terminal client's commands (`ls`, `start`, `send`, `tail`, ...).
    #[command(flatten)]
    Client(crate::cli_client::ClientCommand),
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
/// A subsystem with flags of its own owns them, defaults and help text
/// included, as a clap `Args` struct flattened here (the log, the manager,
/// the launch and access policies, the claude adapters); the remaining
/// flags are the server's, each default the constant of the subsystem it
/// sizes. [`crate::server`] maps the fields into each subsystem's options,
/// so nothing below it reads this.
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

    /// This node's name among the nodes sharing one store (answers carry
    /// it): 1 to 128 of letters, digits, '.', '_', '-', ':'. Default: the
    /// host name and the listen port.
    #[arg(long, env = "AGENT_HARNESS_NODE_ID")]
    pub node_id: Option<String>,

    /// With `--store-url`: how long this node's lease in the shared store
    /// lasts (renewed every third of it, judged by the database's clock).
    /// A node that cannot renew in time stops its CLI processes and
    /// refuses writes until it has rejoined; another node may take its
    /// sessions over once the lease has run out. At least 500ms.
    #[arg(long, env = "AGENT_HARNESS_NODE_LEASE", default_value = crate::duration::duration_default!(crate::node::DEFAULT_NODE_LEASE), value_parser = parse_duration)]
    pub node_lease: Duration,

    /// With `--store-url`: the address other nodes and operators reach
    /// this node at, named to a client whose write reached a node that
    /// does not own the session. Default: the listen address.
    #[arg(long, env = "AGENT_HARNESS_ADVERTISE_ADDR")]
    pub advertise_addr: Option<String>,

    /// Process adapter: `interactive` (keep-alive stream-json process),
    /// `cli` (one `--print` process per turn) or `cassette:FILE` (replay a
    /// recording; no CLI needed).
    #[arg(long, env = "AGENT_HARNESS_ADAPTER", default_value = "interactive")]
    pub adapter: AdapterKind,

    /// With `--adapter cassette:FILE`: multiplies the recorded gaps between
    /// lines (1 = as recorded, 0 = as fast as possible, for load tests).
    #[arg(long, env = "AGENT_HARNESS_CASSETTE_TIMESCALE", default_value_t = 1.0)]
    pub cassette_timescale: f64,

    /// Size of the embedded store's page cache (redb), bytes: what it keeps
    /// of the file in memory.
    #[arg(long, env = "AGENT_HARNESS_STORE_CACHE_BYTES", default_value_t = store::DEFAULT_PAGE_CACHE_BYTES)]
    pub store_cache_bytes: usize,

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

    /// Most bytes of partial text (live typing) held per session; past it a
    /// block stops growing until its `content` event lands. At most 4177920
    /// (one block's snapshot must fit in a 4 MiB message).
    #[arg(long, env = "AGENT_HARNESS_MAX_PARTIAL_BYTES", default_value_t = partial::DEFAULT_MAX_PARTIAL_BYTES, value_parser = parse_partial_bytes)]
    pub max_partial_bytes: usize,

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

    /// PEM certificate chain: serve gRPC and grpc-web over TLS (with --tls-key).
    #[arg(long, env = "AGENT_HARNESS_TLS_CERT", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,

    /// PEM private key of --tls-cert.
    #[arg(long, env = "AGENT_HARNESS_TLS_KEY", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,

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
    /// Most connections open at once (TLS handshakes included); one more
    /// is closed at once and counted in the metrics.
    #[arg(long, env = "AGENT_HARNESS_MAX_CONNECTIONS", default_value_t = connections::DEFAULT_MAX_CONNECTIONS)]
    pub max_connections: usize,

    /// Do not serve Prometheus metrics at `GET /metrics` (served by
    /// default, behind the same origin, Host and token rules as the RPCs).
    #[arg(long, env = "AGENT_HARNESS_NO_METRICS")]
    pub no_metrics: bool,

    /// Do not serve the web console at `/` (served by default, behind the
    /// same origin and Host rules as the RPCs; every call it makes needs
    /// the token like any other). With it, every plain GET is 404.
    #[arg(long, env = "AGENT_HARNESS_NO_UI")]
    pub no_ui: bool,

    /// The shortest idle timeout of any proxy in front of this node
    /// (HAProxy `timeout server`/`client`, nginx `grpc_read_timeout`/
    /// `grpc_send_timeout`): a quiet Subscribe stream lives on heartbeats, so
    /// the server refuses to start unless --heartbeat is below it.
    #[arg(long, env = "AGENT_HARNESS_PROXY_IDLE_TIMEOUT", value_parser = parse_duration)]
    pub proxy_idle_timeout: Option<Duration>,

    /// The event log's memory and streaming knobs.
    #[command(flatten)]
    pub event_log: log::LogOptions,

    /// How the claude CLI is found, configured and asked for permissions.
    #[command(flatten)]
    pub claude: ClaudeFlags,

    /// Whether Codex sessions are enabled, and Codex's configuration.
    #[command(flatten)]
    pub codex: CodexFlags,

    /// The agents spoken to over the Agent Client Protocol.
    #[command(flatten)]
    pub acp: AcpFlags,

    /// Which browser origins and Host names may reach the API.
    #[command(flatten)]
    pub access: access::AccessOptions,

    /// The manager's timers and limits.
    #[command(flatten)]
    pub manager: manager::ManagerFlags,

    /// What clients may put into a CLI's argv, env, cwd and input.
    #[command(flatten)]
    pub launch: launch::LaunchOptions,

    /// Log filter (tracing EnvFilter syntax, e.g. `info,agent_harness_server=debug`).
    #[arg(long, env = "AGENT_HARNESS_LOG", default_value = "info")]
    pub log: String,

    /// How log lines are written to stderr: `text` (one readable line per
    /// event) or `json` (one JSON object per line, for a log collector).
    #[arg(long, env = "AGENT_HARNESS_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
}

/// How `serve` writes its log lines (`--log-format`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// One human-readable line per event: time, level, target, message,
    /// fields.
    #[default]
    Text,
    /// One JSON object per line: `timestamp`, `level`, `target`, `fields`
    /// (with `message`) and the `span`s the event happened in.
    Json,
}

impl ServeConfig {
    /// The checks across flags, all in one place, each error naming the
    /// flags: `--tls-cert` with `--tls-key`, `--max-event-bytes` in range,
    /// `--max-connections` above 0, and a non-loopback `--listen`,
    /// `--allowed-origin '*'` and any `--allowed-host` only with
    /// `--auth-token-file`.
    pub fn check(&self) -> Result<(), Error> {
        self.node()?;
        if self.node_lease < MIN_NODE_LEASE {
            return Err(Error::Config(format!(
                "--node-lease {}: at least {} (a third of it between renewals must \
                 leave the database time to answer)",
                format_duration(self.node_lease),
                format_duration(MIN_NODE_LEASE)
            )));
        }
        if self.tls_cert.is_some() != self.tls_key.is_some() {
            return Err(Error::Config("--tls-cert and --tls-key go together".into()));
        }
        check_max_event_bytes(self.event_log.max_event_bytes)?;
        if let Some(proxy) = self.proxy_idle_timeout
            && self.event_log.heartbeat >= proxy
        {
            return Err(Error::Config(format!(
                "--heartbeat {} must be below --proxy-idle-timeout {}: the proxy would cut every quiet Subscribe stream",
                format_duration(self.event_log.heartbeat),
                format_duration(proxy)
            )));
        }
        if self.max_connections == 0 {
            return Err(Error::Config(
                "--max-connections 0 would refuse every connection".into(),
            ));
        }
        let token = self.auth_token_file.is_some();
        crate::auth::check_bind(&self.listen, token)?;
        if !token && self.access.allowed_origins.iter().any(|o| o.trim() == "*") {
            return Err(Error::Config(
                "--allowed-origin '*' lets every web page call the API: it needs \
                 --auth-token-file (the token then is the only protection)"
                    .into(),
            ));
        }
        if !token && !self.access.allowed_hosts.is_empty() {
            return Err(Error::Config(
                "--allowed-host needs --auth-token-file: without a token only loopback \
                 names are accepted, so that a page rebinding its DNS name to this machine \
                 cannot call the API"
                    .into(),
            ));
        }
        Ok(())
    }
}

/// `--max-event-bytes` must leave room for the message around one event
/// under gRPC's default 4 MiB receive limit, and room for an event's ids.
impl ServeConfig {
    /// This node's id: `--node-id`, checked, or the default (see
    /// [`crate::node`]).
    pub fn node(&self) -> Result<crate::node::NodeId, Error> {
        crate::node::NodeId::resolve(self.node_id.as_deref(), self.listen).map_err(Error::Config)
    }
}

/// Shortest `--node-lease` accepted.
const MIN_NODE_LEASE: Duration = Duration::from_millis(500);

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
            node_id: None,
            node_lease: crate::node::DEFAULT_NODE_LEASE,
            advertise_addr: None,
            adapter: AdapterKind::Interactive,
            cassette_timescale: 1.0,
            store_cache_bytes: store::DEFAULT_PAGE_CACHE_BYTES,
            max_request_bytes: body_limit::DEFAULT_MAX_REQUEST_BYTES,
            max_line_bytes: supervise::DEFAULT_MAX_LINE_BYTES,
            deltas: Toggle::On,
            max_partial_bytes: partial::DEFAULT_MAX_PARTIAL_BYTES,
            auth_token_file: None,
            secrets_key_file: None,
            tls_cert: None,
            tls_key: None,
            max_streams: rpc::DEFAULT_MAX_STREAMS,
            max_sessions_per_minute: start_limit::DEFAULT_MAX_SESSIONS_PER_MINUTE,
            max_connections: connections::DEFAULT_MAX_CONNECTIONS,
            no_metrics: false,
            no_ui: false,
            proxy_idle_timeout: None,
            event_log: log::LogOptions::default(),
            claude: ClaudeFlags::default(),
            codex: CodexFlags::default(),
            acp: AcpFlags::default(),
            access: access::AccessOptions::default(),
            manager: manager::ManagerFlags::default(),
            launch: launch::LaunchOptions::default(),
            log: "info".into(),
            log_format: LogFormat::Text,
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

/// Configuration of `agent-harness completions`.
#[derive(Debug, Clone, Args)]
pub struct CompletionsConfig {
    /// The shell.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

/// Configuration of `agent-harness man`.
#[derive(Debug, Clone, Args)]
pub struct ManConfig {
    /// The command whose page to print (`serve`, `doctor`, `tail`, ...).
    /// Default: the page of agent-harness itself, listing the commands.
    pub command: Option<String>,
}

/// Configuration of `agent-harness record`.
#[derive(Debug, Clone, Args)]
pub struct RecordConfig {
    /// Output cassette (JSONL).
    #[arg(long, short)]
    pub out: PathBuf,
    /// The agent to record: claude (the claude CLI, interactive adapter)
    /// or codex (`codex app-server`, the Codex adapter).
    #[arg(long, default_value = "claude")]
    pub agent: String,
    /// Path of the claude binary (default: as for serve).
    #[arg(long, env = "AGENT_HARNESS_CLAUDE_BIN")]
    pub claude_bin: Option<PathBuf>,
    /// With `--agent codex`: the codex binary and its configuration, as
    /// for serve.
    #[command(flatten)]
    pub codex: crate::adapter::codex::CodexFlags,
    /// Working directory of the CLI.
    #[arg(long)]
    pub cwd: Option<PathBuf>,
    /// The prompt; further prompts are sent as follow-up turns.
    #[arg(required = true)]
    pub prompts: Vec<String>,
    /// Extra CLI arguments (after `--`; claude only).
    #[arg(last = true)]
    pub args: Vec<String>,
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

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
        // The terminal client finds a server run with no flags.
        assert_eq!(
            format!("http://{}", cfg.listen),
            crate::cli_client::connect::DEFAULT_SERVER
        );
        assert_eq!(cfg.manager.stop_grace, Duration::from_secs(5));
        assert_eq!(cfg.manager.idle_timeout, Duration::from_secs(1800));
        assert_eq!(cfg.manager.max_idle_runs, 4);
        assert_eq!(cfg.manager.options().max_idle_runs, 4);
        let cli = Cli::try_parse_from(["agent-harness", "serve", "--max-idle-runs", "0"]).unwrap();
        let Command::Serve(cfg) = cli.command else {
            panic!("expected serve")
        };
        assert_eq!(cfg.manager.options().max_idle_runs, 0);
        assert_eq!(cfg.max_line_bytes, 8 * 1024 * 1024);
        assert_eq!(cfg.max_line_bytes, ServeConfig::default().max_line_bytes);
        assert_eq!(cfg.manager.idempotency_ttl, Duration::from_secs(15 * 60));
        assert_eq!(
            cfg.manager.idempotency_ttl,
            ServeConfig::default().manager.idempotency_ttl
        );
    }

    #[test]
    fn client_commands_sit_beside_serve() {
        let cli =
            Cli::try_parse_from(["agent-harness", "tail", "s1", "--until-idle", "--json"]).unwrap();
        let Command::Client(crate::cli_client::ClientCommand::Tail(tail)) = cli.command else {
            panic!("expected tail")
        };
        assert_eq!(tail.session, "s1");
        assert!(tail.until_idle && tail.connection.json);
        assert!(Cli::try_parse_from(["agent-harness", "deny", "s1", "r1", "not now"]).is_ok());
        assert!(Cli::try_parse_from(["agent-harness", "approve", "s1"]).is_err());
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
        let err = check(&["--proxy-idle-timeout", "15s"]).unwrap_err();
        assert!(
            err.contains("--heartbeat 15s") && err.contains("--proxy-idle-timeout 15s"),
            "{err}"
        );
        check(&["--proxy-idle-timeout", "60s"]).unwrap();
        check(&["--proxy-idle-timeout", "3s", "--heartbeat", "1s"]).unwrap();
        let lone_cert = ServeConfig {
            tls_cert: Some("c.pem".into()),
            ..ServeConfig::default()
        };
        let err = lone_cert.check().unwrap_err().to_string();
        assert!(err.contains("--tls-key"), "{err}");
    }

    #[test]
    fn the_node_lease_is_ten_seconds_and_at_least_half_a_second() {
        let Command::Serve(cfg) = Cli::try_parse_from(["agent-harness", "serve"])
            .unwrap()
            .command
        else {
            panic!("expected serve")
        };
        assert_eq!(cfg.node_lease, Duration::from_secs(10));
        assert_eq!(cfg.advertise_addr, None);
        let short = ServeConfig {
            node_lease: Duration::from_millis(200),
            ..ServeConfig::default()
        };
        let err = short.check().unwrap_err().to_string();
        assert!(err.contains("--node-lease 200ms"), "{err}");
        ServeConfig {
            node_lease: Duration::from_millis(500),
            ..ServeConfig::default()
        }
        .check()
        .unwrap();
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
            crate::server::serve_options(&cfg).map(|_| cfg.event_log.max_event_bytes)
        };
        assert_eq!(
            ServeConfig::default().event_log.max_event_bytes,
            1024 * 1024
        );
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
            config: agent_harness_protocol::pb::StartConfig {
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
