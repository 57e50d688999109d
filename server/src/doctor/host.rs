//! The host's checks: the data directory, the port, and the secret files
//! `serve` reads (the token, the secrets key, the TLS key pair). Nothing is
//! created or changed: a data dir that does not exist yet is judged by
//! the directory it would be created in.

use std::net::SocketAddr;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use super::Check;
use crate::config::ServeConfig;

/// Below this much free space the data dir fails: a commit that finds the
/// disk full turns the node NOT_SERVING.
const FREE_FAIL_BYTES: u64 = 100 * 1024 * 1024;
/// Below this much it warns.
const FREE_WARN_BYTES: u64 = 1024 * 1024 * 1024;

/// The data dir: a directory this user can write into (or create), with
/// room on its disk; a warning when group or others may enter it.
pub(super) fn data_dir(dir: &Path) -> Check {
    const WHAT: &str = "data dir";
    let shown = std::path::absolute(dir).unwrap_or_else(|_| dir.to_path_buf());
    let shown = shown.display();
    let fix = "choose another --data-dir, or give the server's user that directory";
    let (existing, note) = match std::fs::metadata(dir) {
        Ok(meta) if !meta.is_dir() => {
            return Check::fail(WHAT, format!("{shown} is not a directory: {fix}"));
        }
        Ok(meta) => {
            if let Err(e) = try_write(dir) {
                return Check::fail(
                    WHAT,
                    format!("{shown} is not writable by this user ({e}): {fix}"),
                );
            }
            let mode = meta.permissions().mode() & 0o777;
            let note = (mode & 0o077 != 0).then(|| {
                format!(
                    "group or others may enter it (mode {mode:o}): `chmod 700 {shown}` unless \
                     it is shared on purpose"
                )
            });
            (dir.to_path_buf(), note)
        }
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory
            ) =>
        {
            let Some(parent) = nearest_existing(dir) else {
                return Check::fail(WHAT, format!("{shown}: no existing parent directory"));
            };
            if !parent.is_dir() {
                return Check::fail(
                    WHAT,
                    format!(
                        "{shown} cannot be created: {} is not a directory: {fix}",
                        parent.display()
                    ),
                );
            }
            if let Err(e) = try_write(&parent) {
                return Check::fail(
                    WHAT,
                    format!(
                        "{shown} cannot be created: {} is not writable by this user ({e}): \
                         create it for the server's user (`mkdir -m 700 {shown}`, then \
                         `chown`), or {fix}",
                        parent.display()
                    ),
                );
            }
            (parent, None)
        }
        Err(e) => return Check::fail(WHAT, format!("{shown}: {e}: {fix}")),
    };
    let created = if existing.as_path() == dir {
        ""
    } else {
        ", created 0700 by serve"
    };
    let free = match nix::sys::statvfs::statvfs(&existing) {
        Ok(s) => s.blocks_available().saturating_mul(s.fragment_size()),
        Err(e) => return Check::warn(WHAT, format!("{shown}: free space unknown ({e})")),
    };
    let room = format!("{} free", bytes(free));
    if free < FREE_FAIL_BYTES {
        return Check::fail(
            WHAT,
            format!("{shown}: only {room}: free space on its disk, or choose another --data-dir"),
        );
    }
    if free < FREE_WARN_BYTES {
        return Check::warn(
            WHAT,
            format!("{shown}: only {room}: the log stops taking events when the disk fills"),
        );
    }
    match note {
        Some(note) => Check::warn(WHAT, format!("{shown}, {room}: {note}")),
        None => Check::ok(WHAT, format!("{shown}{created}, writable, {room}")),
    }
}

/// Creates and removes a file in `dir`: the only sure answer, whatever the
/// mode bits, ACLs, a read-only mount or being root say.
fn try_write(dir: &Path) -> std::io::Result<()> {
    let probe = dir.join(format!(".agent-harness-doctor.{}", std::process::id()));
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&probe)?;
    std::fs::remove_file(&probe)
}

/// The closest ancestor of `dir` (absolute) that exists.
fn nearest_existing(dir: &Path) -> Option<std::path::PathBuf> {
    let abs = std::path::absolute(dir).ok()?;
    abs.ancestors()
        .skip(1)
        .find(|p| p.symlink_metadata().is_ok())
        .map(Path::to_path_buf)
}

/// `n` bytes in the largest unit that keeps a whole number in front.
fn bytes(n: u64) -> String {
    const GIB: u64 = 1 << 30;
    const MIB: u64 = 1 << 20;
    if n >= GIB {
        format!("{:.1} GiB", n as f64 / GIB as f64)
    } else {
        format!("{} MiB", n / MIB)
    }
}

/// `--listen`: bound and released at once, as `serve` would bind it.
pub(super) fn port(addr: SocketAddr) -> Check {
    const WHAT: &str = "port";
    match std::net::TcpListener::bind(addr) {
        Ok(_) => Check::ok(WHAT, format!("{addr} is free")),
        Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => Check::fail(
            WHAT,
            format!(
                "{addr} is in use: another process listens there (a server already \
                 running? `ss -ltnp 'sport = :{}'` names it): stop it, or choose another \
                 --listen",
                addr.port()
            ),
        ),
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => Check::fail(
            WHAT,
            format!(
                "{addr}: not permitted ({e}): ports below 1024 need CAP_NET_BIND_SERVICE \
                 (`AmbientCapabilities=CAP_NET_BIND_SERVICE` in a systemd unit); or choose \
                 a port from 1024 with --listen"
            ),
        ),
        Err(e) if e.kind() == std::io::ErrorKind::AddrNotAvailable => Check::fail(
            WHAT,
            format!(
                "{addr}: no interface of this machine has that address ({e}): use one of its \
                 addresses, 0.0.0.0 (every IPv4 interface) or 127.0.0.1 with --listen"
            ),
        ),
        Err(e) => Check::fail(WHAT, format!("{addr}: {e}: choose another --listen")),
    }
}

/// `--auth-token-file`: readable, the owner's alone, not empty; without
/// one, only loopback clients can be served.
pub(super) fn token_file(config: &ServeConfig) -> Check {
    const WHAT: &str = "token file";
    let Some(path) = &config.auth_token_file else {
        return if config.listen.ip().is_loopback() {
            Check::ok(
                WHAT,
                "none: every RPC is accepted, from this machine only (loopback --listen); \
                 `agent-harness token --out FILE` and --auth-token-file FILE before serving \
                 others",
            )
        } else {
            Check::fail(
                WHAT,
                format!(
                    "none, and --listen {} is not loopback: write one with `agent-harness \
                     token --out FILE` and pass --auth-token-file FILE",
                    config.listen
                ),
            )
        };
    };
    match crate::auth::load_token(path) {
        Ok(_) => Check::ok(
            WHAT,
            format!("{}: the owner's alone, not empty", path.display()),
        ),
        Err(e) => Check::fail(WHAT, e.to_string()),
    }
}

/// `--secrets-key-file`, or the default key in the data dir once written.
pub(super) fn secrets_key(config: &ServeConfig) -> Option<Check> {
    const WHAT: &str = "secrets key";
    let (path, named) = match &config.secrets_key_file {
        Some(path) => (path.clone(), true),
        None => (
            config.data_dir.join(crate::secrets::DEFAULT_KEY_FILE),
            false,
        ),
    };
    if !named && !path.exists() {
        return None;
    }
    Some(match crate::secrets::SecretsKey::load(&path) {
        Ok(_) => Check::ok(WHAT, format!("{}: the owner's alone", path.display())),
        Err(e) if named => Check::fail(WHAT, e.to_string()),
        Err(e) => Check::fail(
            WHAT,
            format!(
                "{e} (the default key; without it the env values of stored runs cannot be \
                 opened again)"
            ),
        ),
    })
}

/// `--tls-cert` and `--tls-key`: they load as `serve` loads them.
pub(super) fn tls(config: &ServeConfig) -> Option<Check> {
    let (Some(cert), Some(key)) = (&config.tls_cert, &config.tls_key) else {
        return None;
    };
    Some(match crate::listen::tls_acceptor(cert, key) {
        Ok(_) => Check::ok("TLS", format!("{} with {}", cert.display(), key.display())),
        Err(e) => Check::fail("TLS", e.to_string()),
    })
}
