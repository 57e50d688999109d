//! The scripted OpenAI Responses API (`POST /v1/responses`), which the real `codex` CLI
//! talks to through a custom model provider (see [`crate::codex`]). It answers from the same
//! script as the Messages API: [`input`] reads a request into the shared
//! [`Position`](crate::Position), [`crate::script`] picks the reply, and [`stream`] writes it
//! in this API's wire format.

pub mod input;
pub mod stream;

/// The name of Codex's shell tool; the script's `Bash` calls go out as this function call,
/// with the command as `cmd`.
pub const SHELL_TOOL: &str = "exec_command";
