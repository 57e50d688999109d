//! What idle sessions cost with and without the cap on idle processes
//! (`--max-idle-runs`), and what a follow-up pays for it: the server
//! binary over loopback gRPC, the real claude CLI (`CLAUDE_BIN`) talking to
//! the scripted fake Messages API in this process.
//!
//! `CLAUDE_BIN=... cargo bench -p agent-harness-server --bench idle_runs`
//!
//! For each setting (no cap: `--max-idle-runs` above the session count;
//! then the default, 4) it starts a fresh server, runs one turn in each of
//! `AGENT_HARNESS_BENCH_SESSIONS` (20) sessions, one after the other, waits
//! for the evictions to finish and prints the RSS of the server and of its
//! descendant processes (`VmRSS` of `/proc/<pid>/status`). With the cap it
//! then times follow-ups, Send → first `content` and → `turn_end`, to a
//! session whose process is warm and to one that was evicted (a respawn
//! with `--resume`), `AGENT_HARNESS_BENCH_ROUNDS` (5) of each, interleaved.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use agent_harness_fake_api::FakeApi;
use agent_harness_protocol::pb;
use agent_harness_protocol::pb::event::Payload;
use agent_harness_protocol::pb::session_service_client::SessionServiceClient;
use agent_harness_protocol::pb::subscribe_response::Kind;
use futures::StreamExt;
use tonic::transport::Channel;

fn count(var: &str, default: usize) -> usize {
    std::env::var(var)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

struct Server {
    child: Child,
    addr: SocketAddr,
}

impl Server {
    fn start(data: &Path, home: &Path, claude: &Path, api: &FakeApi, max_idle: usize) -> Self {
        let addr = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port");
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_agent-harness"));
        cmd.args(["serve", "--listen", &addr.to_string(), "--data-dir"])
            .arg(data)
            .arg("--claude-bin")
            .arg(claude)
            .args(["--log", "warn", "--idle-timeout", "1h"])
            .args(["--max-idle-runs", &max_idle.to_string()])
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", home)
            .envs(api.cli_env())
            .stdout(Stdio::null());
        let child = cmd.spawn().expect("spawn the server");
        Self { child, addr }
    }

    async fn client(&self) -> SessionServiceClient<Channel> {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            match Channel::from_shared(format!("http://{}", self.addr))
                .expect("uri")
                .connect()
                .await
            {
                Ok(ch) => return SessionServiceClient::new(ch),
                Err(e) if Instant::now() > deadline => panic!("server never listened: {e}"),
                Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
            }
        }
    }

    /// RSS in MiB of the server, and of its descendants with their count.
    fn rss(&self) -> (f64, f64, usize) {
        let me = self.child.id();
        let mut parents = HashMap::new();
        for entry in std::fs::read_dir("/proc").expect("/proc").flatten() {
            let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
                continue;
            };
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            let ppid = stat
                .rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().nth(1))
                .and_then(|p| p.parse::<u32>().ok());
            if let Some(ppid) = ppid {
                parents.insert(pid, ppid);
            }
        }
        let descends = |mut pid: u32| {
            while let Some(&p) = parents.get(&pid) {
                if p == me {
                    return true;
                }
                if p <= 1 {
                    return false;
                }
                pid = p;
            }
            false
        };
        let (mut sum, mut n) = (0.0, 0);
        for &pid in parents.keys() {
            if pid != me && descends(pid) {
                let kib = rss_kib(pid);
                if kib > 0.0 {
                    sum += kib;
                    n += 1;
                }
            }
        }
        (rss_kib(me) / 1024.0, sum / 1024.0, n)
    }

    fn stop(mut self) {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(self.child.id() as i32),
            nix::sys::signal::Signal::SIGTERM,
        );
        let _ = self.child.wait();
    }
}

fn rss_kib(pid: u32) -> f64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0)
}

fn id(i: usize) -> String {
    format!("idle-{i:02}")
}

/// Runs `start` (a Start or a Send on `session`) and times the first
/// `content` and the `turn_end` that follow, from a stream opened first.
async fn timed_turn<F, Fut>(
    c: &mut SessionServiceClient<Channel>,
    session: &str,
    start: F,
) -> (Duration, Duration)
where
    F: FnOnce(SessionServiceClient<Channel>) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let head = match c
        .get_session(pb::GetSessionRequest {
            session_id: session.into(),
        })
        .await
    {
        Ok(r) => r.into_inner().session.map(|s| s.head_seq).unwrap_or(0),
        Err(_) => 0,
    };
    let sub = pb::SubscribeRequest {
        session_id: session.into(),
        after_seq: head,
        ..Default::default()
    };
    let mut s = c.subscribe(sub).await.expect("subscribe").into_inner();
    let t = Instant::now();
    start(c.clone()).await;
    let mut first = None;
    while let Some(m) = s.next().await {
        if let Some(Kind::Event(e)) = m.expect("stream").kind {
            match e.payload {
                Some(Payload::Content(_)) if first.is_none() => first = Some(t.elapsed()),
                Some(Payload::TurnEnd(_)) => {
                    return (first.unwrap_or_default(), t.elapsed());
                }
                Some(Payload::RunEnd(_)) => panic!("{session}: the run ended before its turn did"),
                _ => {}
            }
        }
    }
    panic!("{session}: stream ended before turn_end");
}

async fn alive(c: &mut SessionServiceClient<Channel>, session: &str) -> bool {
    c.get_session(pb::GetSessionRequest {
        session_id: session.into(),
    })
    .await
    .expect("get")
    .into_inner()
    .session
    .is_some_and(|s| s.process_alive)
}

/// Waits until the server has `want` descendant processes (the evicted
/// ones have exited), at most 30 s.
async fn settle(server: &Server, want: usize) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while server.rss().2 > want && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn ms(d: Duration) -> String {
    format!("{:.0}", d.as_secs_f64() * 1000.0)
}

fn main() {
    let sessions = count("AGENT_HARNESS_BENCH_SESSIONS", 20);
    let rounds = count("AGENT_HARNESS_BENCH_ROUNDS", 5);
    let claude =
        PathBuf::from(std::env::var("CLAUDE_BIN").expect("CLAUDE_BIN (source .tools/env.sh)"));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let api = FakeApi::start().await;
        println!("idle_runs: {sessions} sessions, one turn each, then idle (--idle-timeout 1h)");
        println!("| --max-idle-runs | CLI processes | CLI RSS MiB | server RSS MiB | total MiB |");
        println!("|---|---|---|---|---|");
        for (label, max_idle) in [("no cap", sessions + 1), ("4 (default)", 4)] {
            let dir = tempfile::tempdir().expect("tempdir");
            let home = dir.path().join("home");
            std::fs::create_dir_all(&home).expect("home");
            let server = Server::start(&dir.path().join("data"), &home, &claude, &api, max_idle);
            let mut c = server.client().await;
            for i in 0..sessions {
                let session = id(i);
                timed_turn(&mut c, &session, |mut c| async move {
                    let start = pb::StartRequest {
                        session_id: id(i),
                        config: Some(pb::StartConfig {
                            prompt: format!("TEXT hello {i}"),
                            ..Default::default()
                        }),
                        ..Default::default()
                    };
                    c.start(start).await.expect("start");
                })
                .await;
            }
            settle(&server, max_idle.min(sessions)).await;
            let (own, cli, n) = server.rss();
            println!("| {label} | {n} | {cli:.0} | {own:.1} | {:.0} |", own + cli);

            if max_idle < sessions {
                let (mut warm, mut cold) = (Vec::new(), Vec::new());
                let mut resent = std::collections::HashSet::new();
                for r in 0..rounds {
                    // Warm: a session whose process is alive; evicted: one
                    // not sent to since its eviction.
                    let mut hot = None;
                    for i in (0..sessions).rev() {
                        if alive(&mut c, &id(i)).await {
                            hot = Some(i);
                            break;
                        }
                    }
                    let hot = hot.expect("a warm session");
                    let mut evicted = None;
                    for i in 0..sessions {
                        if !resent.contains(&i) && !alive(&mut c, &id(i)).await {
                            evicted = Some(i);
                            break;
                        }
                    }
                    let evicted = evicted.expect("an evicted session");
                    resent.insert(evicted);
                    for (i, into) in [(hot, &mut warm), (evicted, &mut cold)] {
                        let session = id(i);
                        let took = timed_turn(&mut c, &session, |mut c| async move {
                            let send = pb::SendRequest {
                                session_id: id(i),
                                input: format!("TEXT again {r}"),
                                ..Default::default()
                            };
                            c.send(send).await.expect("send");
                        })
                        .await;
                        into.push(took);
                    }
                    settle(&server, max_idle).await;
                }
                println!();
                println!("follow-up latency with --max-idle-runs {max_idle}, {rounds} rounds (ms)");
                println!("| session | first content median | turn_end median | each (first content / turn_end) |");
                println!("|---|---|---|---|");
                for (what, v) in [("warm", &warm), ("evicted (respawn --resume)", &cold)] {
                    let each: Vec<String> =
                        v.iter().map(|(a, b)| format!("{}/{}", ms(*a), ms(*b))).collect();
                    println!(
                        "| {what} | {} | {} | {} |",
                        ms(median(v.iter().map(|t| t.0).collect())),
                        ms(median(v.iter().map(|t| t.1).collect())),
                        each.join(", ")
                    );
                }
            }
            drop(c);
            server.stop();
        }
    });
}
