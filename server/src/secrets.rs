//! The key that seals the env values a client gives a run
//! (`StartConfig.env`, names allowed by `--allow-env`) before they reach the
//! store.
//!
//! A Send that respawns a session needs the values of its last run again,
//! also after a restart, so the server keeps them with the session's meta;
//! but the store file is read by more than this process (backups, a shared
//! database later). So the values are encrypted there with a key the
//! operator holds (`--secrets-key-file`, by default `<data-dir>/secrets.key`
//! made 0600 on first start): ChaCha20-Poly1305 (AEAD, from `ring`, which
//! the TLS stack already builds), a random nonce per sealing, the session
//! id as associated data (a sealed value copied into another session's row
//! does not open). The event log keeps the names only (`run_start` records
//! each value as `[redacted]`).
//!
//! Opening with another key fails cleanly: the respawn that needs the
//! values answers FAILED_PRECONDITION naming the key; nothing crashes.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use ring::aead::{Aad, CHACHA20_POLY1305, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};
use ring::rand::{SecureRandom, SystemRandom};

use crate::error::{Error, Result};

/// The file name of the key in the data dir when `--secrets-key-file` is
/// not given.
pub const DEFAULT_KEY_FILE: &str = "secrets.key";

/// Bytes of key (256 bits).
const KEY_BYTES: usize = 32;

/// The format tag of a sealed value: `v1:<key id>:<hex of nonce, ciphertext, tag>`.
const VERSION: &str = "v1";

/// A sealing key. Its `Debug` shows the key id and where it came from,
/// never the key.
pub struct SecretsKey {
    key: LessSafeKey,
    /// A key derived from it for [`SecretsKey::digest`] (one key, one use).
    mac: ring::hmac::Key,
    /// First 8 hex digits of the key's SHA-256: names the key in errors,
    /// so a mismatch says which key sealed a value.
    id: String,
    /// Where it came from (a file, or this process only).
    origin: String,
}

impl std::fmt::Debug for SecretsKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SecretsKey")
            .field("id", &self.id)
            .field("origin", &self.origin)
            .finish()
    }
}

impl SecretsKey {
    /// A key from 64 hex digits (`origin` says where they came from).
    pub fn from_hex(text: &str, origin: &str) -> Result<Self> {
        let bytes = unhex(text.trim())
            .filter(|b| b.len() == KEY_BYTES)
            .ok_or_else(|| {
                Error::Config(format!(
                    "{origin}: not a secrets key (64 hex digits; `agent-harness token --out FILE` \
                     writes one)"
                ))
            })?;
        Ok(Self::from_bytes(&bytes, origin))
    }

    fn from_bytes(bytes: &[u8], origin: &str) -> Self {
        let unbound = UnboundKey::new(&CHACHA20_POLY1305, bytes).expect("a 256-bit key");
        let digest = ring::digest::digest(&ring::digest::SHA256, bytes);
        let mut derive = b"agent-harness env digest\0".to_vec();
        derive.extend_from_slice(bytes);
        let mac_key = ring::digest::digest(&ring::digest::SHA256, &derive);
        Self {
            key: LessSafeKey::new(unbound),
            mac: ring::hmac::Key::new(ring::hmac::HMAC_SHA256, mac_key.as_ref()),
            id: hex(&digest.as_ref()[..4]),
            origin: origin.to_owned(),
        }
    }

    /// A key for this process only (the default of embedders and tests):
    /// values it sealed do not open after a restart. One per process, so
    /// servers started again in the same process share it.
    pub fn ephemeral() -> Arc<Self> {
        static KEY: OnceLock<Arc<SecretsKey>> = OnceLock::new();
        KEY.get_or_init(|| {
            let mut bytes = [0u8; KEY_BYTES];
            SystemRandom::new()
                .fill(&mut bytes)
                .expect("randomness from the OS");
            Arc::new(Self::from_bytes(&bytes, "a key of this process only"))
        })
        .clone()
    }

    /// Reads the key file `path`: it must be its owner's alone (mode 0600
    /// or stricter) and hold 64 hex digits. [`Error::Config`] naming
    /// `--secrets-key-file` otherwise.
    pub fn load(path: &Path) -> Result<Self> {
        crate::private_files::check_owner_only(path, "--secrets-key-file")?;
        let text = std::fs::read_to_string(path).map_err(|e| {
            Error::Config(format!(
                "cannot read --secrets-key-file {}: {e}",
                path.display()
            ))
        })?;
        Self::from_hex(&text, &format!("--secrets-key-file {}", path.display()))
    }

    /// The key `serve` seals with: `key_file` (`--secrets-key-file`, which
    /// must exist), or `<data_dir>/secrets.key`, written (0600, 256 random
    /// bits) on the first start. The data dir must exist.
    pub fn open(key_file: Option<&Path>, data_dir: &Path) -> Result<Self> {
        if let Some(path) = key_file {
            return Self::load(path);
        }
        let path: PathBuf = data_dir.join(DEFAULT_KEY_FILE);
        if !path.exists() {
            crate::token::write(&path, &crate::token::generate()?)?;
            tracing::info!(
                file = %path.display(),
                "wrote a new secrets key: it seals client env values in the store; keep it \
                 (and back it up apart from the store)"
            );
        }
        Self::load(&path)
    }

    /// The key id (8 hex digits).
    pub fn id(&self) -> &str {
        &self.id
    }

    /// A keyed digest of `value` (HMAC-SHA256 under a key derived from this
    /// one), as hex: what a stored fingerprint of a request holds in place
    /// of an env value, so the store cannot be used to test a guess of it.
    pub fn digest(&self, value: &str) -> String {
        hex(ring::hmac::sign(&self.mac, value.as_bytes()).as_ref())
    }

    /// `env` sealed for `session_id`; `None` when it is empty.
    pub fn seal_env(&self, session_id: &str, env: &BTreeMap<String, String>) -> Option<String> {
        if env.is_empty() {
            return None;
        }
        let mut nonce = [0u8; NONCE_LEN];
        SystemRandom::new()
            .fill(&mut nonce)
            .expect("randomness from the OS");
        let mut data = serde_json::to_vec(env).expect("a string map serializes");
        self.key
            .seal_in_place_append_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(session_id.as_bytes()),
                &mut data,
            )
            .expect("sealing fits in memory");
        let mut out = nonce.to_vec();
        out.extend_from_slice(&data);
        Some(format!("{VERSION}:{}:{}", self.id, hex(&out)))
    }

    /// The env `sealed` holds, or why it does not open with this key (a
    /// reason for an error message).
    pub fn open_env(
        &self,
        session_id: &str,
        sealed: &str,
    ) -> std::result::Result<BTreeMap<String, String>, String> {
        let mut parts = sealed.splitn(3, ':');
        let (Some(VERSION), Some(id), Some(body)) = (parts.next(), parts.next(), parts.next())
        else {
            return Err("its sealed env values are in an unknown format".into());
        };
        if id != self.id {
            return Err(format!(
                "its env values were sealed with another secrets key (key {id}; this server \
                 has key {}, {}): serve with the key they were sealed with \
                 (--secrets-key-file)",
                self.id, self.origin
            ));
        }
        let damaged = || "its sealed env values do not open (damaged)".to_owned();
        let mut data = unhex(body).ok_or_else(damaged)?;
        if data.len() < NONCE_LEN {
            return Err(damaged());
        }
        let mut nonce = [0u8; NONCE_LEN];
        nonce.copy_from_slice(&data[..NONCE_LEN]);
        let sealed_part = &mut data[NONCE_LEN..];
        let plain = self
            .key
            .open_in_place(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(session_id.as_bytes()),
                sealed_part,
            )
            .map_err(|_| damaged())?;
        serde_json::from_slice(plain).map_err(|_| damaged())
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(text: &str) -> Option<Vec<u8>> {
    if text.len() % 2 != 0 || !text.is_ascii() {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(byte: u8) -> SecretsKey {
        SecretsKey::from_bytes(&[byte; KEY_BYTES], "test")
    }

    fn env() -> BTreeMap<String, String> {
        [("MY_TOKEN".to_owned(), "s3cr3t-value".to_owned())].into()
    }

    #[test]
    fn sealed_values_open_with_the_same_key_and_session_only() {
        let k = key(1);
        let sealed = k.seal_env("s", &env()).unwrap();
        assert!(!sealed.contains("s3cr3t"), "{sealed}");
        assert!(
            !sealed.contains("MY_TOKEN"),
            "the names are sealed too: {sealed}"
        );
        assert_eq!(k.open_env("s", &sealed).unwrap(), env());
        // A fresh nonce each time.
        assert_ne!(k.seal_env("s", &env()).unwrap(), sealed);
        // Another session's row, another key, a damaged value: refused.
        assert!(k.open_env("t", &sealed).unwrap_err().contains("damaged"));
        let other = key(2).open_env("s", &sealed).unwrap_err();
        assert!(other.contains("another secrets key"), "{other}");
        let mut bad = sealed.clone();
        bad.pop();
        bad.push(if sealed.ends_with('0') { '1' } else { '0' });
        assert!(k.open_env("s", &bad).unwrap_err().contains("damaged"));
        assert!(k.open_env("s", "nope").is_err());
        assert_eq!(k.seal_env("s", &BTreeMap::new()), None);
    }

    #[test]
    fn digests_need_the_key() {
        assert_eq!(key(1).digest("v"), key(1).digest("v"));
        assert_ne!(key(1).digest("v"), key(2).digest("v"));
        assert_ne!(key(1).digest("v"), key(1).digest("w"));
        assert!(!key(1).digest("s3cr3t").contains("s3cr3t"));
    }

    #[test]
    fn key_files_are_checked() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("k");
        let hex64 = "ab".repeat(32);
        crate::token::write(&path, &hex64).unwrap();
        let k = SecretsKey::load(&path).unwrap();
        assert_eq!(k.id().len(), 8);
        assert!(!format!("{k:?}").contains(&hex64));
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let e = SecretsKey::load(&path).unwrap_err().to_string();
        assert!(
            e.contains("--secrets-key-file") && e.contains("chmod 600"),
            "{e}"
        );
        crate::token::write(&path, "short").unwrap();
        let e = SecretsKey::load(&path).unwrap_err().to_string();
        assert!(e.contains("not a secrets key"), "{e}");
    }

    #[test]
    fn serve_writes_a_key_on_first_start_and_reads_it_after() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let first = SecretsKey::open(None, dir.path()).unwrap();
        let path = dir.path().join(DEFAULT_KEY_FILE);
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let again = SecretsKey::open(None, dir.path()).unwrap();
        assert_eq!(first.id(), again.id());
        // A named file must exist: a typo is not a new key.
        let named = dir.path().join("missing.key");
        let e = SecretsKey::open(Some(&named), dir.path())
            .unwrap_err()
            .to_string();
        assert!(e.contains("--secrets-key-file"), "{e}");
    }
}
