//! A real full filesystem under the real server binary: its data dir is a
//! small tmpfs (mounted in a private mount namespace with `unshare`), so
//! redb's writes really fail with ENOSPC. The run whose output can no
//! longer be recorded is ended, health turns NOT_SERVING, and once space is
//! freed (a filler file deleted through `/proc/<pid>/root`) the store is
//! reopened, the run's end is recorded, health turns SERVING and sessions
//! go on. redb refuses every operation after an I/O error until it is
//! reopened, so without the reopen the server would stay broken for good.
//! On redb whatever `AGENT_HARNESS_TEST_STORE` says (a full disk under the
//! store's file is the subject); `storage_faults` has the database case.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use agent_harness_protocol::pb;
use agent_harness_protocol::pb::event::Payload;
use agent_harness_protocol::pb::session_service_client::SessionServiceClient;
use agent_harness_protocol::pb::subscribe_response::Kind;
use futures::StreamExt;
use tonic::transport::Channel;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;

/// Bound on every wait.
const WAIT: Duration = Duration::from_secs(60);

struct Server {
    child: Child,
    data: PathBuf,
    addr: std::net::SocketAddr,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Server {
    /// The server on a tmpfs of `size` (mount's syntax, e.g. `16m`).
    fn start(dir: &Path, size: &str) -> Self {
        let data = dir.join("data");
        std::fs::create_dir_all(&data).unwrap();
        let addr = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap();
        let cassette = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../cassettes/plain_turn.cassette.jsonl");
        let script = format!(
            "set -e; mount -t tmpfs -o size={size} tmpfs '{data}'; \
             exec '{bin}' serve --listen {addr} --data-dir '{data}' \
             --adapter 'cassette:{cassette}' --cassette-timescale 0 --kill-grace 200ms --log warn",
            data = data.display(),
            bin = env!("CARGO_BIN_EXE_agent-harness"),
            cassette = cassette.display(),
        );
        // -U maps us to root in a new user namespace, so this needs no
        // privileges; -m gives the tmpfs its own mount namespace.
        let child = Command::new("unshare")
            .args(["-Urm", "sh", "-c", &script])
            .stdout(Stdio::null())
            .spawn()
            .expect("unshare (util-linux) runs");
        Self { child, data, addr }
    }

    /// The data dir as the server sees it (inside its mount namespace).
    fn inside(&self, name: &str) -> PathBuf {
        PathBuf::from(format!("/proc/{}/root", self.child.id()))
            .join(self.data.strip_prefix("/").unwrap())
            .join(name)
    }

    async fn channel(&mut self) -> Channel {
        let deadline = Instant::now() + WAIT;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                panic!("the server exited before listening: {status}");
            }
            let uri = format!("http://{}", self.addr);
            if let Ok(ch) = Channel::from_shared(uri).unwrap().connect().await {
                return ch;
            }
            assert!(Instant::now() < deadline, "the server never listened");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// Waits on the Health/Watch stream for `want`.
async fn health_becomes(ch: &Channel, want: ServingStatus) {
    let mut watch = HealthClient::new(ch.clone())
        .watch(tonic_health::pb::HealthCheckRequest {
            service: "agentharness.v1.SessionService".into(),
        })
        .await
        .unwrap()
        .into_inner();
    let seen = tokio::time::timeout(WAIT, async {
        while let Some(m) = watch.next().await {
            if m.unwrap().status == want as i32 {
                return true;
            }
        }
        false
    })
    .await;
    assert_eq!(seen, Ok(true), "health never became {want:?}");
}

/// Reads `stream` until an event matches `pred`; returns every event read.
async fn until(
    stream: &mut tonic::Streaming<pb::SubscribeResponse>,
    seen: &mut Vec<pb::Event>,
    pred: impl Fn(&pb::Event) -> bool,
) -> pb::Event {
    tokio::time::timeout(WAIT, async {
        while let Some(m) = stream.next().await {
            if let Some(Kind::Event(e)) = m.unwrap().kind {
                seen.push(e.clone());
                if pred(&e) {
                    return e;
                }
            }
        }
        panic!("stream ended");
    })
    .await
    .expect("the awaited event came")
}

fn start_req(session_id: &str, prompt: String) -> pb::StartRequest {
    pb::StartRequest {
        session_id: session_id.into(),
        config: Some(pb::StartConfig {
            prompt,
            ..Default::default()
        }),
        ..Default::default()
    }
}

#[tokio::test]
async fn a_full_filesystem_ends_the_run_and_the_server_recovers_when_space_returns() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = Server::start(dir.path(), "16m");
    let ch = server.channel().await;
    let mut c = SessionServiceClient::new(ch.clone());
    health_becomes(&ch, ServingStatus::Serving).await;

    // A live keep-alive run that has answered its turn.
    let mut sub = c
        .subscribe(pb::SubscribeRequest {
            session_id: "live".into(),
            after_seq: 0,
            include_deltas: false,
        })
        .await
        .unwrap()
        .into_inner();
    let run = c
        .start(start_req("live", "hello".into()))
        .await
        .unwrap()
        .into_inner()
        .run_id;
    let mut seen = Vec::new();
    until(&mut sub, &mut seen, |e| {
        matches!(e.payload, Some(Payload::TurnEnd(_)))
    })
    .await;

    // Fill the filesystem to the last byte (the server's own view of it).
    {
        use std::io::Write;
        let mut filler = std::fs::File::create(server.inside("filler")).unwrap();
        let chunk = vec![0u8; 64 * 1024];
        loop {
            match filler.write(&chunk) {
                Ok(0) => break,
                Ok(_) => {}
                Err(e) if e.raw_os_error() == Some(28) => break, // ENOSPC
                Err(e) => panic!("filling the tmpfs: {e}"),
            }
        }
    }
    // A large input to the live run: its input_sent needs the file to
    // grow, which the full filesystem refuses.
    let _ = c
        .send(pb::SendRequest {
            session_id: "live".into(),
            input: "y".repeat(3 * 1024 * 1024),
            ..Default::default()
        })
        .await;
    health_becomes(&ch, ServingStatus::NotServing).await;

    // Space returns: the store is reopened, the run's end is recorded.
    std::fs::remove_file(server.inside("filler")).expect("delete the filler");
    let end = until(&mut sub, &mut seen, |e| {
        matches!(e.payload, Some(Payload::RunEnd(_)))
    })
    .await;
    health_becomes(&ch, ServingStatus::Serving).await;
    assert_eq!(end.run_id, run);
    let Some(Payload::RunEnd(re)) = &end.payload else {
        unreachable!()
    };
    assert_eq!(
        (re.reason, re.source.as_str()),
        (pb::RunEndReason::Error as i32, "storage")
    );
    assert!(
        seen.iter().any(|e| matches!(&e.payload,
            Some(Payload::RunError(r)) if r.kind == "storage")),
        "run_error{{storage}} recorded"
    );

    // Everything the stream showed is in the log, unchanged and gapless.
    let history = c
        .history(pb::HistoryRequest {
            session_id: "live".into(),
            before_seq: 0,
            limit: 1000,
        })
        .await
        .unwrap()
        .into_inner()
        .events;
    assert_eq!(history, seen);
    assert!(
        history
            .iter()
            .enumerate()
            .all(|(i, e)| e.seq == i as u64 + 1)
    );

    // And the server goes on: a new session runs a turn.
    let mut sub2 = c
        .subscribe(pb::SubscribeRequest {
            session_id: "after".into(),
            after_seq: 0,
            include_deltas: false,
        })
        .await
        .unwrap()
        .into_inner();
    c.start(start_req("after", "hello again".into()))
        .await
        .unwrap();
    until(&mut sub2, &mut Vec::new(), |e| {
        matches!(e.payload, Some(Payload::TurnEnd(_)))
    })
    .await;
}
