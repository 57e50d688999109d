//! Pointing the real `codex` CLI at the fake: a `$CODEX_HOME/config.toml` whose model
//! provider is this server's Responses API.
//!
//! Codex reads its provider from `config.toml` only (`OPENAI_BASE_URL` with the built-in
//! provider tries a websocket first and retries it forever), so every Codex test gets a fresh
//! `CODEX_HOME` with [`FakeApi::codex_home`] and the environment of [`FakeApi::codex_env`].

use crate::server::FakeApi;
use std::path::Path;

/// The variable the provider block names as `env_key`; Codex refuses to call a provider
/// whose key variable is unset, and the fake accepts any value.
pub const API_KEY_VAR: &str = "FAKE_API_KEY";

impl FakeApi {
    /// The `config.toml` that makes Codex use this server: provider `fake` on
    /// `<base_url>/v1` with the Responses wire format, and no retries, so a scripted error
    /// reaches the client at once. Analytics and the update check are off: a test makes no
    /// request beyond the fake.
    pub fn codex_config(&self) -> String {
        format!(
            r#"model_provider = "fake"
check_for_update_on_startup = false

[analytics]
enabled = false

[model_providers.fake]
name = "fake"
base_url = "{}/v1"
wire_api = "responses"
env_key = "{API_KEY_VAR}"
request_max_retries = 0
stream_max_retries = 0
"#,
            self.base_url()
        )
    }

    /// Writes [`FakeApi::codex_config`] to `<dir>/config.toml` (creating `dir`), so `dir` can
    /// be Codex's `CODEX_HOME`.
    pub fn codex_home(&self, dir: &Path) -> std::io::Result<()> {
        std::fs::create_dir_all(dir)?;
        std::fs::write(dir.join("config.toml"), self.codex_config())
    }

    /// The environment Codex needs besides `PATH`: `CODEX_HOME=<home>` (see
    /// [`FakeApi::codex_home`]) and the provider's key variable.
    pub fn codex_env(&self, home: &Path) -> [(&'static str, String); 2] {
        [
            ("CODEX_HOME", home.display().to_string()),
            (API_KEY_VAR, "test".to_owned()),
        ]
    }
}
