//! `ls` and `title`: the session list, a page at a time from the server
//! (filtered and sorted there), and a session's name.

use std::time::{SystemTime, UNIX_EPOCH};

use agent_harness_client::pb;
use agent_harness_client::session::new_idempotency_key;
use clap::{Args, ValueEnum};

use super::connect::Connection;
use super::exit::Failure;
use super::out;
use super::render::one_line;

/// Most sessions one ListSessions page holds (the server's cap).
const MAX_PAGE: usize = 1000;

/// `agent-harness ls`.
#[derive(Debug, Clone, PartialEq, Eq, Args)]
pub struct LsArgs {
    /// Only sessions whose title, id or working directory contains this
    /// (case-insensitive).
    #[arg(long)]
    pub query: Option<String>,
    /// Only sessions in these statuses (comma-separated).
    #[arg(long, value_delimiter = ',')]
    pub status: Vec<StatusArg>,
    /// Only sessions of this agent (e.g. claude, codex).
    #[arg(long)]
    pub agent: Option<String>,
    /// Only sessions whose working directory is exactly this (a project).
    #[arg(long)]
    pub cwd: Option<String>,
    /// The order: recent activity first, by id, or grouped by working
    /// directory.
    #[arg(long, value_enum, default_value_t = OrderArg::Recent)]
    pub order: OrderArg,
    /// Most sessions to print (0: all of them, page after page).
    #[arg(long, default_value_t = 50)]
    pub limit: usize,
    /// Where to connect and how to print.
    #[command(flatten)]
    pub connection: Connection,
}

/// A session status, as `--status` takes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum StatusArg {
    /// No turn in progress.
    Idle,
    /// A run was started and the agent has not spoken yet.
    Starting,
    /// A turn is in progress.
    Streaming,
    /// A stop was asked for and the turn has not ended yet.
    Stopping,
}

/// The order of `ls`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OrderArg {
    /// Last activity first.
    Recent,
    /// By session id.
    Id,
    /// By working directory, then last activity first.
    Cwd,
}

/// `agent-harness title`.
#[derive(Debug, Clone, PartialEq, Eq, Args)]
pub struct TitleArgs {
    /// The session.
    pub session: String,
    /// The title (one line, at most 200 characters); empty: back to the
    /// one derived from the first prompt.
    pub title: String,
    /// Where to connect and how to print.
    #[command(flatten)]
    pub connection: Connection,
}

/// Prints the sessions, a table or one JSON `Session` per line.
pub async fn ls(args: &LsArgs) -> Result<(), Failure> {
    let mut rpc = args.connection.rpc(None)?;
    let mut request = pb::ListSessionsRequest {
        query: args.query.clone().unwrap_or_default(),
        statuses: args.status.iter().map(|s| status(*s) as i32).collect(),
        agent: args.agent.clone().unwrap_or_default(),
        cwd: args.cwd.clone().unwrap_or_default(),
        order: order(args.order) as i32,
        ..Default::default()
    };
    let mut sessions = Vec::new();
    loop {
        let left = match args.limit {
            0 => MAX_PAGE,
            n => (n - sessions.len()).min(MAX_PAGE),
        };
        request.page_size = left as u32;
        let page = rpc
            .list_sessions(request.clone())
            .await
            .map_err(|s| Failure::rpc("ListSessions", &s))?
            .into_inner();
        sessions.extend(page.sessions);
        let full = args.limit > 0 && sessions.len() >= args.limit;
        if page.next_page_token.is_empty() || full {
            break;
        }
        request.page_token = page.next_page_token;
    }
    sessions.truncate(match args.limit {
        0 => usize::MAX,
        n => n,
    });
    if args.connection.json {
        return sessions.iter().try_for_each(out::json);
    }
    table(&sessions)
        .iter()
        .try_for_each(|l| out::line(l.trim_end()))
}

/// Names the session (SetTitle).
pub async fn title(args: &TitleArgs) -> Result<(), Failure> {
    let response = args
        .connection
        .rpc(Some(&args.session))?
        .set_title(pb::SetTitleRequest {
            session_id: args.session.clone(),
            title: args.title.clone(),
            idempotency_key: new_idempotency_key(),
        })
        .await
        .map_err(|s| Failure::rpc("SetTitle", &s))?
        .into_inner();
    if args.connection.json {
        return out::json(&response);
    }
    out::line(&format!("titled {} (seq {})", args.session, response.seq))
}

fn status(s: StatusArg) -> pb::SessionStatus {
    match s {
        StatusArg::Idle => pb::SessionStatus::Idle,
        StatusArg::Starting => pb::SessionStatus::Starting,
        StatusArg::Streaming => pb::SessionStatus::Streaming,
        StatusArg::Stopping => pb::SessionStatus::Stopping,
    }
}

fn order(o: OrderArg) -> pb::SessionOrder {
    match o {
        OrderArg::Recent => pb::SessionOrder::RecentActivity,
        OrderArg::Id => pb::SessionOrder::SessionId,
        OrderArg::Cwd => pb::SessionOrder::Cwd,
    }
}

/// The sessions as aligned columns under a header.
fn table(sessions: &[pb::Session]) -> Vec<String> {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    let mut rows = vec![["ID", "TITLE", "STATUS", "AGENT", "CWD", "UPDATED"].map(str::to_owned)];
    for s in sessions {
        let status = pb::SessionStatus::try_from(s.status)
            .unwrap_or_default()
            .as_str_name()
            .trim_start_matches("SESSION_STATUS_")
            .to_lowercase();
        let title: String = one_line(&s.title).chars().take(40).collect();
        rows.push([
            s.session_id.clone(),
            or_dash(title),
            status,
            or_dash(s.agent.clone()),
            or_dash(s.cwd.clone()),
            s.updated_at
                .as_ref()
                .map_or_else(|| "-".to_owned(), |t| ago(now - t.seconds)),
        ]);
    }
    let widths: Vec<usize> = (0..6)
        .map(|c| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0))
        .collect();
    rows.iter()
        .map(|r| {
            r.iter()
                .zip(&widths)
                .map(|(cell, w)| format!("{cell:<w$}"))
                .collect::<Vec<_>>()
                .join("  ")
        })
        .collect()
}

fn or_dash(s: String) -> String {
    if s.is_empty() { "-".to_owned() } else { s }
}

/// `secs` ago, the way a person says it: 42s, 5m, 3h, 2d.
fn ago(secs: i64) -> String {
    let secs = secs.max(0);
    match secs {
        0..60 => format!("{secs}s ago"),
        60..3600 => format!("{}m ago", secs / 60),
        3600..86400 => format!("{}h ago", secs / 3600),
        _ => format!("{}d ago", secs / 86400),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_aligns_its_columns_and_fills_blanks() {
        let lines = table(&[pb::Session {
            session_id: "s1".into(),
            status: pb::SessionStatus::Idle as i32,
            title: "fix the build".into(),
            ..Default::default()
        }]);
        assert_eq!(
            lines[0].trim_end(),
            "ID  TITLE          STATUS  AGENT  CWD  UPDATED"
        );
        assert_eq!(
            lines[1].trim_end(),
            "s1  fix the build  idle    -      -    -"
        );
        assert_eq!(ago(59), "59s ago");
        assert_eq!(ago(7200), "2h ago");
    }
}
