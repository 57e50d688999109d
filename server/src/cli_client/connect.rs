//! Where the terminal client connects and how: the server URL, the bearer
//! token, TLS, and the output form every command shares (`--json`).
//!
//! The token never goes on the command line (other users can read a
//! process's arguments): it comes from a file only its owner may read
//! (`--token-file`, the same check `serve --auth-token-file` makes) or
//! from the environment (`AGENT_HARNESS_TOKEN`), like the other clients.

use std::path::{Path, PathBuf};
use std::time::Duration;

use agent_harness_client::pb::session_service_client::SessionServiceClient;
use agent_harness_client::session::{
    CallHeaders, DEFAULT_HEARTBEAT_INTERVAL, KEEPALIVE_TIMEOUT, SessionClient, SessionOptions,
};
use clap::Args;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint};

use super::exit::Failure;

/// The server `serve` listens on by default (its `--listen`), as a URL.
pub const DEFAULT_SERVER: &str = "http://127.0.0.1:50051";

/// The environment variable naming the server.
pub const SERVER_ENV: &str = "AGENT_HARNESS_SERVER";

/// The environment variable holding the bearer token itself.
pub const TOKEN_ENV: &str = "AGENT_HARNESS_TOKEN";

/// How long a connection attempt may take before the call fails
/// UNAVAILABLE (a server that drops packets would otherwise hang a script).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The flags every client command takes.
#[derive(Debug, Clone, PartialEq, Eq, Args)]
pub struct Connection {
    /// The server: `http://HOST:PORT`, or `https://HOST:PORT` when it
    /// serves TLS (`serve --tls-cert/--tls-key`).
    #[arg(long, env = SERVER_ENV, default_value = DEFAULT_SERVER)]
    pub server: String,

    /// File holding the bearer token of a server run with
    /// `--auth-token-file` (owner-only, as `agent-harness token` writes
    /// it). Without it the token is read from AGENT_HARNESS_TOKEN, if set.
    #[arg(long, env = "AGENT_HARNESS_TOKEN_FILE")]
    pub token_file: Option<PathBuf>,

    /// With an `https://` server: PEM certificate(s) of the CA that signed
    /// its certificate (a private CA). Default: the web PKI roots.
    #[arg(long, env = "AGENT_HARNESS_CA_FILE")]
    pub ca_file: Option<PathBuf>,

    /// Print one JSON object per line (the proto3 JSON of each response,
    /// session or event) instead of text, for scripts.
    #[arg(long)]
    pub json: bool,
}

/// The generated client with the call headers added.
pub type Rpc = SessionServiceClient<InterceptedService<Channel, CallHeaders>>;

impl Connection {
    /// The token to send, if any: the file's, else the environment's.
    pub fn token(&self) -> Result<Option<String>, Failure> {
        if let Some(path) = &self.token_file {
            return read_token(path).map(Some);
        }
        Ok(std::env::var(TOKEN_ENV)
            .ok()
            .map(|t| t.trim().to_owned())
            .filter(|t| !t.is_empty()))
    }

    /// A lazily connected channel to the server (TLS for `https://`).
    pub fn channel(&self) -> Result<Channel, Failure> {
        let url = self.server.as_str();
        let tls = match url.split_once("://").map(|(scheme, _)| scheme) {
            Some("https") => true,
            Some("http") => false,
            _ => {
                return Err(Failure::usage(format!(
                    "--server {url:?}: use http://HOST:PORT or https://HOST:PORT"
                )));
            }
        };
        let mut endpoint = Endpoint::from_shared(url.to_owned())
            .map_err(|e| Failure::usage(format!("--server {url:?}: {e}")))?
            .connect_timeout(CONNECT_TIMEOUT)
            .http2_keep_alive_interval(DEFAULT_HEARTBEAT_INTERVAL)
            .keep_alive_timeout(KEEPALIVE_TIMEOUT)
            .keep_alive_while_idle(true);
        if tls {
            let mut config = ClientTlsConfig::new().with_webpki_roots();
            if let Some(ca) = &self.ca_file {
                let pem = std::fs::read(ca).map_err(|e| {
                    Failure::usage(format!("cannot read --ca-file {}: {e}", ca.display()))
                })?;
                config = config.ca_certificate(Certificate::from_pem(pem));
            }
            endpoint = endpoint
                .tls_config(config)
                .map_err(|e| Failure::usage(format!("TLS for {url:?}: {e}")))?;
        } else if self.ca_file.is_some() {
            return Err(Failure::usage(
                "--ca-file applies to an https:// --server only",
            ));
        }
        Ok(endpoint.connect_lazy())
    }

    /// The generated client, naming `session` on each call when given.
    pub fn rpc(&self, session: Option<&str>) -> Result<Rpc, Failure> {
        let headers = CallHeaders::new(self.token()?.as_deref(), session)?;
        Ok(SessionServiceClient::with_interceptor(
            self.channel()?,
            headers,
        ))
    }

    /// The reconnecting session client for `session`; `live_typing` asks
    /// the stream for the deltas of the message being written.
    pub fn session(&self, session: &str, live_typing: bool) -> Result<SessionClient, Failure> {
        let mut options = SessionOptions::default().with_include_deltas(live_typing);
        if let Some(token) = self.token()? {
            options = options.with_auth_token(token);
        }
        Ok(SessionClient::with_channel(
            self.channel()?,
            session,
            options,
        )?)
    }
}

/// The token in `path`: refused when others may read the file, trimmed,
/// not empty.
fn read_token(path: &Path) -> Result<String, Failure> {
    crate::private_files::check_owner_only(path, "--token-file")
        .map_err(|e| Failure::usage(e.to_string()))?;
    let raw = std::fs::read_to_string(path)
        .map_err(|e| Failure::usage(format!("cannot read --token-file {}: {e}", path.display())))?;
    let token = raw.trim();
    if token.is_empty() {
        return Err(Failure::usage(format!(
            "--token-file {} is empty",
            path.display()
        )));
    }
    Ok(token.to_owned())
}
