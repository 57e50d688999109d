//! The commands that drive a session: `start`, `send`, `stop`, `approve`
//! and `deny`. Each is one logical call of the session client, retried in
//! transit under one idempotency key, so a lost answer never applies it
//! twice.

use std::io::Read;
use std::path::Path;

use agent_harness_client::pb;
use agent_harness_client::session::SessionClient;
use clap::Args;

use super::connect::Connection;
use super::exit::Failure;
use super::out;

/// `agent-harness start`.
#[derive(Debug, Clone, PartialEq, Eq, Args)]
pub struct StartArgs {
    /// The session id (yours to choose: 1-128 of A-Z a-z 0-9 . _ : -).
    pub session: String,
    /// The first prompt; `-` reads it from stdin.
    pub prompt: String,
    /// The agent's working directory (a relative path is made absolute
    /// against this shell's directory). Default: the server's.
    #[arg(long)]
    pub cwd: Option<String>,
    /// The agent to run (`agent-harness` serves claude by default; see the
    /// server's ListAgents).
    #[arg(long)]
    pub agent: Option<String>,
    /// The model.
    #[arg(long)]
    pub model: Option<String>,
    /// The permission mode (default, plan, dontAsk, ... within what the
    /// server allows).
    #[arg(long)]
    pub permission_mode: Option<String>,
    /// Where to connect and how to print.
    #[command(flatten)]
    pub connection: Connection,
}

/// `agent-harness send`.
#[derive(Debug, Clone, PartialEq, Eq, Args)]
pub struct SendArgs {
    /// The session.
    pub session: String,
    /// The message; `-` reads it from stdin.
    pub text: String,
    /// Where to connect and how to print.
    #[command(flatten)]
    pub connection: Connection,
}

/// `agent-harness stop`.
#[derive(Debug, Clone, PartialEq, Eq, Args)]
pub struct StopArgs {
    /// The session.
    pub session: String,
    /// Where to connect and how to print.
    #[command(flatten)]
    pub connection: Connection,
}

/// `agent-harness approve`.
#[derive(Debug, Clone, PartialEq, Eq, Args)]
pub struct ApproveArgs {
    /// The session.
    pub session: String,
    /// The permission request id (`tail` prints it).
    pub request: String,
    /// Where to connect and how to print.
    #[command(flatten)]
    pub connection: Connection,
}

/// `agent-harness deny`.
#[derive(Debug, Clone, PartialEq, Eq, Args)]
pub struct DenyArgs {
    /// The session.
    pub session: String,
    /// The permission request id (`tail` prints it).
    pub request: String,
    /// What the agent is told.
    pub reason: Option<String>,
    /// Where to connect and how to print.
    #[command(flatten)]
    pub connection: Connection,
}

/// Starts a run (creating the session on first use).
pub async fn start(args: &StartArgs) -> Result<(), Failure> {
    let config = pb::StartConfig {
        prompt: text_or_stdin(&args.prompt)?,
        cwd: args
            .cwd
            .as_deref()
            .map(absolute)
            .transpose()?
            .unwrap_or_default(),
        agent: args.agent.clone().unwrap_or_default(),
        model: args.model.clone().unwrap_or_default(),
        permission_mode: args.permission_mode.clone().unwrap_or_default(),
        ..Default::default()
    };
    let response = client(&args.connection, &args.session)?
        .start(config)
        .await?;
    if args.connection.json {
        return out::json(&response);
    }
    out::line(&format!(
        "started {} (run {}, {})\nfollow it: agent-harness tail {} --until-idle",
        args.session, response.run_id, response.process_id, args.session
    ))
}

/// Sends a message.
pub async fn send(args: &SendArgs) -> Result<(), Failure> {
    let text = text_or_stdin(&args.text)?;
    let response = client(&args.connection, &args.session)?
        .send(text, Vec::new())
        .await?;
    if args.connection.json {
        return out::json(&response);
    }
    out::line(&format!(
        "sent to {} (run {})",
        args.session, response.run_id
    ))
}

/// Stops the current turn.
pub async fn stop(args: &StopArgs) -> Result<(), Failure> {
    let response = client(&args.connection, &args.session)?.stop().await?;
    if args.connection.json {
        return out::json(&response);
    }
    out::line(if response.stopping {
        "stopping"
    } else {
        "nothing was running"
    })
}

/// Allows a pending permission request.
pub async fn approve(args: &ApproveArgs) -> Result<(), Failure> {
    respond(&args.connection, &args.session, &args.request, true, "").await
}

/// Denies a pending permission request.
pub async fn deny(args: &DenyArgs) -> Result<(), Failure> {
    let reason = args.reason.as_deref().unwrap_or_default();
    respond(
        &args.connection,
        &args.session,
        &args.request,
        false,
        reason,
    )
    .await
}

async fn respond(
    conn: &Connection,
    session: &str,
    request: &str,
    allow: bool,
    message: &str,
) -> Result<(), Failure> {
    client(conn, session)?
        .respond_permission(request, allow, None, message)
        .await?;
    if conn.json {
        return out::json(&pb::RespondPermissionResponse {});
    }
    out::line(&format!(
        "{} {request}",
        if allow { "allowed" } else { "denied" }
    ))
}

/// A session client for one call: no live typing (nothing is shown).
fn client(conn: &Connection, session: &str) -> Result<SessionClient, Failure> {
    conn.session(session, false)
}

/// `text`, or all of stdin for `-`.
fn text_or_stdin(text: &str) -> Result<String, Failure> {
    if text != "-" {
        return Ok(text.to_owned());
    }
    let mut input = String::new();
    std::io::stdin()
        .read_to_string(&mut input)
        .map_err(|e| Failure::usage(format!("cannot read stdin: {e}")))?;
    Ok(input)
}

/// `path` made absolute against this process's directory: the server
/// would resolve a relative one against its own.
fn absolute(path: &str) -> Result<String, Failure> {
    std::path::absolute(Path::new(path))
        .map(|p| p.to_string_lossy().into_owned())
        .map_err(|e| Failure::usage(format!("--cwd {path:?}: {e}")))
}
