//! Our server, measured from outside over loopback gRPC (and grpc-web):
//! every event comes from the stand-in CLI (`load-cli`) through the whole
//! path: process stdout → adapter → normalize → group commit (fsync) →
//! subscribers.

pub mod ceiling;
pub mod deltas;
pub mod fanout;
pub mod idle;
pub mod lean;
pub mod replay;
pub mod spawn;
pub mod throughput;

use std::time::{SystemTime, UNIX_EPOCH};

use agent_harness_protocol::pb;
use agent_harness_protocol::pb::session_service_client::SessionServiceClient;
use futures::StreamExt;
use tonic::transport::Channel;

use crate::server::Conn;

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

/// When the stand-in wrote a content event's line, from its first text
/// block: `t=` in it, or for a streamed message its last fragment's stamp
/// (written with it).
pub fn written_at(text: &str) -> Option<i128> {
    if let Some(us) = agent_harness_load::stamp::stamps(text).last() {
        return Some(us as i128 * 1000);
    }
    let t = text.split_whitespace().nth(2)?.strip_prefix("t=")?;
    t.parse().ok()
}

/// Microseconds from `from` to `to`, clamped at 0.
pub fn micros(from: i128, to: i128) -> u32 {
    ((to - from).max(0) / 1000).min(u32::MAX as i128) as u32
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
        self.record_lean(id, &lean::Ev::of(e), live)
    }

    /// [`Seen::record`] of an event read by the lean reader.
    pub fn record_lean(&mut self, id: &str, e: &lean::Ev<'_>, live: bool) -> bool {
        let now = now_nanos();
        assert_eq!(e.seq, self.head + 1, "{id}: gap after seq {}", self.head);
        self.head = e.seq;
        self.events += 1;
        self.bytes += e.len as u64;
        match e.payload {
            lean::Payload::Content { text } => {
                self.contents += 1;
                if live {
                    if let Some(t) = written_at(text) {
                        self.from_write.push(micros(t, now));
                    }
                    if let Some(t) = e.time {
                        self.from_commit.push(micros(t, now));
                    }
                }
                false
            }
            lean::Payload::TurnEnd => true,
            lean::Payload::Other => false,
        }
    }
}

/// How the tool's subscribers read each message (set once, from the
/// command line, before any row runs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decode {
    /// Only what the measurement needs, from the bytes ([`lean`]).
    Lean,
    /// Lean, and every message also decoded with the generated types and
    /// compared ([`lean::cross_check`]): the smoke run's proof of the
    /// lean reader.
    LeanChecked,
    /// Every message decoded with the generated types, as a real client
    /// does (and as this tool did before 2026-12-03).
    Full,
}

static DECODE: std::sync::OnceLock<Decode> = std::sync::OnceLock::new();

/// Sets how subscribers read (the first call wins).
pub fn set_decode(decode: Decode) {
    let _ = DECODE.set(decode);
}

/// How subscribers read ([`Decode::Lean`] unless set).
pub fn decode_mode() -> Decode {
    DECODE.get().copied().unwrap_or(Decode::Lean)
}

/// A Subscribe whose messages arrive as their bytes.
pub async fn subscribe_raw(
    conn: &Conn,
    request: pb::SubscribeRequest,
) -> Result<tonic::Streaming<bytes::Bytes>, tonic::Status> {
    let mut grpc = tonic::client::Grpc::new(conn.channel.clone())
        .max_decoding_message_size(crate::server::MAX_MESSAGE_BYTES);
    grpc.ready()
        .await
        .map_err(|e| tonic::Status::unavailable(format!("connection not ready: {e}")))?;
    let path = tonic::codegen::http::uri::PathAndQuery::from_static(
        "/agentharness.v1.SessionService/Subscribe",
    );
    Ok(grpc
        .server_streaming(tonic::Request::new(request), path, lean::RawCodec)
        .await?
        .into_inner())
}

/// One message of a Subscribe stream, read as [`decode_mode`] says.
pub enum Received {
    /// Read by the generated types.
    Full(Box<pb::SubscribeResponse>),
    /// The bytes, for [`lean::parse`].
    Raw(bytes::Bytes),
}

/// A Subscribe stream read as [`decode_mode`] says.
pub enum Stream {
    /// Generated types.
    Full(tonic::Streaming<pb::SubscribeResponse>),
    /// Bytes.
    Raw(tonic::Streaming<bytes::Bytes>),
}

impl Stream {
    /// Opens a Subscribe on `conn`.
    pub async fn open(conn: &Conn, request: pb::SubscribeRequest) -> Result<Self, tonic::Status> {
        Ok(match decode_mode() {
            Decode::Full => Stream::Full(conn.rpc.clone().subscribe(request).await?.into_inner()),
            Decode::Lean | Decode::LeanChecked => Stream::Raw(subscribe_raw(conn, request).await?),
        })
    }

    /// The next message; `None` at the stream's end.
    pub async fn next(&mut self) -> Option<Result<Received, tonic::Status>> {
        match self {
            Stream::Full(s) => s
                .next()
                .await
                .map(|r| r.map(|m| Received::Full(Box::new(m)))),
            Stream::Raw(s) => s.next().await.map(|r| r.map(Received::Raw)),
        }
    }
}

impl Received {
    /// The message as the lean reader reads it (checked against the
    /// generated types under [`Decode::LeanChecked`]); panics on a message
    /// it cannot read.
    pub fn read(&self, id: &str) -> lean::Msg<'_> {
        match self {
            Received::Full(m) => lean::Msg::of(m),
            Received::Raw(bytes) => {
                let msg = lean::parse(bytes).unwrap_or_else(|e| panic!("Subscribe {id}: {e}"));
                if decode_mode() == Decode::LeanChecked {
                    lean::cross_check(bytes, &msg);
                }
                msg
            }
        }
    }
}

/// Follows a session from `after_seq` until `turns` more `turn_end`
/// events have arrived, checking that seqs are gapless; `ready` fires at
/// `caught_up`. Panics on a gap, a reset or a stream error: a lossy
/// measurement is no measurement.
pub async fn follow(
    conn: Conn,
    id: String,
    after_seq: u64,
    turns: u64,
    ready: Option<tokio::sync::oneshot::Sender<()>>,
) -> Seen {
    let mut stream = Stream::open(
        &conn,
        pb::SubscribeRequest {
            session_id: id.clone(),
            after_seq,
            include_deltas: false,
        },
    )
    .await
    .unwrap_or_else(|e| panic!("Subscribe {id}: {e}"));
    let mut seen = Seen {
        head: after_seq,
        ..Default::default()
    };
    let mut ready = ready;
    let mut live = false;
    let mut ended = 0;
    while ended < turns {
        let received = match stream.next().await {
            Some(Ok(m)) => m,
            Some(Err(e)) => panic!("Subscribe {id}: {e}"),
            None => panic!("Subscribe {id} ended after seq {}", seen.head),
        };
        let turn_ended = match received.read(&id) {
            lean::Msg::Event(e) => seen.record_lean(&id, &e, live),
            lean::Msg::CaughtUp => {
                live = true;
                if let Some(r) = ready.take() {
                    let _ = r.send(());
                }
                false
            }
            lean::Msg::Replay { reset } => {
                assert!(
                    !reset,
                    "{id}: the server reset the cursor (raise --max-replay)"
                );
                false
            }
            lean::Msg::Other => false,
        };
        if turn_ended {
            ended += 1;
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
pub async fn connections(server: &crate::server::Server, n: usize) -> Vec<Conn> {
    let mut v = Vec::with_capacity(n);
    for _ in 0..n {
        v.push(server.connect().await);
    }
    v
}
