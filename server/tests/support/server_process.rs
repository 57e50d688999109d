//! The real server binary as a child process: `agent-harness serve` (the
//! `CARGO_BIN_EXE_agent-harness` cargo built for this very test run, never
//! a stale `AGENT_HARNESS_BIN`) behind the scripted Messages API, killed
//! hard (`kill -9`) when a test says so, and the processes it started
//! found by a marker variable they all inherit.
//!
//! Used by the terminal client's suite (its commands run against it), the
//! crash loop (one node restarted again and again) and by the
//! killed-owner takeover (two nodes on one PostgreSQL database).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use agent_harness_fake_api::FakeApi;
use agent_harness_protocol::pb;
use agent_harness_protocol::pb::session_service_client::SessionServiceClient;
use tonic::transport::Channel;

use super::cli_grpc::WAIT;

/// The variable every process a spawned server starts inherits; its value
/// names one test (see [`marked`]).
pub const MARKER: &str = "AH_SERVER_PROCESS_MARKER";

/// The server binary under test.
pub fn server_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_agent-harness"))
}

/// A port nobody listens on now (a fresh one per start: a killed server's
/// connections may still hold the old one).
pub fn free_addr() -> SocketAddr {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
    l.local_addr().expect("local addr")
}

/// What differs between the servers a test starts.
pub struct Spawn<'a> {
    /// The CLI the server runs.
    pub claude_bin: &'a Path,
    /// The scripted Messages API the CLI talks to.
    pub api: &'a FakeApi,
    /// `--data-dir`: the store (without `store_url`) and the CLI's config.
    pub data: &'a Path,
    /// HOME of the server and its CLI.
    pub home: &'a Path,
    /// The server's working directory.
    pub work: &'a Path,
    /// Where the server's stdout and stderr go.
    pub log: PathBuf,
    /// The value of [`MARKER`] for every process this server starts.
    pub marker: &'a str,
    /// `--store-url` (PostgreSQL), else redb in `data`.
    pub store_url: Option<&'a str>,
    /// `--node-id` (with `store_url`).
    pub node_id: Option<&'a str>,
    /// `--node-lease` (with `store_url`), e.g. "2s".
    pub node_lease: Option<&'a str>,
    /// `AGENT_HARNESS_FAILPOINT`, armed.
    pub failpoint: Option<&'a str>,
}

/// One running `agent-harness serve`; killed when dropped.
pub struct ServerProcess {
    child: Child,
    addr: SocketAddr,
    log: PathBuf,
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `agent-harness serve` as `spec` says, on a fresh loopback port.
pub fn spawn(spec: &Spawn<'_>) -> ServerProcess {
    spawn_with(spec, &[])
}

/// [`spawn`] with more `serve` flags after the defaults (e.g.
/// `--auth-token-file`).
pub fn spawn_with(spec: &Spawn<'_>, extra: &[&str]) -> ServerProcess {
    let addr = free_addr();
    let out = std::fs::File::create(&spec.log).expect("server log");
    let mut cmd = Command::new(server_bin());
    cmd.args(["serve", "--listen", &addr.to_string(), "--data-dir"])
        .arg(spec.data)
        .arg("--claude-bin")
        .arg(spec.claude_bin)
        .args([
            "--idle-timeout",
            "0",
            "--stop-grace",
            "2s",
            "--kill-grace",
            "1s",
        ])
        .args(["--log", "info,agent_harness_server=debug"])
        .current_dir(spec.work)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", spec.home)
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .env(MARKER, spec.marker)
        .envs(spec.api.cli_env())
        .stdin(Stdio::null())
        .stdout(out.try_clone().expect("log"))
        .stderr(out);
    if let Some(fp) = spec.failpoint {
        cmd.env(agent_harness_server::log::FAILPOINT_ENV, fp);
    }
    if let Some(url) = spec.store_url {
        cmd.args(["--store-url", url]);
    }
    if let Some(id) = spec.node_id {
        cmd.args(["--node-id", id]);
    }
    if let Some(lease) = spec.node_lease {
        cmd.args(["--node-lease", lease]);
    }
    cmd.args(extra);
    let child = cmd.spawn().expect("spawn agent-harness serve");
    ServerProcess {
        child,
        addr,
        log: spec.log.clone(),
    }
}

/// Pids (other than `except` and this test) that carry `marker` and are not
/// zombies (dead, waiting for a reaper that PID 1 here never is): what a
/// killed server left behind.
pub fn marked(marker: &str, except: Option<u32>) -> Vec<(u32, String)> {
    let want = format!("{MARKER}={marker}");
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        if Some(pid) == except || pid == std::process::id() {
            continue;
        }
        let Ok(env) = std::fs::read(entry.path().join("environ")) else {
            continue;
        };
        if !env.split(|b| *b == 0).any(|v| v == want.as_bytes()) {
            continue;
        }
        let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
        let state = stat.rsplit_once(") ").map(|(_, r)| r.chars().next());
        if matches!(state, Some(Some('Z' | 'X')) | None) {
            continue; // dead, waiting for a reaper
        }
        let cmdline = std::fs::read(entry.path().join("cmdline"))
            .unwrap_or_default()
            .split(|b| *b == 0)
            .filter(|a| !a.is_empty())
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect::<Vec<_>>()
            .join(" ");
        out.push((pid, cmdline));
    }
    out
}

impl ServerProcess {
    /// A connected client once the server answers (recovery is done by
    /// then: it runs before the server listens).
    pub async fn connect(&mut self) -> SessionServiceClient<Channel> {
        let deadline = Instant::now() + WAIT;
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                panic!(
                    "the server exited at start-up ({status}):\n{}",
                    self.log_text()
                );
            }
            let url = format!("http://{}", self.addr);
            if let Ok(ch) = Channel::from_shared(url).unwrap().connect().await {
                let mut c = SessionServiceClient::new(ch);
                if c.list_sessions(pb::ListSessionsRequest::default())
                    .await
                    .is_ok()
                {
                    return c;
                }
            }
            assert!(
                Instant::now() < deadline,
                "the server did not answer within {WAIT:?}:\n{}",
                self.log_text()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The server's URL, as a client's `--server` takes it.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// SIGKILL, and reap it.
    pub fn kill9(mut self) {
        self.child.kill().expect("SIGKILL the server");
        self.child.wait().expect("reap the server");
    }

    /// Waits for the server to die by itself (an armed failpoint); false
    /// when it still runs after `within`.
    pub async fn exited_within(&mut self, within: Duration) -> bool {
        let deadline = Instant::now() + within;
        while Instant::now() < deadline {
            if self.child.try_wait().expect("try_wait").is_some() {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        false
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}
