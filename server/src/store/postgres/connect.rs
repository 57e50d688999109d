//! Reaching the database: the `--store-url` parsed (with `sslmode` read
//! here, since the driver knows only `disable|prefer|require`), the URL
//! redacted for every log line and error, TLS through rustls, and the pool.

use std::sync::Arc;
use std::time::Duration;

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod, Runtime};
use tokio_postgres_rustls::MakeRustlsConnect;
use tokio_rustls::rustls;

use super::super::StoreError;

/// Connections the pool keeps at most: the log's writer thread, the
/// readers on `spawn_blocking`, and room for both at once.
const POOL_SIZE: usize = 16;

/// How long a call waits to connect, or for a free connection, before it
/// fails: a database that is down must fail calls (the log then reports
/// NOT_SERVING), not hang them.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// A parsed `--store-url`.
#[derive(Clone)]
pub(super) struct StoreUrl {
    /// The driver's config (without `sslmode`, applied from `tls`).
    pub(super) config: tokio_postgres::Config,
    /// The connector: used only when `tls` asks for TLS.
    pub(super) connector: MakeRustlsConnect,
    /// The URL with its password left out: the only form ever shown.
    pub(super) redacted: String,
}

/// What the URL's `sslmode` asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tls {
    /// `disable`, or no `sslmode`: plain TCP (or a unix socket).
    Off,
    /// `prefer` or `require`: encrypted, the server's certificate not
    /// checked (what libpq does for these modes).
    Encrypt,
    /// `verify-ca` or `verify-full`: encrypted, the certificate checked
    /// against the web PKI roots (or `sslrootcert`) and the host name.
    Verify,
}

/// `url` with any password replaced by `***`: in the user info of a URL
/// (`postgres://user:secret@host`) and in a `password=` parameter (of a
/// URL's query or of a `key=value` connection string).
pub fn redact(url: &str) -> String {
    let mut out = url.to_owned();
    if let Some(scheme_end) = out.find("://") {
        let rest = scheme_end + 3;
        let authority_end = out[rest..].find(['/', '?']).map_or(out.len(), |i| rest + i);
        if let Some(at) = out[rest..authority_end].rfind('@') {
            let userinfo = &out[rest..rest + at];
            if let Some(colon) = userinfo.find(':') {
                out.replace_range(rest + colon + 1..rest + at, "***");
            }
        }
    }
    // `password=…` up to the next separator of either syntax.
    let mut from = 0;
    while let Some(i) = out[from..].to_ascii_lowercase().find("password=") {
        let start = from + i + "password=".len();
        let end = out[start..]
            .find(['&', ' ', '\t', '\n'])
            .map_or(out.len(), |j| start + j);
        out.replace_range(start..end, "***");
        from = start + 3;
    }
    out
}

impl StoreUrl {
    /// Parses `url` (`postgres://…` or `postgresql://…`); an error names
    /// the redacted URL, never the password.
    pub(super) fn parse(url: &str) -> Result<Self, StoreError> {
        let redacted = redact(url);
        let bad = |why: String| StoreError::Postgres(format!("bad store URL {redacted}: {why}"));
        if !(url.starts_with("postgres://") || url.starts_with("postgresql://")) {
            return Err(bad(
                "expected postgres://user:password@host:port/database".into()
            ));
        }
        let (url_without_tls, tls, root_cert) = take_tls_params(url).map_err(bad)?;
        let mut config: tokio_postgres::Config = url_without_tls
            .parse()
            .map_err(|e: tokio_postgres::Error| bad(e.to_string()))?;
        if config.get_hosts().is_empty() {
            return Err(bad("no host".into()));
        }
        config
            .ssl_mode(match tls {
                Tls::Off => tokio_postgres::config::SslMode::Disable,
                Tls::Encrypt | Tls::Verify => tokio_postgres::config::SslMode::Require,
            })
            .connect_timeout(CONNECT_TIMEOUT)
            .keepalives(true)
            .keepalives_idle(Duration::from_secs(30));
        if config.get_application_name().is_none() {
            config.application_name("agent-harness");
        }
        let connector = connector(tls, root_cert.as_deref()).map_err(bad)?;
        Ok(Self {
            config,
            connector,
            redacted,
        })
    }

    /// The first host and port, for messages.
    pub(super) fn host(&self) -> String {
        let host = match self.config.get_hosts().first() {
            Some(tokio_postgres::config::Host::Tcp(h)) => h.clone(),
            Some(tokio_postgres::config::Host::Unix(p)) => p.display().to_string(),
            None => String::new(),
        };
        match self.config.get_ports().first() {
            Some(port) => format!("{host}:{port}"),
            None => host,
        }
    }

    /// A pool of connections, made lazily: a connection that died (the
    /// database restarted) is dropped when it is next taken and a new one
    /// made, so the store reconnects by itself.
    pub(super) fn pool(&self) -> Result<Pool, StoreError> {
        let manager = Manager::from_config(
            self.config.clone(),
            self.connector.clone(),
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        Pool::builder(manager)
            .max_size(POOL_SIZE)
            .runtime(Runtime::Tokio1)
            .wait_timeout(Some(CONNECT_TIMEOUT * 2))
            .create_timeout(Some(CONNECT_TIMEOUT))
            .recycle_timeout(Some(CONNECT_TIMEOUT))
            .build()
            .map_err(|e| StoreError::Postgres(format!("{}: {e}", self.redacted)))
    }

    /// One connection outside the pool (migrations, the LISTEN feed), its
    /// driver task spawned on the current runtime.
    pub(super) async fn connect(&self) -> Result<tokio_postgres::Client, StoreError> {
        let (client, connection) = self
            .config
            .connect(self.connector.clone())
            .await
            .map_err(|e| self.unreachable(&e))?;
        tokio::spawn(async move {
            let _ = connection.await;
        });
        Ok(client)
    }

    /// The error for a failed connection attempt: host and cause, no password.
    pub(super) fn unreachable(&self, e: &tokio_postgres::Error) -> StoreError {
        StoreError::Postgres(format!(
            "cannot reach the database at {} ({}): {}",
            self.host(),
            self.redacted,
            super::describe(e)
        ))
    }
}

/// Splits `sslmode` and `sslrootcert` off the URL's query (the driver
/// rejects `verify-*`, and reads no root file).
fn take_tls_params(url: &str) -> Result<(String, Tls, Option<String>), String> {
    let Some((base, query)) = url.split_once('?') else {
        return Ok((url.to_owned(), Tls::Off, None));
    };
    let mut kept = Vec::new();
    let (mut tls, mut root) = (Tls::Off, None);
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        match k {
            "sslmode" => {
                tls = match v {
                    "disable" => Tls::Off,
                    "prefer" | "require" | "allow" => Tls::Encrypt,
                    "verify-ca" | "verify-full" => Tls::Verify,
                    other => return Err(format!("unknown sslmode {other:?}")),
                }
            }
            "sslrootcert" => root = Some(v.to_owned()),
            _ => kept.push(pair),
        }
    }
    let url = if kept.is_empty() {
        base.to_owned()
    } else {
        format!("{base}?{}", kept.join("&"))
    };
    Ok((url, tls, root))
}

/// The rustls connector for `tls` (built even when TLS is off: the driver
/// then never calls it).
fn connector(tls: Tls, root_cert: Option<&str>) -> Result<MakeRustlsConnect, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?;
    let config = match tls {
        Tls::Off | Tls::Verify => {
            let mut roots = rustls::RootCertStore {
                roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
            };
            if let Some(path) = root_cert {
                use rustls::pki_types::CertificateDer;
                use rustls::pki_types::pem::PemObject;
                roots = rustls::RootCertStore::empty();
                for cert in CertificateDer::pem_file_iter(path)
                    .map_err(|e| format!("sslrootcert {path}: {e}"))?
                {
                    let cert = cert.map_err(|e| format!("sslrootcert {path}: {e}"))?;
                    roots
                        .add(cert)
                        .map_err(|e| format!("sslrootcert {path}: {e}"))?;
                }
            }
            builder.with_root_certificates(roots).with_no_client_auth()
        }
        Tls::Encrypt => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(NoVerify(provider)))
            .with_no_client_auth(),
    };
    Ok(MakeRustlsConnect::new(config))
}

/// `sslmode=require`: encryption without checking who answers, as libpq
/// does; `verify-full` is the mode that checks.
#[derive(Debug)]
struct NoVerify(Arc<rustls::crypto::CryptoProvider>);

impl rustls::client::danger::ServerCertVerifier for NoVerify {
    fn verify_server_cert(
        &self,
        _end_entity: &rustls::pki_types::CertificateDer<'_>,
        _intermediates: &[rustls::pki_types::CertificateDer<'_>],
        _server_name: &rustls::pki_types::ServerName<'_>,
        _ocsp_response: &[u8],
        _now: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_password_is_never_shown() {
        for (url, want) in [
            (
                "postgres://app:s3cret@db.example:5432/log?sslmode=require",
                "postgres://app:***@db.example:5432/log?sslmode=require",
            ),
            (
                "postgresql://app:p%40ss@h/log",
                "postgresql://app:***@h/log",
            ),
            (
                "postgres://app@h/log?password=s3cret&sslmode=disable",
                "postgres://app@h/log?password=***&sslmode=disable",
            ),
            ("postgres://h/log", "postgres://h/log"),
            (
                "host=h password=s3cret user=u",
                "host=h password=*** user=u",
            ),
        ] {
            assert_eq!(redact(url), want);
        }
    }

    #[test]
    fn parse_errors_name_the_url_without_its_password() {
        for url in [
            "mysql://u:s3cret@h/db",
            "postgres://u:s3cret@h/db?sslmode=sometimes",
            "postgres://u:s3cret@h:notaport/db",
        ] {
            let Err(e) = StoreUrl::parse(url) else {
                panic!("{url} parsed")
            };
            let e = e.to_string();
            assert!(!e.contains("s3cret"), "{e}");
            assert!(e.contains("u:***@h"), "{e}");
        }
        let ok = StoreUrl::parse("postgres://u:s3cret@db.example:6543/x?sslmode=verify-full")
            .expect("parses");
        assert_eq!(ok.host(), "db.example:6543");
        assert!(!ok.redacted.contains("s3cret"));
    }
}
