//! Connections that cannot hold the server hostage, over raw sockets: the
//! idle timeout (HTTP/1.1, HTTP/2, after a TLS handshake) that spares a
//! Subscribe stream, the HTTP/1.1 header read timeout and head cap, the cap
//! on open connections, accept backoff when the process is out of file
//! descriptors (the real binary under a low `ulimit -n`), and strict Host
//! parsing. Short timeouts come from [`ConnectionLimits`]; every test waits
//! on the socket closing, bounded by [`WAIT`].

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use crate::support::server::*;
use crate::transport::{PAGE, grpc_frame, grpc_status, grpc_web_head, http1, self_signed};
use agent_harness_protocol::pb;
use agent_harness_protocol::pb::subscribe_response::Kind;
use agent_harness_server::ServeOptions;
use agent_harness_server::access::AccessPolicy;
use agent_harness_server::connections::ConnectionLimits;
use prost::Message;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tonic::Code;

/// A timeout the test waits for.
const SHORT: Duration = Duration::from_millis(200);
/// A timeout that must not be the one that fires (longer than [`WAIT`]).
const LONG: Duration = Duration::from_secs(60);

/// Default serve options with these connection limits.
fn limited(limits: ConnectionLimits) -> ServeOptions {
    ServeOptions {
        connections: limits,
        ..ServeOptions::default()
    }
}

/// Reads until the server closes the connection (EOF, reset or a TLS
/// error); returns what it sent. Panics if it is still open after [`WAIT`].
async fn until_closed(io: &mut (impl AsyncRead + Unpin)) -> Vec<u8> {
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    tokio::time::timeout(WAIT, async {
        loop {
            match io.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => out.extend_from_slice(&buf[..n]),
            }
        }
    })
    .await
    .expect("the server closes the connection");
    out
}

/// One HTTP/1.1 response read off a kept-alive connection: status, head
/// (lowercase) and body (by Content-Length).
async fn read_response(tcp: &mut TcpStream) -> (u16, String, String) {
    let mut raw = Vec::new();
    let mut byte = [0u8; 1];
    let head = tokio::time::timeout(WAIT, async {
        while !raw.ends_with(b"\r\n\r\n") {
            assert_eq!(tcp.read(&mut byte).await.unwrap(), 1, "closed mid-head");
            raw.push(byte[0]);
        }
        String::from_utf8(raw).unwrap().to_ascii_lowercase()
    })
    .await
    .expect("a response head in time");
    let status = head[9..12].parse().unwrap();
    let len: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .map_or(0, |v| v.trim().parse().unwrap());
    let mut body = vec![0u8; len];
    tokio::time::timeout(WAIT, tcp.read_exact(&mut body))
        .await
        .expect("a response body in time")
        .unwrap();
    (status, head, String::from_utf8(body).unwrap())
}

/// `GET path` on a kept-alive connection; its response.
async fn get_on(tcp: &mut TcpStream, addr: SocketAddr, path: &str) -> (u16, String, String) {
    let req = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\n\r\n");
    tcp.write_all(req.as_bytes()).await.unwrap();
    read_response(tcp).await
}

/// `head` on a fresh connection until served: the response, or empty when
/// the server closed (or reset) the connection unanswered.
async fn answer(addr: SocketAddr, head: &str) -> Vec<u8> {
    let Ok(mut tcp) = TcpStream::connect(addr).await else {
        return Vec::new();
    };
    if tcp.write_all(head.as_bytes()).await.is_err() {
        return Vec::new();
    }
    until_closed(&mut tcp).await
}

/// The value of one metric in a `/metrics` body.
fn metric(body: &str, name: &str) -> u64 {
    body.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
        .unwrap_or_else(|| panic!("{name} in\n{body}"))
        .parse()
        .unwrap()
}

#[tokio::test]
async fn an_idle_http1_connection_is_closed_after_the_idle_timeout() {
    let server = TestServer::serving(limited(ConnectionLimits {
        idle_timeout: SHORT,
        header_read_timeout: LONG,
        ..ConnectionLimits::default()
    }))
    .await;
    // Connects and says nothing.
    let mut silent = TcpStream::connect(server.addr).await.unwrap();
    assert!(until_closed(&mut silent).await.is_empty());
    // Kept alive after one answered request, then says nothing.
    let mut kept = TcpStream::connect(server.addr).await.unwrap();
    let (status, _, _) = get_on(&mut kept, server.addr, "/metrics").await;
    assert_eq!(status, 200);
    assert!(until_closed(&mut kept).await.is_empty());
}

#[tokio::test]
async fn a_head_trickled_a_line_at_a_time_is_cut_at_the_header_timeout() {
    let server = TestServer::serving(limited(ConnectionLimits {
        header_read_timeout: Duration::from_millis(300),
        idle_timeout: LONG,
        ..ConnectionLimits::default()
    }))
    .await;
    let mut tcp = TcpStream::connect(server.addr).await.unwrap();
    let start = format!("GET /metrics HTTP/1.1\r\nHost: {}\r\n", server.addr);
    tcp.write_all(start.as_bytes()).await.unwrap();
    let (mut rd, mut wr) = tcp.split();
    let mut every = tokio::time::interval(Duration::from_millis(50));
    let mut sent = 0;
    let mut buf = [0u8; 1024];
    tokio::time::timeout(WAIT, async {
        loop {
            tokio::select! {
                r = rd.read(&mut buf) => match r {
                    Ok(0) | Err(_) => return,
                    Ok(_) => {} // a 408, then the close
                },
                _ = every.tick() => {
                    sent += 1;
                    let line = format!("X-Slow-{sent}: still typing\r\n");
                    if wr.write_all(line.as_bytes()).await.is_err() {
                        return;
                    }
                }
            }
        }
    })
    .await
    .expect("the server closes a connection whose head never ends");
    assert!(
        sent >= 3,
        "the head kept coming until the close ({sent} lines)"
    );
}

#[tokio::test]
async fn a_head_over_the_cap_is_refused_and_the_connection_closed() {
    let cap = 16 * 1024;
    let server = TestServer::serving(limited(ConnectionLimits {
        max_header_bytes: cap,
        ..ConnectionLimits::default()
    }))
    .await;
    // Under the cap: served.
    let big = format!("X-Big: {}\r\n", "b".repeat(12 * 1024));
    let head = format!(
        "GET /metrics HTTP/1.1\r\nHost: {}\r\n{big}Connection: close\r\n\r\n",
        server.addr
    );
    let resp = String::from_utf8_lossy(&http1(server.addr, &head, &[]).await).into_owned();
    assert!(resp.starts_with("HTTP/1.1 200"), "{resp}");

    // A head that never ends: the server stops reading at the cap (431) and
    // closes, instead of buffering whatever comes.
    let mut tcp = TcpStream::connect(server.addr).await.unwrap();
    let (mut rd, mut wr) = tcp.split();
    let start = format!("GET /metrics HTTP/1.1\r\nHost: {}\r\n", server.addr);
    let line = format!("X-Pad: {}\r\n", "p".repeat(1000));
    let writing = async {
        wr.write_all(start.as_bytes()).await?;
        for _ in 0..(4 * cap / line.len()) {
            wr.write_all(line.as_bytes()).await?;
        }
        std::io::Result::Ok(())
    };
    let (_, got) = tokio::join!(writing, until_closed(&mut rd));
    let got = String::from_utf8_lossy(&got);
    assert!(
        got.is_empty() || got.starts_with("HTTP/1.1 431"),
        "431 or a bare close: {got}"
    );
}

#[tokio::test]
async fn connections_beyond_the_cap_are_closed_at_once_and_counted() {
    let server = TestServer::serving(limited(ConnectionLimits {
        max_connections: 2,
        ..ConnectionLimits::default()
    }))
    .await;
    let mut a = TcpStream::connect(server.addr).await.unwrap();
    assert_eq!(get_on(&mut a, server.addr, "/metrics").await.0, 200);
    let mut b = TcpStream::connect(server.addr).await.unwrap();
    assert_eq!(get_on(&mut b, server.addr, "/metrics").await.0, 200);

    let mut third = TcpStream::connect(server.addr).await.unwrap();
    assert!(until_closed(&mut third).await.is_empty(), "closed unserved");

    // The open ones keep working, and the metrics say what happened.
    let (status, _, body) = get_on(&mut a, server.addr, "/metrics").await;
    assert_eq!(status, 200);
    assert_eq!(metric(&body, "agent_harness_connections_open"), 2);
    assert_eq!(metric(&body, "agent_harness_connections_refused_total"), 1);

    // Closing one frees its slot once the server has seen it close.
    drop(b);
    let head = format!(
        "GET /metrics HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n",
        server.addr
    );
    tokio::time::timeout(WAIT, async {
        loop {
            let resp = answer(server.addr, &head).await;
            if resp.starts_with(b"HTTP/1.1 200") {
                return;
            }
            assert!(resp.is_empty(), "{}", String::from_utf8_lossy(&resp));
            tokio::task::yield_now().await;
        }
    })
    .await
    .expect("a slot is freed when a connection closes");
}

#[tokio::test]
async fn a_tls_connection_that_says_nothing_after_the_handshake_is_closed() {
    use tokio_rustls::rustls;
    let dir = tempfile::tempdir().unwrap();
    let (cert, key, pem) = self_signed(dir.path());
    let server = TestServer::serving(ServeOptions {
        tls: Some(agent_harness_server::listen::tls_acceptor(&cert, &key).unwrap()),
        connections: ConnectionLimits {
            idle_timeout: SHORT,
            header_read_timeout: LONG,
            ..ConnectionLimits::default()
        },
        ..ServeOptions::default()
    })
    .await;
    let mut roots = rustls::RootCertStore::empty();
    {
        use rustls::pki_types::pem::PemObject as _;
        for c in rustls::pki_types::CertificateDer::pem_slice_iter(pem.as_bytes()) {
            roots.add(c.unwrap()).unwrap();
        }
    }
    for alpn in [&b"h2"[..], b"http/1.1"] {
        let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots.clone())
            .with_no_client_auth();
        config.alpn_protocols = vec![alpn.to_vec()];
        let connector = tokio_rustls::TlsConnector::from(std::sync::Arc::new(config));
        let tcp = TcpStream::connect(server.addr).await.unwrap();
        let mut tls = connector
            .connect("localhost".try_into().unwrap(), tcp)
            .await
            .expect("the handshake completes");
        assert!(until_closed(&mut tls).await.is_empty(), "{alpn:?}");
    }
}

#[tokio::test]
async fn an_http2_connection_without_streams_is_closed_but_a_subscribe_stream_lives_on() {
    // Heartbeats come every 500 ms (the test server's), longer than the idle
    // timeout: only a request in flight keeps these connections open.
    let server = TestServer::serving(limited(ConnectionLimits {
        idle_timeout: SHORT,
        header_read_timeout: LONG,
        ..ConnectionLimits::default()
    }))
    .await;

    // HTTP/2 with no stream: GOAWAY, then closed. The client keeps its
    // request handle, so it is the server that ends the connection.
    let tcp = TcpStream::connect(server.addr).await.unwrap();
    let (requests, conn) = h2::client::handshake(tcp).await.unwrap();
    let ended = tokio::time::timeout(WAIT, conn).await;
    assert!(ended.is_ok(), "the server closes an idle HTTP/2 connection");
    drop(requests);

    // A gRPC Subscribe stream idle but for heartbeats stays open.
    let mut c = server.client().await;
    start(&mut c, "quiet", "hello").await.unwrap();
    wait_idle(&mut c, "quiet").await;
    let mut sub = Sub::open(&mut c, "quiet", 0).await;
    let mut heartbeats = 0;
    while heartbeats < 3 {
        let msg = sub.next().await.expect("the stream stays open");
        if matches!(msg.kind, Some(Kind::Heartbeat(_))) {
            heartbeats += 1;
        }
    }

    // A grpc-web Subscribe over HTTP/1.1 too.
    let req = pb::SubscribeRequest {
        session_id: "quiet".into(),
        after_seq: 0,
        include_deltas: false,
    }
    .encode_to_vec();
    let head = grpc_web_head(
        &server.addr.to_string(),
        PAGE,
        "agentharness.v1.SessionService/Subscribe",
        req.len(),
        "",
    )
    .replace("Connection: close\r\n", "");
    let mut tcp = TcpStream::connect(server.addr).await.unwrap();
    tcp.write_all(head.as_bytes()).await.unwrap();
    tcp.write_all(&grpc_frame(&req)).await.unwrap();
    let mut web = GrpcWebReader::default();
    let mut heartbeats = 0;
    while heartbeats < 3 {
        let msg = web.next(&mut tcp).await;
        if matches!(msg.kind, Some(Kind::Heartbeat(_))) {
            heartbeats += 1;
        }
    }
}

/// An idle HTTP/2 connection gets a GOAWAY and a ping; a peer that never
/// answers cannot keep it half-closed: it is dropped after the close grace
/// (the keep-alive pings, which would also end it, are off here).
#[tokio::test]
async fn an_idle_connection_that_does_not_finish_closing_is_dropped() {
    let server = TestServer::serving(limited(ConnectionLimits {
        idle_timeout: SHORT,
        close_grace: SHORT,
        keepalive_interval: LONG,
        header_read_timeout: LONG,
        ..ConnectionLimits::default()
    }))
    .await;
    let mut tcp = TcpStream::connect(server.addr).await.unwrap();
    // The client preface and an empty SETTINGS frame; then it reads
    // whatever comes and never answers.
    tcp.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\x04\0\0\0\0\0")
        .await
        .unwrap();
    let got = until_closed(&mut tcp).await;
    // The server's frames came: its SETTINGS first (type 4 on stream 0).
    assert_eq!(got.get(3), Some(&4), "{got:?}");
}

/// The same peer at shutdown: the server asks it to close, and drops it
/// after the close grace instead of waiting for it forever.
#[tokio::test]
async fn a_peer_that_never_answers_cannot_hold_the_shutdown() {
    let server = TestServer::serving(limited(ConnectionLimits {
        close_grace: SHORT,
        idle_timeout: LONG,
        keepalive_interval: LONG,
        header_read_timeout: LONG,
        ..ConnectionLimits::default()
    }))
    .await;
    let mut tcp = TcpStream::connect(server.addr).await.unwrap();
    tcp.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\x04\0\0\0\0\0")
        .await
        .unwrap();
    // Served: the server's SETTINGS arrive.
    let mut first = [0u8; 9];
    tokio::time::timeout(WAIT, tcp.read_exact(&mut first))
        .await
        .expect("the server's SETTINGS in time")
        .unwrap();
    assert_eq!(first[3], 4, "{first:?}");
    server.shutdown().await.unwrap();
    drop(tcp);
}

#[tokio::test]
async fn an_http2_peer_that_stops_answering_pings_is_dropped() {
    let server = TestServer::serving(limited(ConnectionLimits {
        keepalive_interval: Duration::from_millis(100),
        keepalive_timeout: SHORT,
        idle_timeout: LONG,
        header_read_timeout: LONG,
        ..ConnectionLimits::default()
    }))
    .await;
    let mut c = server.client().await;
    start(&mut c, "dead", "hello").await.unwrap();
    wait_idle(&mut c, "dead").await;

    // A Subscribe stream through a proxy that can play dead: it keeps both
    // sockets open but stops passing anything on, as a peer whose machine
    // vanished. The stream is in flight, so only the pings can end it.
    let proxy = DeadPeerProxy::start(server.addr).await;
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{}", proxy.addr))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut via = pb::session_service_client::SessionServiceClient::new(channel);
    let mut sub = Sub::open(&mut via, "dead", 0).await;
    // Pings are answered while the peer is alive: the stream outlives
    // several keep-alive rounds (heartbeats every 500 ms).
    let mut heartbeats = 0;
    while heartbeats < 2 {
        if matches!(sub.next().await.unwrap().kind, Some(Kind::Heartbeat(_))) {
            heartbeats += 1;
        }
    }
    proxy.play_dead.notify_one();
    tokio::time::timeout(WAIT, proxy.server_closed)
        .await
        .expect("the server drops a connection whose pings go unanswered")
        .unwrap();
}

/// A TCP proxy for one connection that can stop passing bytes on while
/// keeping both sockets open; it then reads (and drops) what the server
/// sends until the server closes.
struct DeadPeerProxy {
    addr: SocketAddr,
    play_dead: std::sync::Arc<tokio::sync::Notify>,
    server_closed: tokio::sync::oneshot::Receiver<()>,
}

impl DeadPeerProxy {
    async fn start(server: SocketAddr) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let play_dead = std::sync::Arc::new(tokio::sync::Notify::new());
        let (closed_tx, server_closed) = tokio::sync::oneshot::channel();
        let dead = play_dead.clone();
        tokio::spawn(async move {
            let (mut client, _) = listener.accept().await.unwrap();
            let mut upstream = TcpStream::connect(server).await.unwrap();
            let (mut c_rd, mut c_wr) = client.split();
            let (mut u_rd, mut u_wr) = upstream.split();
            let (mut from_c, mut from_u) = ([0u8; 8192], [0u8; 8192]);
            loop {
                tokio::select! {
                    () = dead.notified() => break,
                    r = c_rd.read(&mut from_c) => match r {
                        Ok(n) if n > 0 => u_wr.write_all(&from_c[..n]).await.unwrap(),
                        _ => return,
                    },
                    r = u_rd.read(&mut from_u) => match r {
                        Ok(n) if n > 0 => c_wr.write_all(&from_u[..n]).await.unwrap(),
                        _ => return,
                    },
                }
            }
            loop {
                match u_rd.read(&mut from_u).await {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {}
                }
            }
            let _ = closed_tx.send(());
            // The client side stays open (and silent) until the test ends.
            std::future::pending::<()>().await;
        });
        Self {
            addr,
            play_dead,
            server_closed,
        }
    }
}

/// Reads the messages of a grpc-web response (binary, chunked) off a raw
/// HTTP/1.1 connection.
#[derive(Default)]
struct GrpcWebReader {
    /// Bytes read and not yet parsed.
    raw: Vec<u8>,
    /// The head was read.
    head: bool,
    /// De-chunked body bytes not yet parsed into messages.
    body: Vec<u8>,
}

impl GrpcWebReader {
    /// The next message; panics if the connection ends or nothing comes
    /// within [`WAIT`].
    async fn next(&mut self, tcp: &mut TcpStream) -> pb::SubscribeResponse {
        loop {
            self.parse();
            if self.body.len() >= 5 {
                let len = u32::from_be_bytes(self.body[1..5].try_into().unwrap()) as usize;
                if self.body.len() >= 5 + len {
                    let frame: Vec<u8> = self.body.drain(..5 + len).collect();
                    assert_eq!(frame[0], 0, "a message, not trailers: {frame:?}");
                    return pb::SubscribeResponse::decode(&frame[5..]).unwrap();
                }
            }
            let mut buf = [0u8; 4096];
            let n = tokio::time::timeout(WAIT, tcp.read(&mut buf))
                .await
                .expect("more of the stream in time")
                .unwrap();
            assert!(n > 0, "the grpc-web stream stays open");
            self.raw.extend_from_slice(&buf[..n]);
        }
    }

    /// Moves the head out of `raw` and every complete chunk into `body`.
    fn parse(&mut self) {
        if !self.head {
            let Some(end) = self.raw.windows(4).position(|w| w == b"\r\n\r\n") else {
                return;
            };
            let head = String::from_utf8_lossy(&self.raw[..end]).to_ascii_lowercase();
            assert!(head.starts_with("http/1.1 200"), "{head}");
            assert!(head.contains("transfer-encoding: chunked"), "{head}");
            self.raw.drain(..end + 4);
            self.head = true;
        }
        while let Some(eol) = self.raw.windows(2).position(|w| w == b"\r\n") {
            let size = usize::from_str_radix(std::str::from_utf8(&self.raw[..eol]).unwrap(), 16)
                .expect("a chunk size");
            if self.raw.len() < eol + 2 + size + 2 {
                return;
            }
            self.body
                .extend_from_slice(&self.raw[eol + 2..eol + 2 + size]);
            self.raw.drain(..eol + 2 + size + 2);
        }
    }
}

/// The strict Host rules, through a server that accepts any host name
/// (a token and `--allowed-host '*'`), so that only the syntax can refuse.
#[tokio::test]
async fn a_host_that_is_not_host_and_port_is_refused() {
    let token = "t0ken";
    let server = TestServer::serving(ServeOptions {
        auth_token: Some(token.into()),
        access: AccessPolicy::new(&[], &["*".into()], true, None).unwrap(),
        ..ServeOptions::default()
    })
    .await;
    let addr = server.addr;
    let req = pb::ListSessionsRequest::default().encode_to_vec();
    let auth = format!("Authorization: Bearer {token}\r\n");
    let grpc_web_with_hosts = |hosts: &[String]| {
        let head = grpc_web_head(
            &hosts[0],
            PAGE,
            "agentharness.v1.SessionService/ListSessions",
            req.len(),
            &format!(
                "{auth}{}",
                hosts[1..]
                    .iter()
                    .map(|h| format!("Host: {h}\r\n"))
                    .collect::<String>()
            ),
        );
        let body = grpc_frame(&req);
        async move { String::from_utf8_lossy(&http1(addr, &head, &body).await).into_owned() }
    };
    let get_with_hosts = |hosts: &[String]| {
        let lines: String = hosts.iter().map(|h| format!("Host: {h}\r\n")).collect();
        let head = format!("GET /metrics HTTP/1.1\r\n{lines}{auth}Connection: close\r\n\r\n");
        async move { String::from_utf8_lossy(&http1(addr, &head, &[]).await).into_owned() }
    };

    let good = vec![addr.to_string()];
    assert_eq!(grpc_status(&grpc_web_with_hosts(&good).await), Some(0));
    assert!(get_with_hosts(&good).await.starts_with("HTTP/1.1 200"));
    for hosts in [
        vec![format!("{addr}@evil.example")],
        vec![addr.to_string(), addr.to_string()],
        vec![addr.to_string(), "evil.example".into()],
        vec![format!("{}/x", addr.ip())],
    ] {
        let resp = grpc_web_with_hosts(&hosts).await;
        assert_eq!(
            grpc_status(&resp),
            Some(Code::PermissionDenied as i32),
            "{hosts:?}: {resp}"
        );
        let resp = get_with_hosts(&hosts).await;
        assert!(resp.starts_with("HTTP/1.1 400"), "{hosts:?}: {resp}");
    }
    let resp = get_with_hosts(&[]).await;
    assert!(resp.starts_with("HTTP/1.1 400"), "no Host: {resp}");
}

/// One ListSessions call over HTTP/2 to `uri` (its authority becomes
/// `:authority`), with a `host` header when given; the `grpc-status` of the
/// answer (trailers-only or in the trailers).
async fn h2_list(addr: SocketAddr, uri: &str, host: Option<&str>, token: &str) -> Option<i32> {
    let tcp = TcpStream::connect(addr).await.unwrap();
    let (mut requests, conn) = h2::client::handshake(tcp).await.unwrap();
    tokio::spawn(conn);
    let mut req = http::Request::builder()
        .method("POST")
        .uri(uri)
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .header("authorization", format!("Bearer {token}"));
    if let Some(h) = host {
        req = req.header("host", h);
    }
    let (resp, mut body) = requests.send_request(req.body(()).unwrap(), false).unwrap();
    let msg = pb::ListSessionsRequest::default().encode_to_vec();
    body.send_data(grpc_frame(&msg).into(), true).unwrap();
    let resp = tokio::time::timeout(WAIT, resp)
        .await
        .expect("an answer in time")
        .unwrap();
    let status = |h: &http::HeaderMap| {
        h.get("grpc-status")
            .map(|v| v.to_str().unwrap().parse().unwrap())
    };
    if let Some(s) = status(resp.headers()) {
        return Some(s);
    }
    let mut stream = resp.into_body();
    while let Some(data) = stream.data().await {
        let data = data.unwrap();
        let _ = stream.flow_control().release_capacity(data.len());
    }
    let trailers = stream.trailers().await.unwrap().expect("trailers");
    status(&trailers)
}

#[tokio::test]
async fn an_http2_authority_that_is_not_host_and_port_is_refused() {
    let token = "t0ken";
    let server = TestServer::serving(ServeOptions {
        auth_token: Some(token.into()),
        access: AccessPolicy::new(&[], &["*".into()], true, None).unwrap(),
        ..ServeOptions::default()
    })
    .await;
    let addr = server.addr;
    let path = "agentharness.v1.SessionService/ListSessions";
    let denied = Some(Code::PermissionDenied as i32);
    assert_eq!(
        h2_list(addr, &format!("http://{addr}/{path}"), None, token).await,
        Some(0)
    );
    assert_eq!(
        h2_list(
            addr,
            &format!("http://{addr}@evil.example/{path}"),
            None,
            token
        )
        .await,
        denied
    );
    let other = Some("evil.example");
    assert_eq!(
        h2_list(addr, &format!("http://{addr}/{path}"), other, token).await,
        denied,
        "a host header that differs from :authority"
    );
}

/// A client's `grpc-timeout` still bounds a call, as under tonic's own
/// serve loop: a unary call whose message never arrives is answered
/// CANCELLED when the deadline passes.
#[tokio::test]
async fn a_call_past_its_grpc_timeout_is_cancelled() {
    let server = TestServer::start().await;
    let tcp = TcpStream::connect(server.addr).await.unwrap();
    let (mut requests, conn) = h2::client::handshake(tcp).await.unwrap();
    tokio::spawn(conn);
    let req = http::Request::builder()
        .method("POST")
        .uri(format!(
            "http://{}/agentharness.v1.SessionService/ListSessions",
            server.addr
        ))
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .header("grpc-timeout", "100m")
        .body(())
        .unwrap();
    // The headers go out; the message never does.
    let (resp, _body) = requests.send_request(req, false).unwrap();
    let resp = tokio::time::timeout(WAIT, resp)
        .await
        .expect("answered when the deadline passes")
        .unwrap();
    let status = resp.headers().get("grpc-status").map(|v| v.as_bytes());
    assert_eq!(status, Some(b"1".as_slice()), "{resp:?}");
}

/// The real binary with few file descriptors: once they run out, the
/// accept loop waits between tries (5 ms doubling up to 1 s) instead of
/// spinning, the connections it holds keep being served, and it accepts
/// again once descriptors are free.
#[tokio::test]
async fn out_of_file_descriptors_the_accept_loop_backs_off() {
    let dir = tempfile::tempdir().unwrap();
    let addr = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let cassette = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../cassettes/plain_turn.cassette.jsonl");
    let script = format!(
        "ulimit -n 40 && exec '{bin}' serve --listen {addr} --data-dir '{data}' \
         --adapter 'cassette:{cassette}' --max-connections 1000 --log error",
        bin = env!("CARGO_BIN_EXE_agent-harness"),
        data = dir.path().join("data").display(),
        cassette = cassette.display(),
    );
    let child = std::process::Command::new("sh")
        .args(["-c", &script])
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("sh runs");
    let _child = KillOnDrop(child);

    // The connection the test asks the metrics on, once the server listens.
    let mut control = tokio::time::timeout(WAIT, async {
        loop {
            if let Ok(tcp) = TcpStream::connect(addr).await {
                return tcp;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("the server listens");
    let accept_errors = |body: &str| metric(body, "agent_harness_accept_errors_total");
    let (status, _, body) = get_on(&mut control, addr, "/metrics").await;
    assert_eq!(status, 200);
    assert_eq!(accept_errors(&body), 0);

    // More connections than descriptors: the server takes what it can, the
    // rest wait in the listen backlog and every accept fails (EMFILE).
    let mut idle = Vec::new();
    for _ in 0..60 {
        idle.push(TcpStream::connect(addr).await.unwrap());
    }
    let since = Instant::now();
    let mut every = tokio::time::interval(Duration::from_millis(50));
    let (errors, elapsed) = tokio::time::timeout(WAIT, async {
        loop {
            every.tick().await;
            let (status, _, body) = get_on(&mut control, addr, "/metrics").await;
            assert_eq!(status, 200, "a held connection is still served");
            let errors = accept_errors(&body);
            if errors >= 8 {
                return (errors, since.elapsed());
            }
        }
    })
    .await
    .expect("accepts fail while descriptors are out");
    // Eight failures in a row wait 5+10+...+320 ms = 635 ms in between; a
    // loop retrying at once would have failed thousands of times by now.
    assert!(
        elapsed >= Duration::from_millis(600),
        "{errors} failed accepts within {elapsed:?}"
    );
    assert!(
        errors <= 10 + elapsed.as_secs(),
        "{errors} failed accepts within {elapsed:?}"
    );

    // Descriptors free again: a new client is served.
    drop(idle);
    let head = format!("GET /metrics HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    tokio::time::timeout(WAIT, async {
        loop {
            if answer(addr, &head).await.starts_with(b"HTTP/1.1 200") {
                return;
            }
            tokio::task::yield_now().await;
        }
    })
    .await
    .expect("new clients are served once descriptors are free");
}

/// Kills and reaps the child when the test ends, however it ends.
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
