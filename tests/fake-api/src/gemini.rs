//! Pointing the real `gemini` CLI at the fake: a `$HOME/.gemini/settings.json` that selects
//! API-key auth, and the environment that names this server's Gemini API as the base URL.
//!
//! Gemini CLI reads its auth type from `settings.json` (without it, `--acp` asks the client
//! to authenticate), the key from `GEMINI_API_KEY` and the endpoint from
//! `GOOGLE_GEMINI_BASE_URL`. Its sessions live under `$HOME/.gemini/tmp/`, so every Gemini
//! test gets a fresh `HOME` with [`FakeApi::gemini_home`] and the environment of
//! [`FakeApi::gemini_env`].

use crate::server::FakeApi;
use serde_json::{Value, json};
use std::path::Path;

impl FakeApi {
    /// The `settings.json` that makes Gemini CLI use an API key (which the fake accepts,
    /// whatever its value), with usage statistics and update checks off: a test makes no
    /// request beyond the fake.
    pub fn gemini_settings(&self) -> Value {
        json!({
            "security": {"auth": {"selectedType": "gemini-api-key"}},
            "privacy": {"usageStatisticsEnabled": false},
            "general": {"enableAutoUpdate": false, "enableAutoUpdateNotification": false},
            "telemetry": {"enabled": false},
        })
    }

    /// Writes [`FakeApi::gemini_settings`] to `<home>/.gemini/settings.json` (creating the
    /// directories), so `home` can be Gemini CLI's `HOME`.
    pub fn gemini_home(&self, home: &Path) -> std::io::Result<()> {
        let dir = home.join(".gemini");
        std::fs::create_dir_all(&dir)?;
        std::fs::write(
            dir.join("settings.json"),
            format!("{:#}\n", self.gemini_settings()),
        )
    }

    /// The environment Gemini CLI needs besides `PATH`: `HOME=<home>` (see
    /// [`FakeApi::gemini_home`]), `GEMINI_API_KEY`, `GOOGLE_GEMINI_BASE_URL`, and
    /// `GEMINI_CLI_NO_RELAUNCH=true`: otherwise the CLI starts itself again as a child node
    /// process (for a larger heap), and the process a test spawns and kills is not the one
    /// that runs the session.
    pub fn gemini_env(&self, home: &Path) -> [(&'static str, String); 4] {
        [
            ("HOME", home.display().to_string()),
            ("GEMINI_API_KEY", "test".to_owned()),
            ("GOOGLE_GEMINI_BASE_URL", self.base_url()),
            ("GEMINI_CLI_NO_RELAUNCH", "true".to_owned()),
        ]
    }
}
