//! The ceiling of a replay over gRPC on this machine: the very messages a
//! replay of our server sent, served again by a gRPC server that holds
//! them in memory, encoded, and does nothing else (no store, no checks, no
//! log), to the same lean subscriber on the same loopback.
//!
//! What it reaches is what any gRPC server of these messages could reach
//! here with this client: tonic and hyper on both ends, the socket, and the
//! subscriber's receive path, on the two cores the server and the tool
//! share. Set against SQLite reading the same rows in its own process, it
//! says how much of the gap is the store path and how much is gRPC.
//!
//! The ceiling server runs in a process of its own (this binary, started
//! with [`SERVE_ENV`] set), as our server does, so the CPU of each side is
//! counted apart. It first reads the messages from our server with a
//! Subscribe from seq 0 (not timed), then listens.

use std::convert::Infallible;
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use agent_harness_protocol::pb;
use agent_harness_server::wire::codec::{WireCodec, WireMessage};
use bytes::{BufMut, Bytes};
use futures::future::BoxFuture;
use prost::Message;
use tonic::Status;
use tonic::body::Body;
use tonic::server::{Grpc, NamedService, ServerStreamingService};

use super::{Stream, lean};
use crate::server::{Conn, Server};
use crate::stats::Rate;

/// Set to `addr session_id parent_pid` in the environment of this binary,
/// it serves the ceiling instead of running the tool (see [`serve_main`]).
pub const SERVE_ENV: &str = "AGENT_HARNESS_LOAD_CEILING";

const SUBSCRIBE: &str = "/agentharness.v1.SessionService/Subscribe";

/// The ceiling server, a child process; killed on drop.
pub struct Ceiling {
    child: Child,
    addr: SocketAddr,
    /// Messages it holds (through `caught_up`).
    pub messages: usize,
    /// Their bytes.
    pub bytes: usize,
}

impl Ceiling {
    /// Starts the ceiling server on the messages of a Subscribe from 0 of
    /// `id` on `server`.
    pub fn start(server: &Server, id: &str) -> Self {
        let exe = std::env::current_exe().expect("this binary's path");
        let mut child = Command::new(exe)
            .env(
                SERVE_ENV,
                format!("{} {id} {}", server.addr, std::process::id()),
            )
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start the ceiling server");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("stdout"))
            .read_line(&mut line)
            .expect("the ceiling server's address");
        let mut words = line.split_whitespace();
        let (addr, messages, bytes) = (
            words.next().and_then(|w| w.parse().ok()),
            words.next().and_then(|w| w.parse().ok()),
            words.next().and_then(|w| w.parse().ok()),
        );
        let (Some(addr), Some(messages), Some(bytes)) = (addr, messages, bytes) else {
            panic!("the ceiling server said {line:?}, not `addr messages bytes`");
        };
        Self {
            child,
            addr,
            messages,
            bytes,
        }
    }

    /// The ceiling server's CPU seconds so far.
    pub fn cpu_secs(&self) -> f64 {
        crate::server::proc_cpu_secs(self.child.id())
    }
}

impl Drop for Ceiling {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One replay from the ceiling server: events over wall time, its CPU and
/// this tool's meanwhile.
pub async fn measure(ceiling: &Ceiling, id: &str, head: u64) -> super::replay::Measured {
    let c = Conn::at(ceiling.addr).await;
    let me = std::process::id();
    let (cpu0, self0) = (ceiling.cpu_secs(), crate::server::proc_cpu_secs(me));
    let t0 = Instant::now();
    let last = super::replay::read_to_caught_up(&c, id).await;
    let secs = t0.elapsed().as_secs_f64();
    assert_eq!(last, head, "the ceiling replay stopped short of the head");
    super::replay::Measured {
        rate: Rate { events: last, secs },
        server_cpu: ceiling.cpu_secs() - cpu0,
        client_cpu: crate::server::proc_cpu_secs(me) - self0,
    }
}

/// The ceiling server's process: reads every message of a Subscribe from
/// 0 of the session named in [`SERVE_ENV`] (through `caught_up`), listens
/// on a loopback port, prints `addr messages bytes` and serves them to
/// every Subscribe until killed, or until the tool that started it ends,
/// however it ends (`PR_SET_PDEATHSIG`): nothing else would stop it.
pub fn serve_main(spec: &str) -> ! {
    let (addr, id, parent) = parse_spec(spec).unwrap_or_else(|e| panic!("{e}"));
    nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL).expect("PR_SET_PDEATHSIG");
    // The parent may have ended before the line above: then it is not ours.
    if nix::unistd::getppid().as_raw() != parent {
        std::process::exit(1);
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async move {
        let frames = Arc::new(collect(addr, &id).await);
        let bytes: usize = frames.iter().map(Bytes::len).sum();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let local = listener.local_addr().expect("local addr");
        println!("{local} {} {bytes}", frames.len());
        tonic::transport::Server::builder()
            .tcp_nodelay(true)
            .add_service(Routes { frames })
            .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener))
            .await
            .expect("serve");
    });
    std::process::exit(0)
}

/// Every message of a Subscribe from 0, through `caught_up`, as sent.
async fn collect(addr: SocketAddr, id: &str) -> Vec<Bytes> {
    let c = Conn::at(addr).await;
    let mut stream = Stream::open(
        &c,
        pb::SubscribeRequest {
            session_id: id.into(),
            after_seq: 0,
            include_deltas: false,
        },
    )
    .await
    .expect("Subscribe for the ceiling");
    let mut frames = Vec::new();
    loop {
        let bytes = match stream.next().await {
            Some(Ok(super::Received::Raw(bytes))) => bytes,
            Some(Ok(super::Received::Full(m))) => Bytes::from(m.encode_to_vec()),
            Some(Err(e)) => panic!("ceiling: {e}"),
            None => panic!("ceiling: the stream ended before caught_up"),
        };
        let done = matches!(lean::parse(&bytes), Ok(lean::Msg::CaughtUp));
        frames.push(bytes);
        if done {
            return frames;
        }
    }
}

/// Serves Subscribe from memory; any other path is UNIMPLEMENTED.
#[derive(Clone)]
struct Routes {
    frames: Arc<Vec<Bytes>>,
}

impl NamedService for Routes {
    const NAME: &'static str = "agentharness.v1.SessionService";
}

impl tower::Service<http::Request<Body>> for Routes {
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = BoxFuture<'static, Result<Self::Response, Infallible>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<Body>) -> Self::Future {
        if req.uri().path() != SUBSCRIBE {
            return Box::pin(async { Ok(Status::unimplemented("ceiling").into_http()) });
        }
        let method = Subscribe(self.frames.clone());
        Box::pin(async move {
            let mut grpc = Grpc::new(WireCodec::<Held, pb::SubscribeRequest>::default())
                .apply_max_message_size_config(None, Some(crate::server::MAX_MESSAGE_BYTES));
            Ok(grpc.server_streaming(method, req).await)
        })
    }
}

struct Subscribe(Arc<Vec<Bytes>>);

impl ServerStreamingService<pb::SubscribeRequest> for Subscribe {
    type Response = Held;
    type ResponseStream = futures::stream::BoxStream<'static, Result<Held, Status>>;
    type Future = BoxFuture<'static, Result<tonic::Response<Self::ResponseStream>, Status>>;

    fn call(&mut self, _request: tonic::Request<pb::SubscribeRequest>) -> Self::Future {
        let frames = self.0.clone();
        Box::pin(async move {
            // Each message is a reference to the held bytes, as our
            // server's are to a stored row's copy.
            let n = frames.len();
            let stream = futures::stream::iter((0..n).map(move |i| Ok(Held(frames[i].clone()))));
            Ok(tonic::Response::new(
                Box::pin(stream) as futures::stream::BoxStream<'static, _>
            ))
        })
    }
}

/// A held message, written by our server's own Subscribe codec (the
/// request decoded as the generated server decodes it, the response copied
/// once into tonic's buffer, as an event's stored bytes are).
struct Held(Bytes);

impl WireMessage for Held {
    fn encoded_len(&self) -> usize {
        self.0.len()
    }

    fn encode_to(&self, buf: &mut impl BufMut) {
        buf.put_slice(&self.0);
    }
}

/// `addr session_id parent_pid`, as [`Ceiling::start`] writes it.
fn parse_spec(spec: &str) -> Result<(SocketAddr, String, i32), String> {
    let want = || format!("{SERVE_ENV}={spec:?}: want `addr session_id parent_pid`");
    let words: Vec<&str> = spec.split_whitespace().collect();
    let [addr, id, parent] = words[..] else {
        return Err(want());
    };
    Ok((
        addr.parse().map_err(|_| want())?,
        id.to_owned(),
        parent.parse().map_err(|_| want())?,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spec_is_three_words_and_anything_else_is_refused() {
        assert_eq!(
            parse_spec("127.0.0.1:5 replay 42"),
            Ok(("127.0.0.1:5".parse().unwrap(), "replay".to_owned(), 42))
        );
        for bad in [
            "",
            "127.0.0.1:5 replay",
            "127.0.0.1:5 replay 42 more",
            "localhost:5 replay 42",
            "127.0.0.1:5 replay -",
            "127.0.0.1:5 replay 99999999999",
        ] {
            let e = parse_spec(bad).expect_err(bad);
            assert!(e.contains("want `addr session_id parent_pid`"), "{e}");
        }
    }
}
