//! The terminal client: `agent-harness ls`, `start`, `send`, `tail`,
//! `stop`, `approve`, `deny`, `title`, `history`, for people in a shell
//! and for scripts. A client of the server like any other: it goes
//! through the Rust client crate (the reconnecting session client for
//! `tail` and every call that changes a session), with the token and TLS
//! of every client, and shares nothing with the server's own modules but
//! the owner-only check of a token file.
//!
//! - [`connect`]: `--server`, the token, TLS, `--json`.
//! - [`sessions`]: `ls` and `title`.
//! - [`turns`]: `start`, `send`, `stop`, `approve`, `deny`.
//! - [`tail`]: `tail` (live typing, `--until-idle`) and `history`.
//! - [`render`]: how events read as text; [`out`]: stdout, text or JSON.
//! - [`exit`]: the exit codes, mapped from gRPC codes.

pub mod connect;
pub mod exit;
mod out;
mod render;
pub mod sessions;
pub mod tail;
pub mod turns;

use std::process::ExitCode;

use clap::Subcommand;

/// The client's commands, subcommands of `agent-harness` beside `serve`.
#[derive(Debug, Clone, PartialEq, Eq, Subcommand)]
pub enum ClientCommand {
    /// List sessions: id, title, status, agent, working directory, last
    /// activity.
    Ls(sessions::LsArgs),
    /// Start a session (or a new run of it) with a prompt.
    Start(turns::StartArgs),
    /// Send a message to a session.
    Send(turns::SendArgs),
    /// Follow a session's log as it grows, the answer as it is typed.
    Tail(tail::TailArgs),
    /// Print a session's stored log.
    History(tail::HistoryArgs),
    /// Stop a session's current turn.
    Stop(turns::StopArgs),
    /// Allow a pending permission request.
    Approve(turns::ApproveArgs),
    /// Deny a pending permission request.
    Deny(turns::DenyArgs),
    /// Name a session.
    Title(sessions::TitleArgs),
}

/// The commands' names, as typed.
const NAMES: &[&str] = &[
    "ls", "start", "send", "tail", "history", "stop", "approve", "deny", "title",
];

impl ClientCommand {
    fn name(&self) -> &'static str {
        match self {
            ClientCommand::Ls(_) => "ls",
            ClientCommand::Start(_) => "start",
            ClientCommand::Send(_) => "send",
            ClientCommand::Tail(_) => "tail",
            ClientCommand::History(_) => "history",
            ClientCommand::Stop(_) => "stop",
            ClientCommand::Approve(_) => "approve",
            ClientCommand::Deny(_) => "deny",
            ClientCommand::Title(_) => "title",
        }
    }
}

/// Runs one command; its exit code is the documented one of how it ended
/// ([`exit`]), with the reason on stderr.
pub async fn run(command: ClientCommand) -> ExitCode {
    let result = match &command {
        ClientCommand::Ls(a) => sessions::ls(a).await,
        ClientCommand::Start(a) => turns::start(a).await,
        ClientCommand::Send(a) => turns::send(a).await,
        ClientCommand::Tail(a) => tail::tail(a).await,
        ClientCommand::History(a) => tail::history(a).await,
        ClientCommand::Stop(a) => turns::stop(a).await,
        ClientCommand::Approve(a) => turns::approve(a).await,
        ClientCommand::Deny(a) => turns::deny(a).await,
        ClientCommand::Title(a) => sessions::title(a).await,
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => failure.report(command.name()),
    }
}

/// The exit code of a command line clap refused (after printing why): a
/// client command's usage error exits [`exit::USAGE`]; the other
/// subcommands keep clap's own code; `--help` and `--version` exit 0.
pub fn parse_failed(error: clap::Error) -> ExitCode {
    let _ = error.print();
    if !error.use_stderr() {
        return ExitCode::SUCCESS;
    }
    let first = std::env::args().nth(1).unwrap_or_default();
    if NAMES.contains(&first.as_str()) {
        ExitCode::from(exit::USAGE)
    } else {
        ExitCode::from(error.exit_code().clamp(0, 255) as u8)
    }
}
