//! Fan-out latency: N subscribers on one session while its stand-in CLI
//! writes lines at a fixed rate. For every content event each subscriber
//! records two delays:
//! - **write → receipt**: from the moment the stand-in wrote the line
//!   (its `t=`) to the moment the subscriber decoded the event: the whole
//!   path, comparable to JetStream's publish → receive;
//! - **commit → receipt**: from the event's `time` (set when the writer
//!   sequenced its batch, just before the fsync) to receipt.
//!
//! gRPC subscribers share HTTP/2 connections, 100 streams each; grpc-web
//! subscribers each hold their own HTTP/1.1 connection, as browsers
//! without HTTP/2 do.

use std::net::SocketAddr;
use std::time::Duration;

use agent_harness_protocol::pb;
use agent_harness_protocol::pb::subscribe_response::Kind;
use bytes::{Buf, BytesMut};
use http_body_util::BodyExt;
use serde::Serialize;

use super::{Seen, connections, follow, head, send};
use crate::server::Server;
use crate::stats::Latency;

/// Subscribers per HTTP/2 connection.
pub const STREAMS_PER_CONNECTION: usize = 100;

/// How subscribers connect.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Transport {
    /// Native gRPC over HTTP/2.
    Grpc,
    /// grpc-web over HTTP/1.1, one connection per subscriber.
    GrpcWeb,
}

impl Transport {
    /// As the report names it.
    pub fn name(self) -> &'static str {
        match self {
            Transport::Grpc => "gRPC (HTTP/2)",
            Transport::GrpcWeb => "grpc-web (HTTP/1.1)",
        }
    }
}

/// One row of the fan-out table.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    /// How they connected.
    pub transport: Transport,
    /// Subscribers.
    pub subscribers: usize,
    /// Lines per second the stand-in wrote.
    pub rate: f64,
    /// Lines written.
    pub events: u64,
    /// Stand-in write → receipt.
    pub from_write: Latency,
    /// Sequenced (just before the commit) → receipt.
    pub from_commit: Latency,
    /// Wall seconds from the Send to the last subscriber's turn end.
    pub secs: f64,
    /// Server CPU seconds (user + system) in that time.
    pub server_cpu: f64,
    /// This load tool's CPU seconds in that time (the subscribers decoding).
    pub client_cpu: f64,
    /// Server RSS when the row ended, bytes.
    pub rss: u64,
    /// Server peak RSS so far (`VmHWM`), bytes.
    pub peak_rss: u64,
    /// Turns pooled into this row (1 for one turn; see [`Row::pool`]).
    pub rounds: usize,
    /// Every sample, µs: write → receipt and commit → receipt, for
    /// [`Row::pool`]; not written to the report.
    #[serde(skip)]
    pub samples: (Vec<u32>, Vec<u32>),
}

impl Row {
    /// The turns of one row, run apart (interleaved with the peer's rounds),
    /// as one: lines, seconds and CPU summed, quantiles over every turn's
    /// samples, the memory of the last turn (the peak the highest).
    pub fn pool(turns: Vec<Row>) -> Row {
        let mut turns = turns.into_iter();
        let mut pooled = turns.next().expect("a row of at least one turn");
        for t in turns {
            assert_eq!(
                (t.transport, t.subscribers, t.rate),
                (pooled.transport, pooled.subscribers, pooled.rate),
                "pooled turns of different rows"
            );
            pooled.events += t.events;
            pooled.secs += t.secs;
            pooled.server_cpu += t.server_cpu;
            pooled.client_cpu += t.client_cpu;
            pooled.rss = t.rss;
            pooled.peak_rss = pooled.peak_rss.max(t.peak_rss);
            pooled.rounds += t.rounds;
            pooled.samples.0.extend(t.samples.0);
            pooled.samples.1.extend(t.samples.1);
        }
        pooled.from_write = Latency::from_micros(pooled.samples.0.clone());
        pooled.from_commit = Latency::from_micros(pooled.samples.1.clone());
        pooled
    }
}

/// Prepares session `id` with a live process: one turn of one line.
pub async fn prepare(server: &Server, id: &str) {
    let mut c = server.connect().await;
    let follower = tokio::spawn(follow(c.clone(), id.to_string(), 0, 1, None));
    super::start(&mut c, id, 1, 0.0).await;
    follower.await.expect("first turn");
}

/// `subscribers` follow `id` while its CLI writes `events` lines at `rate`.
pub async fn run(
    server: &Server,
    id: &str,
    transport: Transport,
    subscribers: usize,
    rate: f64,
    events: u64,
) -> Row {
    let mut control = server.connect().await;
    let after = head(&mut control, id).await;
    let mut followers = Vec::with_capacity(subscribers);
    let mut ready = Vec::with_capacity(subscribers);
    match transport {
        Transport::Grpc => {
            let conns = connections(server, subscribers.div_ceil(STREAMS_PER_CONNECTION)).await;
            for i in 0..subscribers {
                let (tx, rx) = tokio::sync::oneshot::channel();
                let client = conns[i / STREAMS_PER_CONNECTION].clone();
                followers.push(tokio::spawn(follow(client, id.into(), after, 1, Some(tx))));
                ready.push(rx);
            }
        }
        Transport::GrpcWeb => {
            for _ in 0..subscribers {
                let (tx, rx) = tokio::sync::oneshot::channel();
                followers.push(tokio::spawn(follow_web(server.addr, id.into(), after, tx)));
                ready.push(rx);
            }
        }
    }
    for r in ready {
        r.await.expect("a subscriber failed before caught_up");
    }
    let (t0, cpu0, self0) = (
        std::time::Instant::now(),
        server.cpu_secs(),
        crate::server::proc_cpu_secs(std::process::id()),
    );
    send(&mut control, id, super::load_prompt(events, rate, 0)).await;
    let mut from_write = Vec::new();
    let mut from_commit = Vec::new();
    for f in followers {
        let seen: Seen = f.await.expect("subscriber");
        assert_eq!(
            seen.contents, events,
            "a subscriber missed content events ({} of {events})",
            seen.contents
        );
        from_write.extend_from_slice(&seen.from_write);
        from_commit.extend_from_slice(&seen.from_commit);
    }
    let secs = t0.elapsed().as_secs_f64();
    let server_cpu = server.cpu_secs() - cpu0;
    let client_cpu = crate::server::proc_cpu_secs(std::process::id()) - self0;
    Row {
        secs,
        server_cpu,
        client_cpu,
        transport,
        subscribers,
        rate,
        events,
        from_write: Latency::from_micros(from_write.clone()),
        from_commit: Latency::from_micros(from_commit.clone()),
        rss: server.rss_bytes(),
        peak_rss: server.peak_rss_bytes(),
        rounds: 1,
        samples: (from_write, from_commit),
    }
}

/// One grpc-web subscriber over its own HTTP/1.1 connection, until one
/// `turn_end`; checks seqs are gapless like [`super::follow`].
async fn follow_web(
    addr: SocketAddr,
    id: String,
    after_seq: u64,
    ready: tokio::sync::oneshot::Sender<()>,
) -> Seen {
    let stream = tokio::net::TcpStream::connect(addr)
        .await
        .expect("connect (grpc-web)");
    stream.set_nodelay(true).expect("nodelay");
    let io = hyper_util::rt::TokioIo::new(stream);
    let (mut sender, conn) = hyper::client::conn::http1::handshake(io)
        .await
        .expect("HTTP/1.1 handshake");
    tokio::spawn(conn);
    let msg = prost::Message::encode_to_vec(&pb::SubscribeRequest {
        session_id: id.clone(),
        after_seq,
        include_deltas: false,
    });
    let mut body = Vec::with_capacity(msg.len() + 5);
    body.push(0);
    body.extend_from_slice(&(msg.len() as u32).to_be_bytes());
    body.extend_from_slice(&msg);
    let req = http::Request::post("/agentharness.v1.SessionService/Subscribe")
        .header("host", addr.to_string())
        .header("content-type", "application/grpc-web+proto")
        .header("x-grpc-web", "1")
        .body(http_body_util::Full::new(bytes::Bytes::from(body)))
        .expect("request");
    let resp = sender.send_request(req).await.expect("grpc-web Subscribe");
    assert!(resp.status().is_success(), "grpc-web: {}", resp.status());
    let mut body = resp.into_body();
    let mut buf = BytesMut::new();
    let mut seen = Seen {
        head: after_seq,
        ..Default::default()
    };
    let mut ready = Some(ready);
    let mut live = false;
    loop {
        // Whole frames first: flag byte, u32 length, message.
        while buf.len() >= 5 {
            let len = u32::from_be_bytes([buf[1], buf[2], buf[3], buf[4]]) as usize;
            if buf.len() < 5 + len {
                break;
            }
            let flag = buf[0];
            buf.advance(5);
            let frame = buf.split_to(len);
            if flag & 0x80 != 0 {
                panic!(
                    "grpc-web Subscribe {id} ended: {}",
                    String::from_utf8_lossy(&frame)
                );
            }
            let msg: pb::SubscribeResponse =
                prost::Message::decode(frame.freeze()).expect("decode SubscribeResponse");
            match msg.kind {
                Some(Kind::Event(e)) if seen.record(&id, &e, live) => return seen,
                Some(Kind::CaughtUp(_)) => {
                    live = true;
                    if let Some(r) = ready.take() {
                        let _ = r.send(());
                    }
                }
                _ => {}
            }
        }
        match tokio::time::timeout(Duration::from_secs(120), body.frame()).await {
            Ok(Some(Ok(frame))) => {
                if let Ok(data) = frame.into_data() {
                    buf.extend_from_slice(&data);
                }
            }
            Ok(Some(Err(e))) => panic!("grpc-web Subscribe {id}: {e}"),
            Ok(None) => panic!("grpc-web Subscribe {id} closed after seq {}", seen.head),
            Err(_) => panic!("grpc-web Subscribe {id}: nothing for 120 s"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn turn(write_us: Vec<u32>, commit_us: Vec<u32>, rss: u64, peak_rss: u64) -> Row {
        Row {
            transport: Transport::Grpc,
            subscribers: 1,
            rate: 100.0,
            events: write_us.len() as u64,
            from_write: Latency::from_micros(write_us.clone()),
            from_commit: Latency::from_micros(commit_us.clone()),
            secs: 2.5,
            server_cpu: 0.25,
            client_cpu: 0.5,
            rss,
            peak_rss,
            rounds: 1,
            samples: (write_us, commit_us),
        }
    }

    #[test]
    fn pooled_turns_are_one_row_over_every_sample() {
        // Turn one is fast and turn two slow: the pooled median is neither
        // turn's own, nor the mean of theirs.
        let fast: Vec<u32> = (1..=100).map(|i| 500 + i).collect();
        let slow: Vec<u32> = (1..=300).map(|i| 900 + i).collect();
        let pooled = Row::pool(vec![
            turn(fast.clone(), fast.clone(), 10, 30),
            turn(slow.clone(), slow.clone(), 20, 25),
        ]);
        let want = Latency::from_micros([fast, slow].concat());
        assert_eq!((pooled.events, pooled.rounds), (400, 2));
        assert_eq!(pooled.from_write.n, 400);
        assert!(
            (pooled.from_write.p50 - want.p50).abs() < 1e-9,
            "{pooled:?}"
        );
        assert!((pooled.from_write.p50 - 1.0).abs() < 1e-9, "{pooled:?}");
        assert!(
            (pooled.from_commit.p99 - want.p99).abs() < 1e-9,
            "{pooled:?}"
        );
        assert!((pooled.secs - 5.0).abs() < 1e-9);
        assert!((pooled.server_cpu - 0.5).abs() < 1e-9);
        assert!((pooled.client_cpu - 1.0).abs() < 1e-9);
        // The memory of the last turn, the peak the highest of all.
        assert_eq!((pooled.rss, pooled.peak_rss), (20, 30));
    }

    #[test]
    #[should_panic(expected = "pooled turns of different rows")]
    fn turns_of_different_rows_are_not_pooled() {
        let mut other = turn(vec![1], vec![1], 0, 0);
        other.subscribers = 100;
        Row::pool(vec![turn(vec![1], vec![1], 0, 0), other]);
    }
}
