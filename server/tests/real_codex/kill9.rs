//! The real server binary (`agent-harness serve --codex-bin`, a child
//! process) killed with SIGKILL while a Codex turn runs a shell command
//! (approved through the API): the restarted server closes the run with
//! one `run_end{SERVER_RESTART}`, and nothing the killed server started is
//! left: not Codex, not the command it was running.

use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use agent_harness_fake_api::FakeApi;
use agent_harness_fake_api::cli::codex_bin;
use agent_harness_protocol::pb;
use agent_harness_protocol::pb::event::Payload;
use agent_harness_protocol::pb::session_service_client::SessionServiceClient;
use tonic::transport::Channel;

use crate::support::cli_grpc::{Events, WAIT, assert_runs_end_once, eventually};
use crate::support::server_process::free_addr;

const SESSION: &str = "codex-kill9";
/// The command Codex runs when the server is killed: unique enough to find
/// in /proc.
const COMMAND: &str = "sleep 47.25";

struct Server {
    child: Child,
    addr: SocketAddr,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Server {
    fn spawn(home: &std::path::Path, data: &std::path::Path, work: &std::path::Path) -> Self {
        let addr = free_addr();
        let log =
            std::fs::File::create(data.join(format!("server-{}.log", addr.port()))).expect("log");
        let child = Command::new(env!("CARGO_BIN_EXE_agent-harness"))
            .args(["serve", "--listen", &addr.to_string(), "--data-dir"])
            .arg(data)
            .arg("--codex-bin")
            .arg(codex_bin())
            .arg("--codex-home")
            .arg(home)
            .args([
                "--idle-timeout",
                "0",
                "--stop-grace",
                "2s",
                "--kill-grace",
                "1s",
            ])
            .current_dir(work)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", home)
            .env("FAKE_API_KEY", "test")
            .env("RUST_LOG", "error")
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log"))
            .stderr(log)
            .spawn()
            .expect("spawn agent-harness serve");
        Self { child, addr }
    }

    async fn connect(&mut self) -> SessionServiceClient<Channel> {
        let deadline = Instant::now() + WAIT;
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                panic!("the server exited at start-up ({status})");
            }
            if let Ok(ch) = Channel::from_shared(format!("http://{}", self.addr))
                .unwrap()
                .connect()
                .await
            {
                let mut c = SessionServiceClient::new(ch);
                if c.list_sessions(pb::ListSessionsRequest::default())
                    .await
                    .is_ok()
                {
                    return c;
                }
            }
            assert!(Instant::now() < deadline, "the server did not answer");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// Live processes (not zombies) whose command line contains `needle`.
fn running(needle: &str) -> Vec<(u32, String)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        let cmdline = std::fs::read(entry.path().join("cmdline"))
            .unwrap_or_default()
            .split(|b| *b == 0)
            .filter(|a| !a.is_empty())
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect::<Vec<_>>()
            .join(" ");
        if !cmdline.contains(needle) {
            continue;
        }
        let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
        let state = stat.rsplit_once(") ").and_then(|(_, r)| r.chars().next());
        if matches!(state, Some('Z' | 'X') | None) {
            continue;
        }
        out.push((pid, cmdline));
    }
    out
}

/// The process's start time (clock ticks since boot, field 22 of
/// /proc/PID/stat): with the pid, it names one process, never one that
/// reused the pid.
fn start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = stat.rsplit_once(") ")?;
    rest.split(' ').nth(19)?.parse().ok()
}

fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| s.rsplit_once(") ").and_then(|(_, r)| r.chars().next()))
        .is_some_and(|state| !matches!(state, 'Z' | 'X'))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_of_the_server_mid_turn_leaves_one_server_restart_and_no_orphan() {
    let api = FakeApi::start().await;
    let home = tempfile::tempdir().expect("home");
    api.codex_home(home.path()).expect("config.toml");
    let data = tempfile::tempdir().expect("data");
    let work = tempfile::tempdir().expect("work");
    let mut server = Server::spawn(home.path(), data.path(), work.path());
    let mut client = server.connect().await;
    let ev = Events::open(client.clone(), SESSION).await;
    let started = client
        .start(pb::StartRequest {
            idempotency_key: String::new(),
            session_id: SESSION.into(),
            config: Some(pb::StartConfig {
                prompt: format!("BASH {COMMAND}"),
                cwd: work.path().display().to_string(),
                agent: "codex".into(),
                ..Default::default()
            }),
        })
        .await
        .expect("Start")
        .into_inner();
    let (_, asked) = ev.permission_requested_after(0).await;
    let (_, ready) = ev.run_ready_after(0).await;
    client
        .respond_permission(pb::RespondPermissionRequest {
            idempotency_key: String::new(),
            session_id: SESSION.into(),
            request_id: asked.request_id.clone(),
            allow: true,
            updated_input: None,
            message: String::new(),
        })
        .await
        .expect("allow");
    eventually("Codex running the command", || !running(COMMAND).is_empty()).await;
    assert!(alive(ready.pid), "Codex runs");
    let codex_started = start_time(ready.pid);
    drop(ev);

    server.child.kill().expect("SIGKILL the server");
    server.child.wait().expect("reap it");
    drop(server);

    let mut server = Server::spawn(home.path(), data.path(), work.path());
    let mut client = server.connect().await;
    eventually("no Codex and no command of the killed server", || {
        // Another test's process may reuse Codex's pid meanwhile.
        running(COMMAND).is_empty() && !(alive(ready.pid) && start_time(ready.pid) == codex_started)
    })
    .await;
    let history = client
        .history(pb::HistoryRequest {
            session_id: SESSION.into(),
            ..Default::default()
        })
        .await
        .expect("History")
        .into_inner();
    let events = history.events;
    assert_runs_end_once(&events, None);
    let ends: Vec<&pb::RunEnd> = events
        .iter()
        .filter(|e| e.run_id == started.run_id)
        .filter_map(|e| match &e.payload {
            Some(Payload::RunEnd(r)) => Some(r),
            _ => None,
        })
        .collect();
    assert_eq!(ends.len(), 1, "one run_end");
    assert_eq!(ends[0].reason(), pb::RunEndReason::ServerRestart);
    drop(server);
}
