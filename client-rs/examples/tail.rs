//! Prints a session's events and derived status live, reconnecting as
//! needed:
//!
//! ```text
//! cargo run -p agent-harness-client --example tail -- --addr http://127.0.0.1:50051 SESSION
//! ```

use agent_harness_client::pb::{self, event::Payload};
use agent_harness_client::session::{Hydration, SessionClient, SessionOptions};
use clap::Parser;

/// Follow one agent-harness session.
#[derive(Parser)]
struct Args {
    /// Server address.
    #[arg(long, default_value = "http://127.0.0.1:50051")]
    addr: String,
    /// Bearer token, when the server requires one.
    #[arg(long, env = "AGENT_HARNESS_TOKEN")]
    token: Option<String>,
    /// Also print this many events from before the replayed tail.
    #[arg(long, default_value_t = 0)]
    history: u32,
    /// The session to follow.
    session: String,
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse();
    // It prints stored events only: no live typing.
    let mut options = SessionOptions::default().with_include_deltas(false);
    if let Some(token) = args.token {
        options = options.with_auth_token(token);
    }
    let client = SessionClient::connect(args.addr, args.session, options)?;
    if args.history > 0 {
        client.wait_for(|s| s.hydration == Hydration::Ready).await?;
        client.fetch_history(args.history).await?;
    }

    let mut updates = client.watch();
    let mut printed = 0u64;
    let mut shown = (String::new(), None);
    loop {
        let snapshot = updates.borrow_and_update().clone();
        if snapshot.cursor < printed {
            println!("-- reset: the server's log restarted; replaying its tail");
            printed = 0;
        }
        if printed == 0 {
            // First view (or after a reset/history page): everything held.
            printed = snapshot
                .events
                .first()
                .map_or(0, |e| e.seq.saturating_sub(1));
        }
        let after = printed;
        for event in snapshot.events.iter().filter(|e| e.seq > after) {
            println!("{:>6}  {}", event.seq, describe(event));
            printed = event.seq;
        }
        let state = (
            format!(
                "{}{} ({}){}",
                // The session's name: the latest SetTitle, else its first prompt's line.
                match snapshot.derived.title.as_str() {
                    "" => String::new(),
                    title => format!("{title}: "),
                },
                snapshot.derived.status.as_str(),
                if snapshot.derived.process_alive {
                    "process alive"
                } else {
                    "no process"
                },
                if snapshot.connected {
                    ""
                } else {
                    ", disconnected"
                },
            ),
            snapshot.error.clone(),
        );
        if state != shown {
            match &state.1 {
                Some(error) => println!("-- {}: {error}", state.0),
                None => println!("-- {}", state.0),
            }
            shown = state;
        }
        if updates.changed().await.is_err() {
            return Ok(());
        }
    }
}

/// One line per event: its kind and the most telling field.
fn describe(event: &pb::Event) -> String {
    let Some(payload) = &event.payload else {
        return "(no payload)".to_owned();
    };
    match payload {
        Payload::RunStart(r) => format!("run_start  trigger={} run={}", r.trigger, event.run_id),
        Payload::RunReady(r) => format!("run_ready  model={} resume={}", r.model, r.resume_id),
        Payload::RunEnd(r) => format!("run_end    reason={}", r.reason().as_str_name()),
        Payload::RunError(r) => format!("run_error  {}", r.message),
        Payload::StopRequested(_) => "stop_requested".to_owned(),
        Payload::Content(c) => {
            let text: String = c
                .blocks
                .iter()
                .map(|b| match (b.text.as_str(), b.tool_name.as_str()) {
                    ("", "") if !b.thinking.is_empty() => "[thinking]".to_owned(),
                    ("", "") => format!("[{}]", b.r#type),
                    ("", tool) => format!("[{tool}]"),
                    (text, _) => text.to_owned(),
                })
                .collect::<Vec<_>>()
                .join(" ");
            format!("content    {}", one_line(&text))
        }
        Payload::Result(_) => "result".to_owned(),
        Payload::TurnEnd(t) => format!("turn_end   error={}", t.is_error),
        Payload::InputSent(i) => format!("input_sent {}", one_line(&i.text)),
        Payload::TaskStarted(t) => format!("task_started {}", t.task_id),
        Payload::TaskUpdated(t) => format!("task_updated {}", t.task_id),
        Payload::TaskNotification(t) => format!("task_notification {}", t.task_id),
        Payload::PermissionRequested(p) => {
            format!("permission_requested {} {}", p.request_id, p.tool_name)
        }
        Payload::PermissionResolved(p) => {
            format!("permission_resolved {} allow={}", p.request_id, p.allow)
        }
        Payload::TurnStart(_) => "turn_start".to_owned(),
        Payload::SettingChanged(s) => format!(
            "setting_changed {}={:?} {}",
            s.setting().as_str_name(),
            s.value,
            s.applied().as_str_name()
        ),
        Payload::FilesRewound(f) => format!(
            "files_rewound to_seq={} files={}",
            f.to_seq,
            f.files_changed.len()
        ),
        Payload::Unreadable(u) => format!("unreadable {} bytes", u.size),
        Payload::TitleSet(t) => format!("title_set  {}", one_line(&t.title)),
    }
}

fn one_line(text: &str) -> String {
    let flat = text.replace('\n', " ");
    match flat.char_indices().nth(100) {
        Some((i, _)) => format!("{}…", &flat[..i]),
        None => flat,
    }
}
