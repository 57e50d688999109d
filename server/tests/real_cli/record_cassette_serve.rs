//! The newcomer path, end to end through the real binary: `agent-harness
//! record` runs the real claude CLI against the fake Messages API and writes
//! a cassette; `agent-harness serve --adapter cassette:FILE` then replays it
//! behind the gRPC API, driven here by the generated Rust client. The
//! committed `cassettes/plain_turn.cassette.jsonl` is served the same way,
//! since that is how one tries the whole API without the CLI.

use crate::support::common;
use crate::support::server;

use std::net::SocketAddr;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use agent_harness_fake_api::FakeApi;
use agent_harness_protocol::pb;
use agent_harness_protocol::pb::event::Payload;
use agent_harness_protocol::pb::session_service_client::SessionServiceClient;
use common::{cassettes_dir, claude_bin};
use server::{Sub, get, is_turn_end, kinds, start};
use tokio::process::{Child, Command};
use tonic::transport::Channel;

/// Bound for the recording (one turn of the real CLI against the fake).
const RECORD_TIMEOUT: Duration = Duration::from_secs(120);
/// Bound for the server to listen, a replayed turn, and the shutdown.
const WAIT: Duration = Duration::from_secs(30);

fn harness_bin() -> &'static str {
    env!("CARGO_BIN_EXE_agent-harness")
}

/// A command for the harness binary with a clean environment: nothing of a
/// developer's login, proxy or harness settings reaches it or the CLI.
fn harness(home: &Path) -> Command {
    let mut cmd = Command::new(harness_bin());
    cmd.env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home)
        .stdin(Stdio::null())
        .kill_on_drop(true);
    cmd
}

/// A served cassette: the `agent-harness serve` child and its address.
struct Served {
    child: Child,
    addr: SocketAddr,
    _data: tempfile::TempDir,
}

impl Served {
    /// `agent-harness serve --adapter cassette:FILE` on a free loopback port.
    /// `env` is added to the server's environment.
    async fn start(cassette: &Path, home: &Path, env: &[(&str, &str)]) -> Self {
        let data = tempfile::tempdir().expect("data dir");
        // Reserve a free port, release it, hand it to the child. The child
        // failing to bind (someone took it meanwhile) shows in wait_ready.
        let addr = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("free port");
        let child = harness(home)
            .envs(env.iter().copied())
            .arg("serve")
            .arg("--listen")
            .arg(addr.to_string())
            .arg("--data-dir")
            .arg(data.path())
            .arg("--adapter")
            .arg(format!("cassette:{}", cassette.display()))
            .arg("--log")
            .arg("warn")
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn agent-harness serve");
        let mut served = Self {
            child,
            addr,
            _data: data,
        };
        served.wait_ready().await;
        served
    }

    async fn wait_ready(&mut self) {
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                panic!("agent-harness serve exited early: {status}");
            }
            if self.client().await.is_ok() {
                return;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "agent-harness serve never listened on {}",
                self.addr
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    async fn client(&self) -> Result<SessionServiceClient<Channel>, tonic::transport::Error> {
        SessionServiceClient::connect(format!("http://{}", self.addr)).await
    }

    /// SIGTERM, as a service manager would; the server must exit 0.
    async fn stop(mut self) {
        let pid = self.child.id().expect("child pid");
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid as i32),
            nix::sys::signal::Signal::SIGTERM,
        )
        .expect("SIGTERM");
        let status = tokio::time::timeout(WAIT, self.child.wait())
            .await
            .expect("serve exits after SIGTERM")
            .expect("wait");
        assert!(status.success(), "serve exited with {status}");
    }
}

/// Start + Subscribe on a served cassette; returns the events up to the
/// first turn_end, after checking the replayed shape.
async fn replay_one_turn(served: &Served, session: &str) -> Vec<pb::Event> {
    let mut c = served.client().await.expect("connect");
    let mut sub = Sub::open(&mut c, session, 0).await;
    let started = start(&mut c, session, "replayed prompt")
        .await
        .expect("start");
    assert!(started.process_id.starts_with("cassette:"), "{started:?}");
    sub.until("turn_end", is_turn_end).await;
    let events = sub.events;
    assert_eq!(
        kinds(&events),
        [
            "run_start",
            "input_sent",
            "run_ready",
            "content",
            "turn_end"
        ]
    );
    assert!(events.iter().all(|e| e.run_id == started.run_id));
    let Some(Payload::RunReady(ready)) = &events[2].payload else {
        unreachable!()
    };
    assert!(!ready.resume_id.is_empty(), "the recorded CLI session id");
    let session_state = get(&mut c, session).await;
    assert_eq!(session_state.status, pb::SessionStatus::Idle as i32);
    assert!(
        session_state.process_alive,
        "the replay waits at the recorded stdin close, like a keep-alive CLI"
    );
    events
}

/// The text of the replayed answer.
fn answer_text(events: &[pb::Event]) -> String {
    events
        .iter()
        .filter_map(|e| match &e.payload {
            Some(Payload::Content(c)) => Some(c.blocks.iter().map(|b| b.text.as_str()).collect()),
            _ => None,
        })
        .collect::<Vec<String>>()
        .concat()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn record_with_the_real_cli_then_serve_the_cassette() {
    let api = FakeApi::start().await;
    let home = tempfile::tempdir().expect("home");
    let work = tempfile::tempdir().expect("work");
    let out_dir = tempfile::tempdir().expect("out");
    let cassette = out_dir.path().join("hello.cassette.jsonl");

    let mut record = harness(home.path());
    record
        .arg("record")
        .arg("--out")
        .arg(&cassette)
        .arg("--cwd")
        .arg(work.path())
        .arg("--claude-bin")
        .arg(claude_bin())
        .arg("TEXT recorded words from the fake model")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in api.cli_env() {
        record.env(k, v);
    }
    let output = tokio::time::timeout(RECORD_TIMEOUT, record.output())
        .await
        .expect("record finishes in time")
        .expect("run agent-harness record");
    assert!(
        output.status.success(),
        "record failed ({}): {}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    // The CLI really went to the fake API (nothing else could answer it).
    let calls = api.message_requests();
    assert!(!calls.is_empty(), "the CLI never called the fake API");

    let text = std::fs::read_to_string(&cassette).expect("cassette written");
    let mut lines = text.lines();
    let header: serde_json::Value =
        serde_json::from_str(lines.next().expect("header")).expect("header json");
    assert_eq!(header["type"], "header");
    assert_eq!(header["adapter"], "interactive");
    assert!(
        header["cli_version"]
            .as_str()
            .is_some_and(|v| !v.is_empty()),
        "{header}"
    );
    let records: Vec<serde_json::Value> = lines
        .map(|l| serde_json::from_str(l).expect("record json"))
        .collect();
    assert!(
        records
            .iter()
            .any(|r| r["dir"] == "in" && r["kind"] == "initial")
    );
    assert!(records.iter().any(|r| r["dir"] == "out"));
    assert_eq!(records.last().map(|r| &r["dir"]), Some(&"exit".into()));

    let served = Served::start(&cassette, home.path(), &[]).await;
    let events = replay_one_turn(&served, "replayed").await;
    assert_eq!(answer_text(&events), "recorded words from the fake model");
    // Nothing reached the fake API during the replay.
    assert_eq!(api.message_requests().len(), calls.len());
    served.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_the_committed_plain_turn_cassette() {
    let cassette = cassettes_dir().join("plain_turn.cassette.jsonl");
    let recorded: String = std::fs::read_to_string(&cassette)
        .expect("committed cassette")
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|r| r["dir"] == "out")
        .filter_map(|r| serde_json::from_str::<serde_json::Value>(r["line"].as_str()?).ok())
        .filter(|v| v["type"] == "assistant")
        .flat_map(|v| {
            v["message"]["content"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .filter_map(|b| b["text"].as_str().map(str::to_owned))
        .collect();
    assert!(!recorded.is_empty(), "the cassette records an answer");

    let home = tempfile::tempdir().expect("home");
    let served = Served::start(&cassette, home.path(), &[]).await;
    // The cassette was recorded with --include-partial-messages: served, it
    // types its answer to a stream that asks for deltas.
    let mut c = served.client().await.expect("connect");
    let mut typing = c
        .subscribe(pb::SubscribeRequest {
            session_id: "demo".into(),
            after_seq: 0,
            include_deltas: true,
        })
        .await
        .expect("Subscribe")
        .into_inner();
    let events = replay_one_turn(&served, "demo").await;
    assert_eq!(answer_text(&events), recorded);
    let mut typed = String::new();
    loop {
        let msg = tokio::time::timeout(WAIT, typing.message())
            .await
            .expect("the typing stream in time")
            .expect("the typing stream")
            .expect("open");
        match msg.kind {
            Some(pb::subscribe_response::Kind::Delta(d)) => typed.push_str(&d.fragment),
            Some(pb::subscribe_response::Kind::Event(e))
                if matches!(e.payload, Some(Payload::Content(_))) =>
            {
                break;
            }
            _ => {}
        }
    }
    assert_eq!(
        typed, recorded,
        "the replayed deltas, before the content, join to it"
    );
    served.stop().await;
}

/// `AGENT_HARNESS_MAX_LINE_BYTES` reaches the normalizer of a served run:
/// the committed cassette's `system/init` line (1398 bytes) is over a 1100
/// byte limit, its answer (643) and result (1029) lines are not. The run
/// records `line_too_large` instead of `run_ready` and goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_applies_max_line_bytes_from_the_environment() {
    let cassette = cassettes_dir().join("plain_turn.cassette.jsonl");
    let home = tempfile::tempdir().expect("home");
    let served = Served::start(
        &cassette,
        home.path(),
        &[("AGENT_HARNESS_MAX_LINE_BYTES", "1100")],
    )
    .await;
    let mut c = served.client().await.expect("connect");
    start(&mut c, "limited", "hi").await.expect("start");
    let mut sub = Sub::open(&mut c, "limited", 0).await;
    sub.until("turn_end", is_turn_end).await;
    let events = sub.events;
    let errors: Vec<&pb::RunError> = events
        .iter()
        .filter_map(|e| match &e.payload {
            Some(Payload::RunError(r)) => Some(r),
            _ => None,
        })
        .collect();
    assert_eq!(errors.len(), 1, "{events:#?}");
    assert_eq!(errors[0].kind, "line_too_large");
    assert!(
        errors[0].message.contains("1398 bytes") && errors[0].message.contains("1100 byte limit"),
        "{}",
        errors[0].message
    );
    assert!(
        !events
            .iter()
            .any(|e| matches!(e.payload, Some(Payload::RunReady(_)))),
        "the init line was over the limit"
    );
    assert_eq!(answer_text(&events), "hello from the cassette");
    served.stop().await;
}

/// The control cassettes, served: the replay answers SetModel and
/// GetContextUsage from the recorded `control_response` (under the id the
/// server gives each request now), and SetModel is recorded as applied
/// live, as with the real CLI.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_the_committed_control_cassettes() {
    let home = tempfile::tempdir().expect("home");
    let served = Served::start(
        &cassettes_dir().join("set_model.cassette.jsonl"),
        home.path(),
        &[],
    )
    .await;
    let mut c = served.client().await.expect("connect");
    let mut sub = Sub::open(&mut c, "m", 0).await;
    start(&mut c, "m", "TEXT before").await.expect("start");
    sub.until("turn_end", is_turn_end).await;
    let r = c
        .set_model(pb::SetModelRequest {
            session_id: "m".into(),
            model: "claude-haiku-4-5".into(),
            idempotency_key: String::new(),
        })
        .await
        .expect("SetModel on the replay")
        .into_inner();
    assert_eq!(r.applied(), pb::SettingApplied::Live, "{r:?}");
    let e = sub
        .until("setting_changed", |e| {
            matches!(e.payload, Some(Payload::SettingChanged(_)))
        })
        .await;
    assert_eq!(e.seq, r.seq);
    assert_eq!(get(&mut c, "m").await.model, "claude-haiku-4-5");
    served.stop().await;

    let served = Served::start(
        &cassettes_dir().join("get_context_usage.cassette.jsonl"),
        home.path(),
        &[],
    )
    .await;
    let mut c = served.client().await.expect("connect");
    let mut sub = Sub::open(&mut c, "u", 0).await;
    start(&mut c, "u", "TEXT fill").await.expect("start");
    sub.until("turn_end", is_turn_end).await;
    let usage = c
        .get_context_usage(pb::GetContextUsageRequest {
            session_id: "u".into(),
        })
        .await
        .expect("GetContextUsage on the replay")
        .into_inner();
    assert!(
        usage.total_tokens > 0 && usage.max_tokens > usage.total_tokens,
        "{usage:?}"
    );
    served.stop().await;
}
