//! Replay over gRPC: one Subscribe from seq 0 of a long log, counted to
//! `caught_up`. Cold: a freshly started server (nothing resident, redb's
//! cache empty) after the OS page cache was dropped where allowed; warm:
//! the same again on that server.

use std::time::Instant;

use agent_harness_protocol::pb;

use super::{Stream, follow, lean, start};
use crate::server::{Conn, Server};
use crate::stats::Rate;

/// Writes a log of about `n` events in one session (one turn of `n`
/// lines); returns its head seq and how long it took to reach a
/// subscriber (the one-session throughput of a long turn).
pub async fn build(server: &Server, id: &str, n: u64) -> (u64, Rate) {
    let mut c = server.connect().await;
    let t0 = Instant::now();
    let follower = tokio::spawn(follow(c.clone(), id.to_string(), 0, 1, None));
    start(&mut c, id, n, 0.0).await;
    let seen = follower.await.expect("follower");
    let secs = t0.elapsed().as_secs_f64();
    (
        seen.head,
        Rate {
            events: seen.events,
            secs,
        },
    )
}

/// One replay's figures.
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct Measured {
    /// Events over wall time.
    pub rate: Rate,
    /// Server CPU seconds meanwhile.
    pub server_cpu: f64,
    /// This tool's CPU seconds meanwhile (decoding).
    pub client_cpu: f64,
}

/// One Subscribe from 0 to `caught_up`, checking every seq arrives once,
/// in order, up to `head`.
pub async fn measure(server: &Server, id: &str, head: u64) -> Measured {
    let c = server.connect().await;
    let me = std::process::id();
    let (cpu0, self0) = (server.cpu_secs(), crate::server::proc_cpu_secs(me));
    let t0 = Instant::now();
    let last = read_to_caught_up(&c, id).await;
    let secs = t0.elapsed().as_secs_f64();
    assert_eq!(last, head, "replay stopped short of the head");
    Measured {
        rate: Rate { events: last, secs },
        server_cpu: server.cpu_secs() - cpu0,
        client_cpu: crate::server::proc_cpu_secs(me) - self0,
    }
}

/// One Subscribe from 0 on `c`, read to `caught_up`, checking every seq
/// arrives once and in order; the last seq.
pub async fn read_to_caught_up(c: &Conn, id: &str) -> u64 {
    let mut stream = Stream::open(
        c,
        pb::SubscribeRequest {
            session_id: id.into(),
            after_seq: 0,
            include_deltas: false,
        },
    )
    .await
    .expect("Subscribe for replay");
    let mut last = 0;
    loop {
        let received = match stream.next().await {
            Some(Ok(m)) => m,
            Some(Err(e)) => panic!("replay: {e}"),
            None => panic!("replay stream ended at seq {last}"),
        };
        let seq = match received.read(id) {
            lean::Msg::Event(e) => e.seq,
            lean::Msg::CaughtUp => break,
            lean::Msg::Replay { reset } => {
                assert!(!reset, "replay was reset: raise --max-replay");
                continue;
            }
            lean::Msg::Other => continue,
        };
        assert_eq!(seq, last + 1, "replay gap after seq {last}");
        last = seq;
    }
    last
}
