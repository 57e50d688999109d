//! `agent-harness token`: a new random bearer token, written where only its
//! owner can read it, and how to pass it to the server and to each client.

use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::Path;

use rand::TryRngCore;

use crate::error::{Error, Result};

/// Bytes of randomness in a token (256 bits).
pub const TOKEN_BYTES: usize = 32;

/// A new token: 256 bits from the operating system's random source, hex.
pub fn generate() -> Result<String> {
    let mut bytes = [0u8; TOKEN_BYTES];
    rand::rngs::OsRng
        .try_fill_bytes(&mut bytes)
        .map_err(|e| Error::Internal(format!("no randomness from the OS: {e}")))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// Writes `token` to `path` with mode 0600: into a new file beside it first,
/// then renamed over `path`, so the token is never readable by others, not
/// even for a moment, and a reader never sees half a token.
pub fn write(path: &Path, token: &str) -> Result<()> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .ok_or_else(|| Error::invalid("--out", format!("{} is not a file name", path.display())))?;
    let tmp = dir.join(format!(
        ".{}.{}.tmp",
        name.to_string_lossy(),
        std::process::id()
    ));
    let io = |what: &str, e: std::io::Error| {
        Error::Config(format!("cannot {what} {}: {e}", path.display()))
    };
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&tmp)
        .map_err(|e| io("create a file beside", e))?;
    // The umask cannot widen 0600, but an inherited ACL default could; pin it.
    f.set_permissions(std::fs::Permissions::from_mode(0o600))
        .and_then(|()| f.write_all(format!("{token}\n").as_bytes()))
        .and_then(|()| f.sync_all())
        .and_then(|()| std::fs::rename(&tmp, path))
        .map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            io("write", e)
        })
}

/// The `token` subcommand: generate, write to `out`, and print the
/// instructions.
pub fn run(out: &Path) -> Result<()> {
    let token = generate()?;
    write(out, &token)?;
    let file = out.display();
    println!(
        "Wrote a new 256-bit token to {file} (mode 0600).

Serve with it (every RPC, gRPC and grpc-web, must then carry it):
  agent-harness serve --auth-token-file {file}

Clients send the header  authorization: Bearer <token>
  grpcurl:    grpcurl -plaintext -H \"authorization: Bearer $(cat {file})\" 127.0.0.1:50051 list
  Go:         grpc.WithPerRPCCredentials(...) or metadata.AppendToOutgoingContext(ctx, \"authorization\", \"Bearer \"+token)
  Python:     stub.Start(req, metadata=((\"authorization\", \"Bearer \" + token),))
  TypeScript: createGrpcWebTransport({{ baseUrl, interceptors: [(next) => (req) => {{ req.header.set(\"authorization\", `Bearer ${{token}}`); return next(req); }}] }})
  Rust:       a tonic interceptor inserting `authorization: Bearer <token>` into each request's metadata

Keep the file private; over a network, serve with --tls-cert/--tls-key too."
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_256_bit_hex_and_differ() {
        let a = generate().unwrap();
        let b = generate().unwrap();
        assert_eq!(a.len(), 64);
        assert!(a.chars().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(a, b);
    }

    #[test]
    fn written_owner_only_and_replaced_whole() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tok");
        std::fs::write(&path, "old").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        write(&path, "abc").unwrap();
        let meta = std::fs::metadata(&path).unwrap();
        assert_eq!(meta.permissions().mode() & 0o777, 0o600);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "abc\n");
        assert_eq!(crate::auth::load_token(&path).unwrap(), "abc");
        // No temporary file is left behind.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }
}
