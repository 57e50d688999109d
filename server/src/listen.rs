//! Accepting connections: `TCP_NODELAY` on every socket, and TLS when
//! configured.
//!
//! The server hands tonic its own stream of connections (tests bind port 0
//! first), so tonic's `tcp_nodelay` never applies; without it Nagle's
//! algorithm meets delayed ACKs and every small streamed frame waits up to
//! 40 ms. TLS is done here rather than by tonic's `tls_config`, because
//! tonic offers only `h2` in ALPN, and browsers or tools speaking grpc-web
//! over HTTP/1.1 need `http/1.1` too. Each handshake runs in its own task
//! with a deadline, so a client that connects and says nothing never holds
//! up the accept loop.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use futures::Stream;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::server::TlsStream;
use tokio_stream::wrappers::ReceiverStream;
use tokio_util::sync::CancellationToken;

use crate::error::{Error, Result};

/// Longest a TLS handshake may take before the connection is dropped.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// Handshakes finished but not yet taken by the server.
const ACCEPTED_QUEUE: usize = 64;

/// A server TLS configuration from PEM files: the certificate chain and
/// its private key (PKCS#8, PKCS#1 or SEC1). ALPN offers `h2` and
/// `http/1.1`.
pub fn tls_acceptor(cert: &Path, key: &Path) -> Result<TlsAcceptor> {
    let bad = |what: &str, path: &Path, e: &dyn std::fmt::Display| {
        Error::Config(format!("{what} {}: {e}", path.display()))
    };
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
        .map_err(|e| bad("cannot read --tls-cert", cert, &e))?
        .collect::<std::result::Result<_, _>>()
        .map_err(|e| bad("invalid PEM in --tls-cert", cert, &e))?;
    if certs.is_empty() {
        return Err(bad("no certificate in --tls-cert", cert, &"empty"));
    }
    let key =
        PrivateKeyDer::from_pem_file(key).map_err(|e| bad("cannot read --tls-key", key, &e))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| Error::Internal(format!("TLS protocol versions: {e}")))?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| Error::Config(format!("--tls-cert and --tls-key do not fit: {e}")))?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}

/// Plain connections with `TCP_NODELAY` set. Ends when `stop` is cancelled.
pub fn plain(
    listener: TcpListener,
    stop: CancellationToken,
) -> impl Stream<Item = std::io::Result<TcpStream>> + Send + 'static {
    futures::stream::unfold((listener, stop), |(listener, stop)| async move {
        let accepted = tokio::select! {
            a = listener.accept() => a,
            () = stop.cancelled() => return None,
        };
        let item = accepted.map(|(sock, peer)| {
            nodelay(&sock, peer);
            sock
        });
        Some((item, (listener, stop)))
    })
}

/// TLS connections: accepted with `TCP_NODELAY`, each handshake in its own
/// task bounded by [`HANDSHAKE_TIMEOUT`]; failed handshakes are logged and
/// dropped. The accept task ends when `stop` is cancelled.
pub fn tls(
    listener: TcpListener,
    acceptor: TlsAcceptor,
    stop: CancellationToken,
) -> impl Stream<Item = std::io::Result<TlsStream<TcpStream>>> + Send + 'static {
    let (tx, rx) = mpsc::channel(ACCEPTED_QUEUE);
    tokio::spawn(async move {
        loop {
            let (sock, peer) = tokio::select! {
                a = listener.accept() => match a {
                    Ok(a) => a,
                    Err(e) => {
                        // Out of file descriptors and the like: back off a little.
                        tracing::warn!(error = %e, "accept failed");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                },
                () = stop.cancelled() => return,
                () = tx.closed() => return,
            };
            nodelay(&sock, peer);
            let (acceptor, tx) = (acceptor.clone(), tx.clone());
            tokio::spawn(async move {
                match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(sock)).await {
                    Ok(Ok(stream)) => {
                        let _ = tx.send(Ok(stream)).await;
                    }
                    Ok(Err(e)) => tracing::debug!(%peer, error = %e, "TLS handshake failed"),
                    Err(_) => tracing::debug!(%peer, "TLS handshake timed out"),
                }
            });
        }
    });
    ReceiverStream::new(rx)
}

fn nodelay(sock: &TcpStream, peer: std::net::SocketAddr) {
    if let Err(e) = sock.set_nodelay(true) {
        tracing::debug!(%peer, error = %e, "cannot set TCP_NODELAY");
    }
}

#[cfg(test)]
mod tests {
    use futures::StreamExt;

    use super::*;

    /// Without TCP_NODELAY every small streamed frame can wait up to 40 ms
    /// (Nagle against delayed ACKs); the load tool's fan-out table shows it.
    #[tokio::test]
    async fn accepted_connections_have_nodelay() {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let stop = CancellationToken::new();
        let mut incoming = Box::pin(plain(listener, stop.clone()));
        let _client = TcpStream::connect(addr).await.expect("connect");
        let sock = incoming
            .next()
            .await
            .expect("a connection")
            .expect("accepted");
        assert!(sock.nodelay().expect("read TCP_NODELAY"));
        stop.cancel();
        assert!(incoming.next().await.is_none(), "the stream ends on stop");
    }
}
