//! The Codex agent (`codex app-server`).

pub mod decode;
