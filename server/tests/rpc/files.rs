//! What `serve` leaves on disk is its user's alone: the data dir it
//! creates is 0700, `events.redb`, its log and the secrets key are 0600 (a store file
//! others could read is made 0600; a data dir the operator made keeps its
//! mode), and a token file others can read is a start-up error. On redb
//! whatever `AGENT_HARNESS_TEST_STORE` says: the store file is the subject.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Duration;

use agent_harness_server::config::ServeConfig;

fn assert_mode(path: &Path, want: u32) {
    let got = std::fs::metadata(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(got, want, "{}: mode {got:o}, want {want:o}", path.display());
}

fn chmod(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// Runs `serve` with `config` until it has started (then shuts it down at
/// once); its result.
pub(crate) async fn serve_once(config: ServeConfig) -> agent_harness_server::error::Result<()> {
    tokio::time::timeout(
        Duration::from_secs(30),
        agent_harness_server::run(config, async {}),
    )
    .await
    .expect("serve returns")
}

pub(crate) fn config(data_dir: &Path) -> ServeConfig {
    ServeConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        data_dir: data_dir.to_owned(),
        ..ServeConfig::default()
    }
}

#[tokio::test]
async fn the_data_dir_the_store_and_the_key_are_owner_only() {
    let base = tempfile::tempdir().unwrap();
    let data = base.path().join("data");
    serve_once(config(&data)).await.expect("serve");
    assert_mode(&data, 0o700);
    assert_mode(&data.join("events.redb"), 0o600);
    assert_mode(&data.join("events.redb.wal"), 0o600);
    assert_mode(&data.join("secrets.key"), 0o600);

    // Made by the operator with looser modes: the dir keeps its mode (it
    // may be shared on purpose; a warning says so), the store is the
    // server's own and becomes 0600.
    let shared = base.path().join("shared");
    std::fs::create_dir(&shared).unwrap();
    chmod(&shared, 0o755);
    std::fs::write(shared.join("events.redb"), "").unwrap();
    chmod(&shared.join("events.redb"), 0o644);
    std::fs::write(shared.join("events.redb.wal"), "").unwrap();
    chmod(&shared.join("events.redb.wal"), 0o644);
    serve_once(config(&shared)).await.expect("serve");
    assert_mode(&shared, 0o755);
    assert_mode(&shared.join("events.redb"), 0o600);
    assert_mode(&shared.join("events.redb.wal"), 0o600);
}

#[tokio::test]
async fn a_token_or_key_file_others_can_read_is_refused_at_start_up() {
    let base = tempfile::tempdir().unwrap();
    let data = base.path().join("data");
    let token = base.path().join("token");
    std::fs::write(&token, "s3cret-token\n").unwrap();
    chmod(&token, 0o644);
    let with_token = ServeConfig {
        auth_token_file: Some(token.clone()),
        ..config(&data)
    };
    let err = serve_once(with_token.clone())
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("--auth-token-file") && err.contains("chmod 600"),
        "{err}"
    );
    assert!(!data.exists(), "refused before touching the data dir");

    chmod(&token, 0o600);
    let key = base.path().join("key");
    std::fs::write(&key, "ab".repeat(32)).unwrap();
    chmod(&key, 0o640);
    let with_key = ServeConfig {
        secrets_key_file: Some(key.clone()),
        ..with_token
    };
    let err = serve_once(with_key.clone()).await.unwrap_err().to_string();
    assert!(
        err.contains("--secrets-key-file") && err.contains("chmod 600"),
        "{err}"
    );
    chmod(&key, 0o600);
    serve_once(with_key).await.expect("both owner-only: serves");
}
