//! Server memory against the number of sessions touched, measured from
//! outside: the release binary, driven over loopback gRPC.
//!
//! `cargo bench -p agent-harness-server --bench session_memory`
//!
//! Starts `agent-harness serve` (a fresh redb data dir, the one-shot
//! cassette replayed at full speed as the CLI) and prints its RSS
//! (`VmRSS` of `/proc/<pid>/status`):
//! - after start-up;
//! - after 100,000 ids that do not exist were each called with GetSession,
//!   Send, Stop, History and Subscribe (stream opened, header read, closed);
//! - after 10,000 sessions each ran one turn to its end;
//! - after every one of them was read again (GetSession: each evicted
//!   session is folded back from its log);
//! - after a ListSessions walk over all of them, page by page;
//! - after a restart on the same data dir, and the same walk.
//!
//! `AGENT_HARNESS_BENCH_SESSIONS` / `AGENT_HARNESS_BENCH_UNKNOWN` change
//! the counts.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use agent_harness_protocol::pb;
use agent_harness_protocol::pb::session_service_client::SessionServiceClient;
use agent_harness_protocol::pb::subscribe_response::Kind;
use futures::StreamExt;
use tonic::transport::Channel;

const CONCURRENCY: usize = 32;

fn count(var: &str, default: usize) -> usize {
    std::env::var(var)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn free_port() -> SocketAddr {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    l.local_addr().expect("addr")
}

struct Server {
    child: Child,
    addr: SocketAddr,
}

impl Server {
    fn start(data: &Path) -> Self {
        let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
        let cassette = root.join("cassettes/one_shot.cassette.jsonl");
        let addr = free_port();
        let child = Command::new(env!("CARGO_BIN_EXE_agent-harness"))
            .args(["serve", "--listen", &addr.to_string(), "--data-dir"])
            .arg(data)
            .arg(format!("--adapter=cassette:{}", cassette.display()))
            .args(["--cassette-timescale", "0", "--log", "warn"])
            .args(["--max-live-runs", "64", "--max-sessions-per-minute", "0"])
            .stdout(Stdio::null())
            .spawn()
            .expect("spawn the server");
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
                Ok(ch) => {
                    return SessionServiceClient::new(ch)
                        .max_decoding_message_size(4 * 1024 * 1024);
                }
                Err(e) if Instant::now() > deadline => panic!("server never listened: {e}"),
                Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
            }
        }
    }

    fn rss_mib(&self) -> f64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .unwrap_or_default();
        let kib: f64 = status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .unwrap_or(0.0);
        kib / 1024.0
    }

    fn stop(mut self) {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(self.child.id() as i32),
            nix::sys::signal::Signal::SIGTERM,
        );
        let _ = self.child.wait();
    }
}

/// Runs `f(i)` for `0..n`, `CONCURRENCY` at a time, each on its own client clone.
async fn for_each<F, Fut>(client: &SessionServiceClient<Channel>, n: usize, f: F)
where
    F: Fn(SessionServiceClient<Channel>, usize) -> Fut + Clone + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    let mut tasks = Vec::new();
    for w in 0..CONCURRENCY {
        let (client, f) = (client.clone(), f.clone());
        tasks.push(tokio::spawn(async move {
            let mut i = w;
            while i < n {
                f(client.clone(), i).await;
                i += CONCURRENCY;
            }
        }));
    }
    for t in tasks {
        t.await.expect("task");
    }
}

async fn touch_unknown(mut c: SessionServiceClient<Channel>, i: usize) {
    let id = format!("nobody-{i}");
    let session_id = id.clone();
    assert!(
        c.get_session(pb::GetSessionRequest { session_id })
            .await
            .is_err()
    );
    let session_id = id.clone();
    let send = pb::SendRequest {
        session_id,
        input: "hi".into(),
        ..Default::default()
    };
    assert!(c.send(send).await.is_err());
    let session_id = id.clone();
    assert!(
        c.stop(pb::StopRequest {
            session_id,
            ..Default::default()
        })
        .await
        .is_err()
    );
    let session_id = id.clone();
    let history = pb::HistoryRequest {
        session_id,
        ..Default::default()
    };
    assert!(c.history(history).await.is_err());
    let sub = pb::SubscribeRequest {
        session_id: id,
        ..Default::default()
    };
    let mut s = c.subscribe(sub).await.expect("subscribe").into_inner();
    let first = s.next().await.expect("header").expect("header");
    assert!(matches!(first.kind, Some(Kind::Replay(_))));
}

async fn run_one_turn(mut c: SessionServiceClient<Channel>, i: usize) {
    let session_id = format!("done-{i:05}");
    let sub = pb::SubscribeRequest {
        session_id: session_id.clone(),
        ..Default::default()
    };
    let mut s = c.subscribe(sub).await.expect("subscribe").into_inner();
    let start = pb::StartRequest {
        session_id,
        config: Some(pb::StartConfig {
            prompt: "hi".into(),
            ..Default::default()
        }),
        ..Default::default()
    };
    c.start(start).await.expect("start");
    while let Some(m) = s.next().await {
        if let Some(Kind::Event(e)) = m.expect("stream").kind
            && matches!(e.payload, Some(pb::event::Payload::RunEnd(_)))
        {
            return;
        }
    }
    panic!("stream ended before run_end");
}

async fn read_again(mut c: SessionServiceClient<Channel>, i: usize) {
    let session_id = format!("done-{i:05}");
    let s = c
        .get_session(pb::GetSessionRequest { session_id })
        .await
        .expect("get")
        .into_inner()
        .session
        .expect("session");
    assert!(s.head_seq > 0 && !s.process_alive);
}

async fn walk(c: &mut SessionServiceClient<Channel>) -> usize {
    let (mut token, mut n) = (String::new(), 0);
    loop {
        let page = c
            .list_sessions(pb::ListSessionsRequest {
                page_size: 1000,
                page_token: token,
                ..Default::default()
            })
            .await
            .expect("list")
            .into_inner();
        n += page.sessions.len();
        if page.next_page_token.is_empty() {
            return n;
        }
        token = page.next_page_token;
    }
}

fn row(what: &str, server: &Server, took: Duration) {
    println!(
        "| {what:<58} | {:>8.1} | {:>8.1} |",
        server.rss_mib(),
        took.as_secs_f64()
    );
}

fn main() {
    let unknown = count("AGENT_HARNESS_BENCH_UNKNOWN", 100_000);
    let sessions = count("AGENT_HARNESS_BENCH_SESSIONS", 10_000);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let dir = tempfile::tempdir().expect("tempdir");
    rt.block_on(async {
        println!("session_memory: RSS of the release server (defaults: --cache-sessions 1000, --cache-bytes 128 MiB, --store-cache-bytes 16 MiB)");
        println!("| {:<58} | {:>8} | {:>8} |", "after", "RSS MiB", "took s");
        println!("|{}|{}|{}|", "-".repeat(60), "-".repeat(10), "-".repeat(10));
        let server = Server::start(dir.path());
        let mut client = server.client().await;
        row("start-up", &server, Duration::ZERO);

        let t = Instant::now();
        for_each(&client, unknown, touch_unknown).await;
        row(&format!("{unknown} unknown ids x 5 calls"), &server, t.elapsed());

        let t = Instant::now();
        for_each(&client, sessions, run_one_turn).await;
        row(&format!("{sessions} sessions, one finished turn each"), &server, t.elapsed());

        let t = Instant::now();
        for_each(&client, sessions, read_again).await;
        row(&format!("GetSession on all {sessions} again"), &server, t.elapsed());

        let t = Instant::now();
        let n = walk(&mut client).await;
        assert_eq!(n, sessions);
        row(&format!("ListSessions walk, {} pages", n.div_ceil(1000)), &server, t.elapsed());
        drop(client);
        server.stop();

        let t = Instant::now();
        let server = Server::start(dir.path());
        let mut client = server.client().await;
        row("restart on the same data dir", &server, t.elapsed());
        let t = Instant::now();
        assert_eq!(walk(&mut client).await, sessions);
        row("ListSessions walk after the restart", &server, t.elapsed());
        drop(client);
        server.stop();
    });
}
