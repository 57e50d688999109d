//! Accepting connections: `TCP_NODELAY` on every socket, and the TLS
//! configuration.
//!
//! Without `TCP_NODELAY` Nagle's algorithm meets delayed ACKs and every
//! small streamed frame waits up to 40 ms. ALPN offers `h2` and `http/1.1`:
//! browsers and tools speaking grpc-web over HTTP/1.1 need the latter. The
//! accept loop, and each handshake in its connection's task with a
//! deadline, are [`crate::connections`].

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};

use crate::error::{Error, Result};

/// Longest a TLS handshake may take before the connection is dropped.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

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

/// The next connection, with `TCP_NODELAY` set.
pub async fn accept(listener: &TcpListener) -> std::io::Result<(TcpStream, SocketAddr)> {
    let (sock, peer) = listener.accept().await?;
    nodelay(&sock, peer);
    Ok((sock, peer))
}

fn nodelay(sock: &TcpStream, peer: SocketAddr) {
    if let Err(e) = sock.set_nodelay(true) {
        tracing::debug!(%peer, error = %e, "cannot set TCP_NODELAY");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Without TCP_NODELAY every small streamed frame can wait up to 40 ms
    /// (Nagle against delayed ACKs); the load tool's fan-out table shows it.
    #[tokio::test]
    async fn accepted_connections_have_nodelay() {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let _client = TcpStream::connect(addr).await.expect("connect");
        let (sock, _) = accept(&listener).await.expect("accepted");
        assert!(sock.nodelay().expect("read TCP_NODELAY"));
    }
}
