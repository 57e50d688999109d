//! Serving connections: the accept loop, the cap on open connections, and
//! each connection served by hyper in its own task with the timeouts that
//! keep a slow, idle or dead client from holding the server.
//!
//! - **Accept.** Every socket gets `TCP_NODELAY` ([`crate::listen::accept`]).
//!   A failed accept (out of file descriptors: EMFILE, ENFILE; ENOBUFS, ...)
//!   is counted and waits before the next try, 5 ms doubling up to 1 s, so
//!   the loop never spins while the process has no descriptor to give.
//! - **Cap.** At most [`ConnectionLimits::max_connections`]
//!   (`--max-connections`) connections are open, TLS handshakes included;
//!   one more is closed at once and counted.
//! - **TLS.** The handshake runs in the connection's task, bounded by
//!   [`HANDSHAKE_TIMEOUT`](crate::listen::HANDSHAKE_TIMEOUT); after it the
//!   connection is served like a plain one (so the idle timeout below closes
//!   one that then says nothing).
//! - **Per connection** (hyper, HTTP/1.1 and HTTP/2 on the same port):
//!   the HTTP/1.1 head must arrive within the header read timeout (hyper
//!   starts it whenever the connection waits for a head, so it also closes
//!   a keep-alive connection waiting for its next request); the head
//!   (HTTP/1.1 read buffer, HTTP/2 header list) is capped; HTTP/2 pings the
//!   peer and closes the connection when a ping is not answered in time. A
//!   connection with no request in flight (no open HTTP/2 stream, no
//!   HTTP/1.1 request being answered) for the idle timeout is closed
//!   gracefully (HTTP/2 GOAWAY), and dropped if it has not closed
//!   [`CLOSE_GRACE`] later. A request is in flight until its response body
//!   is done, so a Subscribe stream, which sends heartbeats and nothing
//!   else, keeps its connection open (gRPC and grpc-web alike).
//! - **Shutdown.** When the shutdown future resolves the loop stops
//!   accepting, every connection is closed gracefully (dropped if it has
//!   not closed [`CLOSE_GRACE`] later, so a peer that stopped reading
//!   cannot hold the shutdown), and [`serve`] returns once all of them have
//!   ended.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use http::{Request, Response};
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, watch};
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;
use tonic::body::Body;
use tower::ServiceExt as _;

use crate::tasks::Tasks;

/// What hyper hands every request to: the whole layered router.
pub type HttpService = tower::util::BoxCloneService<Request<Body>, Response<Body>, tower::BoxError>;

/// Default of `--max-connections`: under the usual soft limit of 1,024 file
/// descriptors, leaving room for the store and the CLI processes' pipes,
/// so the cap is reached before the process runs out of descriptors.
pub const DEFAULT_MAX_CONNECTIONS: usize = 512;
/// Longest wait for an HTTP/1.1 request head, counted from when the
/// connection starts waiting for it. A client writes its head at once; 15 s
/// covers a very slow link many times over, and a client trickling its
/// head a line at a time is cut off here.
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(15);
/// How long a connection may stay open with no request in flight. Clients
/// open a new connection when they need one (a gRPC channel reconnects by
/// itself after the GOAWAY), so a minute spares the handshakes of a busy
/// client without letting idle sockets pile up.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(60);
/// How often an HTTP/2 connection is pinged (as tonic's server did).
pub const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(30);
/// How long a ping may go unanswered before the connection is closed as
/// dead (hyper's and tonic's default).
pub const KEEPALIVE_TIMEOUT: Duration = Duration::from_secs(20);
/// Largest request head: the HTTP/1.1 read buffer while a head is read
/// (431 above it) and the HTTP/2 header list. Every client of this API
/// sends a few hundred bytes; 32 KiB leaves room for a browser's cookies.
pub const MAX_HEADER_BYTES: usize = 32 * 1024;
/// How long a connection asked to close (idle, or at shutdown) may take
/// to finish (a response being written, an HTTP/2 peer answering the
/// GOAWAY's ping) before it is dropped.
pub const CLOSE_GRACE: Duration = Duration::from_secs(10);
/// First wait after a failed accept; it doubles with every failure in a row.
const ACCEPT_BACKOFF_FIRST: Duration = Duration::from_millis(5);
/// Longest wait between accepts that keep failing: a freed descriptor is
/// used within a second.
const ACCEPT_BACKOFF_MAX: Duration = Duration::from_secs(1);
/// hyper's smallest HTTP/1.1 read buffer.
const MIN_H1_BUFFER: usize = 8 * 1024;

/// The connection limits. [`Default`] gives the documented values; tests
/// shorten the timeouts.
#[derive(Debug, Clone)]
pub struct ConnectionLimits {
    /// Most connections open at once (`--max-connections`).
    pub max_connections: usize,
    /// See [`HEADER_READ_TIMEOUT`].
    pub header_read_timeout: Duration,
    /// See [`IDLE_TIMEOUT`].
    pub idle_timeout: Duration,
    /// See [`KEEPALIVE_INTERVAL`].
    pub keepalive_interval: Duration,
    /// See [`KEEPALIVE_TIMEOUT`].
    pub keepalive_timeout: Duration,
    /// See [`MAX_HEADER_BYTES`] (at least 8 KiB, hyper's smallest buffer).
    pub max_header_bytes: usize,
    /// See [`CLOSE_GRACE`].
    pub close_grace: Duration,
}

impl ConnectionLimits {
    /// The cap the accept loop applies: `max_connections`, at least 1 and
    /// at most what a semaphore holds.
    pub fn cap(&self) -> usize {
        self.max_connections.clamp(1, u32::MAX as usize)
    }
}

impl Default for ConnectionLimits {
    fn default() -> Self {
        Self {
            max_connections: DEFAULT_MAX_CONNECTIONS,
            header_read_timeout: HEADER_READ_TIMEOUT,
            idle_timeout: IDLE_TIMEOUT,
            keepalive_interval: KEEPALIVE_INTERVAL,
            keepalive_timeout: KEEPALIVE_TIMEOUT,
            max_header_bytes: MAX_HEADER_BYTES,
            close_grace: CLOSE_GRACE,
        }
    }
}

/// Counters of the accept loop, read by [`crate::scrape`].
#[derive(Debug, Default)]
pub struct ConnectionStats {
    max: u64,
    open: AtomicU64,
    refused: AtomicU64,
    accept_errors: AtomicU64,
}

impl ConnectionStats {
    /// Counters for an accept loop under `limits`.
    pub fn new(limits: &ConnectionLimits) -> Self {
        Self {
            max: limits.cap() as u64,
            ..Self::default()
        }
    }

    /// Most connections open at once (`--max-connections`), as the accept
    /// loop applies it.
    pub fn max(&self) -> u64 {
        self.max
    }

    /// Connections open now (TLS handshakes included).
    pub fn open(&self) -> u64 {
        self.open.load(Ordering::Relaxed)
    }

    /// Connections closed at once because `--max-connections` were open.
    pub fn refused(&self) -> u64 {
        self.refused.load(Ordering::Relaxed)
    }

    /// Failed accepts (each followed by a wait).
    pub fn accept_errors(&self) -> u64 {
        self.accept_errors.load(Ordering::Relaxed)
    }
}

/// Accepts on `listener` (TLS with `tls`) and serves every connection with
/// `service` until `shutdown` resolves; then stops accepting, closes every
/// connection gracefully and returns when all have ended. Each connection
/// is a task of `tasks`.
pub async fn serve(
    listener: TcpListener,
    tls: Option<TlsAcceptor>,
    service: HttpService,
    limits: ConnectionLimits,
    stats: Arc<ConnectionStats>,
    tasks: &Tasks,
    shutdown: impl Future<Output = ()>,
) {
    let max = limits.cap();
    let slots = Arc::new(Semaphore::new(max));
    let closing = CancellationToken::new();
    let http = Arc::new(http_builder(&limits));
    let mut backoff = Backoff::default();
    let mut full = false;
    tokio::pin!(shutdown);
    loop {
        let accepted = tokio::select! {
            () = &mut shutdown => break,
            a = crate::listen::accept(&listener) => a,
        };
        let (sock, peer) = match accepted {
            Ok(a) => {
                backoff.reset();
                a
            }
            Err(e) => {
                stats.accept_errors.fetch_add(1, Ordering::Relaxed);
                let wait = backoff.next_wait();
                tracing::warn!(error = %e, retry_in = ?wait, "accept failed");
                tokio::select! {
                    () = &mut shutdown => break,
                    () = tokio::time::sleep(wait) => continue,
                }
            }
        };
        let Ok(permit) = slots.clone().try_acquire_owned() else {
            stats.refused.fetch_add(1, Ordering::Relaxed);
            if !full {
                tracing::warn!(max, "--max-connections open: closing new connections");
            }
            full = true;
            tracing::debug!(%peer, "connection refused: --max-connections open");
            drop(sock);
            continue;
        };
        full = false;
        let slot = Slot::take(permit, &stats);
        let conn = Connection {
            service: service.clone(),
            http: http.clone(),
            limits: limits.clone(),
            closing: closing.clone(),
            peer,
        };
        let tls = tls.clone();
        // Ends with its connection; `closing` (shutdown) closes it
        // gracefully, and this loop waits for its slot below.
        tasks.spawn("connection", async move {
            let _slot = slot;
            match tls {
                None => conn.serve(sock).await,
                Some(acceptor) => conn.handshake(acceptor, sock).await,
            }
        });
    }
    // New clients are refused by the kernel from here on.
    drop(listener);
    closing.cancel();
    // Every connection holds a slot until it has ended.
    let _ = slots.acquire_many(max as u32).await;
}

/// One of the `--max-connections` places, counted as open until dropped
/// with its connection's task.
struct Slot {
    _permit: OwnedSemaphorePermit,
    stats: Arc<ConnectionStats>,
}

impl Slot {
    fn take(permit: OwnedSemaphorePermit, stats: &Arc<ConnectionStats>) -> Self {
        stats.open.fetch_add(1, Ordering::Relaxed);
        Self {
            _permit: permit,
            stats: stats.clone(),
        }
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.stats.open.fetch_sub(1, Ordering::Relaxed);
    }
}

/// The HTTP/1.1 and HTTP/2 settings every connection is served with.
fn http_builder(limits: &ConnectionLimits) -> auto::Builder<TokioExecutor> {
    let mut http = auto::Builder::new(TokioExecutor::new());
    http.http1()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout)
        .max_buf_size(limits.max_header_bytes.max(MIN_H1_BUFFER));
    http.http2()
        .timer(TokioTimer::new())
        .keep_alive_interval(limits.keepalive_interval)
        .keep_alive_timeout(limits.keepalive_timeout)
        .max_header_list_size(u32::try_from(limits.max_header_bytes).unwrap_or(u32::MAX))
        // As tonic's server: the stream count is bounded by --max-streams.
        .max_concurrent_streams(None);
    http
}

/// One accepted connection and what serving it needs.
struct Connection {
    service: HttpService,
    http: Arc<auto::Builder<TokioExecutor>>,
    limits: ConnectionLimits,
    closing: CancellationToken,
    peer: SocketAddr,
}

impl Connection {
    /// The TLS handshake within its deadline, then [`Connection::serve`].
    async fn handshake(self, acceptor: TlsAcceptor, sock: tokio::net::TcpStream) {
        let peer = self.peer;
        let handshake =
            tokio::time::timeout(crate::listen::HANDSHAKE_TIMEOUT, acceptor.accept(sock));
        let stream = tokio::select! {
            r = handshake => r,
            () = self.closing.cancelled() => return,
        };
        match stream {
            Ok(Ok(stream)) => self.serve(stream).await,
            Ok(Err(e)) => tracing::debug!(%peer, error = %e, "TLS handshake failed"),
            Err(_) => tracing::debug!(%peer, "TLS handshake timed out"),
        }
    }

    /// Serves HTTP/1.1 or HTTP/2 on `io` until the peer closes, a timeout
    /// closes it, or the server shuts down.
    async fn serve<IO>(self, io: IO)
    where
        IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let (busy, in_flight) = watch::channel(0usize);
        let service = Tracked {
            inner: self.service,
            busy: Arc::new(busy),
            peer: self.peer,
        };
        let conn = self.http.serve_connection(TokioIo::new(io), service);
        tokio::pin!(conn);
        let idle = idle(in_flight, self.limits.idle_timeout);
        tokio::pin!(idle);
        let closing = self.closing.cancelled();
        tokio::pin!(closing);
        // Set once the connection is asked to close (idle, or the server
        // shutting down): how long it may take before it is dropped.
        let deadline = tokio::time::sleep(Duration::MAX);
        tokio::pin!(deadline);
        let mut asked_to_close = false;
        loop {
            tokio::select! {
                r = conn.as_mut() => {
                    if let Err(e) = r {
                        tracing::debug!(peer = %self.peer, error = %e, "connection ended");
                    }
                    return;
                }
                () = &mut idle, if !asked_to_close => {
                    tracing::debug!(peer = %self.peer, "idle connection closed");
                }
                () = &mut closing, if !asked_to_close => {}
                () = &mut deadline, if asked_to_close => {
                    tracing::debug!(peer = %self.peer, "connection dropped: did not close in time");
                    return;
                }
            }
            // The idle timer or the shutdown fired.
            conn.as_mut().graceful_shutdown();
            asked_to_close = true;
            let at = tokio::time::Instant::now() + self.limits.close_grace;
            deadline.as_mut().reset(at);
        }
    }
}

/// Resolves once nothing has been in flight for `after`.
async fn idle(mut in_flight: watch::Receiver<usize>, after: Duration) {
    loop {
        if in_flight.wait_for(|n| *n == 0).await.is_err() {
            return std::future::pending().await;
        }
        tokio::select! {
            () = tokio::time::sleep(after) => return,
            changed = in_flight.changed() => {
                if changed.is_err() {
                    return std::future::pending().await;
                }
            }
        }
    }
}

/// The service hyper calls for one connection: the router, counting the
/// requests in flight (each until its response body is done).
#[derive(Clone)]
struct Tracked {
    inner: HttpService,
    busy: Arc<watch::Sender<usize>>,
    /// Handed to every request as tonic's own server does, so handlers can
    /// key on the client's address (`Request::remote_addr`).
    peer: SocketAddr,
}

impl hyper::service::Service<Request<Incoming>> for Tracked {
    type Response = Response<TrackedBody>;
    type Error = tower::BoxError;
    type Future =
        Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send + 'static>>;

    fn call(&self, mut req: Request<Incoming>) -> Self::Future {
        req.extensions_mut()
            .insert(tonic::transport::server::TcpConnectInfo {
                local_addr: None,
                remote_addr: Some(self.peer),
            });
        let busy = Busy::enter(&self.busy);
        let inner = self.inner.clone();
        Box::pin(async move {
            let resp = inner.oneshot(req.map(Body::new)).await?;
            Ok(resp.map(|body| TrackedBody { body, _busy: busy }))
        })
    }
}

/// One request in flight, from the call until its response body is dropped.
struct Busy(Arc<watch::Sender<usize>>);

impl Busy {
    fn enter(count: &Arc<watch::Sender<usize>>) -> Self {
        count.send_modify(|n| *n += 1);
        Self(count.clone())
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.send_modify(|n| *n -= 1);
    }
}

/// A response body that keeps its request counted as in flight.
struct TrackedBody {
    body: Body,
    _busy: Busy,
}

impl http_body::Body for TrackedBody {
    type Data = bytes::Bytes;
    type Error = tonic::Status;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

/// The wait after each failed accept in a row: [`ACCEPT_BACKOFF_FIRST`],
/// doubling, at most [`ACCEPT_BACKOFF_MAX`].
#[derive(Debug, Default)]
struct Backoff {
    next: Option<Duration>,
}

impl Backoff {
    fn next_wait(&mut self) -> Duration {
        let wait = self.next.unwrap_or(ACCEPT_BACKOFF_FIRST);
        self.next = Some((wait * 2).min(ACCEPT_BACKOFF_MAX));
        wait
    }

    fn reset(&mut self) {
        self.next = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accept_backoff_doubles_up_to_a_second_and_resets() {
        let mut b = Backoff::default();
        let waits: Vec<u64> = (0..12).map(|_| b.next_wait().as_millis() as u64).collect();
        assert_eq!(
            waits,
            [5, 10, 20, 40, 80, 160, 320, 640, 1000, 1000, 1000, 1000]
        );
        b.reset();
        assert_eq!(b.next_wait(), ACCEPT_BACKOFF_FIRST);
    }

    /// A request in flight holds the idle timer off however long it runs;
    /// the timer counts from when the last one ended.
    #[tokio::test(start_paused = true)]
    async fn idle_counts_from_the_last_request_in_flight() {
        let (tx, rx) = watch::channel(0usize);
        let tx = Arc::new(tx);
        let start = tokio::time::Instant::now();
        let idle = tokio::spawn(idle(rx, Duration::from_secs(60)));
        tokio::time::sleep(Duration::from_secs(30)).await;
        let busy = Busy::enter(&tx);
        tokio::time::sleep(Duration::from_secs(600)).await;
        assert!(!idle.is_finished(), "a request is in flight");
        drop(busy);
        idle.await.unwrap();
        assert_eq!(start.elapsed(), Duration::from_secs(630 + 60));
    }
}
