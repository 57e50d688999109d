//! Our server, measured from outside over loopback gRPC (and grpc-web):
//! every event comes from the stand-in CLI (`load-cli`) through the whole
//! path: process stdout → adapter → normalize → group commit (fsync) →
//! subscribers.

pub mod deltas;
pub mod fanout;
pub mod idle;
pub mod replay;
pub mod spawn;
pub mod throughput;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use agent_harness_protocol::pb;
use agent_harness_protocol::pb::session_service_client::SessionServiceClient;
use agent_harness_protocol::pb::subscribe_response::Kind;
use futures::StreamExt;
use tonic::transport::Channel;

/// Bytes per CLI line the stand-in writes (an assistant text line of the
/// size the first measurements used).
pub const LINE_BYTES: usize = 600;

/// The message that makes the stand-in CLI write `n` assistant messages at
/// `rate` per second (0: as fast as it can), each streamed as `frags`
/// text fragments first when the server runs it with
/// `--include-partial-messages` (0: bare assistant lines, the workload of
/// every measurement but live typing).
pub fn load_prompt(n: u64, rate: f64, frags: usize) -> String {
    format!("LOAD n={n} rate={rate} size={LINE_BYTES} frags={frags}")
}

/// Starts a session whose first turn writes `n` lines at `rate`.
pub async fn start(client: &mut SessionServiceClient<Channel>, id: &str, n: u64, rate: f64) {
    client
        .start(pb::StartRequest {
            session_id: id.into(),
            config: Some(pb::StartConfig {
                prompt: load_prompt(n, rate, 0),
                ..Default::default()
            }),
            idempotency_key: String::new(),
        })
        .await
        .unwrap_or_else(|e| panic!("Start {id}: {e}"));
}

/// Sends a follow-up turn: `prompt` from [`load_prompt`].
pub async fn send(client: &mut SessionServiceClient<Channel>, id: &str, prompt: String) {
    client
        .send(pb::SendRequest {
            session_id: id.into(),
            input: prompt,
            ..Default::default()
        })
        .await
        .unwrap_or_else(|e| panic!("Send {id}: {e}"));
}

/// Wall-clock now, as nanoseconds since the epoch (the stand-in's clock:
/// same machine).
pub fn now_nanos() -> i128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_nanos() as i128
}

/// When the stand-in wrote this content event's line: `t=` in its text,
/// or for a streamed message its last fragment's stamp (written with it).
pub fn written_at(event: &pb::Event) -> Option<i128> {
    let Some(pb::event::Payload::Content(c)) = &event.payload else {
        return None;
    };
    let text = &c.blocks.first()?.text;
    if let Some(us) = agent_harness_load::stamp::stamps(text).last() {
        return Some(us as i128 * 1000);
    }
    let t = text.split_whitespace().nth(2)?.strip_prefix("t=")?;
    t.parse().ok()
}

/// When the server sequenced the event (its batch's time, just before the
/// commit), nanoseconds since the epoch.
pub fn sequenced_at(event: &pb::Event) -> Option<i128> {
    let t = event.time.as_ref()?;
    Some(t.seconds as i128 * 1_000_000_000 + t.nanos as i128)
}

/// Microseconds from `from` to `to`, clamped at 0.
pub fn micros(from: i128, to: i128) -> u32 {
    ((to - from).max(0) / 1000).min(u32::MAX as i128) as u32
}

/// Samples in microseconds as durations.
pub fn durations(us: &[u32]) -> Vec<Duration> {
    us.iter()
        .map(|&u| Duration::from_micros(u as u64))
        .collect()
}

/// What one subscriber saw of one session.
#[derive(Debug, Default)]
pub struct Seen {
    /// Events received (the replay included).
    pub events: u64,
    /// Highest seq received.
    pub head: u64,
    /// Content events received.
    pub contents: u64,
    /// Stand-in write → receipt, µs, per content event after `caught_up`.
    pub from_write: Vec<u32>,
    /// Server sequencing (batch time, before the fsync) → receipt, µs.
    pub from_commit: Vec<u32>,
    /// Encoded bytes of the events received.
    pub bytes: u64,
}

impl Seen {
    /// Counts one event; true when it is a `turn_end`. Panics on a gap.
    /// Delays are sampled only once `live` (after `caught_up`).
    pub fn record(&mut self, id: &str, e: &pb::Event, live: bool) -> bool {
        let now = now_nanos();
        assert_eq!(e.seq, self.head + 1, "{id}: gap after seq {}", self.head);
        self.head = e.seq;
        self.events += 1;
        self.bytes += prost::Message::encoded_len(e) as u64;
        match &e.payload {
            Some(pb::event::Payload::Content(_)) => {
                self.contents += 1;
                if live {
                    if let Some(t) = written_at(e) {
                        self.from_write.push(micros(t, now));
                    }
                    if let Some(t) = sequenced_at(e) {
                        self.from_commit.push(micros(t, now));
                    }
                }
                false
            }
            Some(pb::event::Payload::TurnEnd(_)) => true,
            _ => false,
        }
    }
}

/// Follows a session from `after_seq` until `turns` more `turn_end`
/// events have arrived, checking that seqs are gapless; `ready` fires at
/// `caught_up`. Panics on a gap, a reset or a stream error: a lossy
/// measurement is no measurement.
pub async fn follow(
    mut client: SessionServiceClient<Channel>,
    id: String,
    after_seq: u64,
    turns: u64,
    ready: Option<tokio::sync::oneshot::Sender<()>>,
) -> Seen {
    let mut stream = client
        .subscribe(pb::SubscribeRequest {
            session_id: id.clone(),
            after_seq,
            include_deltas: false,
        })
        .await
        .unwrap_or_else(|e| panic!("Subscribe {id}: {e}"))
        .into_inner();
    let mut seen = Seen {
        head: after_seq,
        ..Default::default()
    };
    let mut ready = ready;
    let mut live = false;
    let mut ended = 0;
    while ended < turns {
        let msg = match stream.next().await {
            Some(Ok(m)) => m,
            Some(Err(e)) => panic!("Subscribe {id}: {e}"),
            None => panic!("Subscribe {id} ended after seq {}", seen.head),
        };
        match msg.kind {
            Some(Kind::Event(e)) => {
                if seen.record(&id, &e, live) {
                    ended += 1;
                }
            }
            Some(Kind::CaughtUp(_)) => {
                live = true;
                if let Some(r) = ready.take() {
                    let _ = r.send(());
                }
            }
            Some(Kind::Replay(r)) => {
                assert!(
                    !r.reset,
                    "{id}: the server reset the cursor (raise --max-replay)"
                );
            }
            Some(Kind::Heartbeat(_) | Kind::Delta(_)) | None => {}
        }
    }
    seen
}

/// The log's head seq right now.
pub async fn head(client: &mut SessionServiceClient<Channel>, id: &str) -> u64 {
    let s = client
        .get_session(pb::GetSessionRequest {
            session_id: id.into(),
        })
        .await
        .unwrap_or_else(|e| panic!("GetSession {id}: {e}"))
        .into_inner();
    s.session.map(|s| s.head_seq).unwrap_or(0)
}

/// `n` connections to the server, for spreading many streams.
pub async fn connections(
    server: &crate::server::Server,
    n: usize,
) -> Vec<SessionServiceClient<Channel>> {
    let mut v = Vec::with_capacity(n);
    for _ in 0..n {
        v.push(server.connect().await);
    }
    v
}
