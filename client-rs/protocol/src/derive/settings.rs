//! Which model, permission mode and thinking budget are in force.
//!
//! Three kinds of event say so, and the latest wins, per setting:
//! - `run_start`: what a client chose for the run (`StartConfig.model`,
//!   `permission_mode`, `max_thinking_tokens`); empty fields say nothing;
//! - `run_ready`: what the CLI reports it runs with (`model`,
//!   `permission_mode`; it does not report a thinking budget);
//! - `setting_changed`: a client's SetModel, SetPermissionMode or
//!   SetMaxThinkingTokens, applied live or recorded for the next spawn
//!   (both are in force from the client's point of view: the next spawn
//!   applies a recorded one). An empty value means "the CLI's default".

use crate::pb::{Event, Setting, event::Payload};

/// The settings in force.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Settings {
    /// The model: an alias or name a client chose, or the name the CLI
    /// reported. `None` before any (or after a change back to the default,
    /// until the CLI reports one).
    pub model: Option<String>,
    /// The permission mode, the same way.
    pub permission_mode: Option<String>,
    /// The thinking budget a client chose; `None`: the CLI's default.
    pub max_thinking_tokens: Option<u32>,
}

impl Settings {
    /// Applies the next event of the log.
    pub(crate) fn apply(&mut self, e: &Event) {
        match &e.payload {
            Some(Payload::RunStart(rs)) => {
                let Some(c) = &rs.config else { return };
                if !c.model.is_empty() {
                    self.model = Some(c.model.clone());
                }
                if !c.permission_mode.is_empty() {
                    self.permission_mode = Some(c.permission_mode.clone());
                }
                if c.max_thinking_tokens.is_some() {
                    self.max_thinking_tokens = c.max_thinking_tokens;
                }
            }
            Some(Payload::RunReady(r)) => {
                if !r.model.is_empty() {
                    self.model = Some(r.model.clone());
                }
                if !r.permission_mode.is_empty() {
                    self.permission_mode = Some(r.permission_mode.clone());
                }
            }
            Some(Payload::SettingChanged(s)) => {
                let value = (!s.value.is_empty()).then(|| s.value.clone());
                match s.setting() {
                    Setting::Model => self.model = value,
                    Setting::PermissionMode => self.permission_mode = value,
                    Setting::MaxThinkingTokens => {
                        self.max_thinking_tokens = value.and_then(|v| v.parse().ok());
                    }
                    Setting::Unspecified => {}
                }
            }
            _ => {}
        }
    }
}

/// The settings in force after `events` (see the module docs).
pub fn settings(events: &[Event]) -> Settings {
    let mut s = Settings::default();
    for e in events {
        s.apply(e);
    }
    s
}
