//! `tail` and `history`: a session's log in the terminal, through the
//! reconnecting session client. `tail` follows it as it grows (with live
//! typing: the answer is printed as the model writes it, and completed
//! by its recorded text), `--until-idle` until the turn ends; `history`
//! prints what is stored and exits.

use agent_harness_client::derive::Status;
use agent_harness_client::partial::Partial;
use agent_harness_client::pb::{self, DeltaBlockType, event::Payload};
use agent_harness_client::session::{Hydration, SessionClient, Snapshot};
use clap::Args;

use super::connect::{Connection, DEFAULT_SERVER, SERVER_ENV};
use super::exit::{self, Failure};
use super::{out, render};

/// `agent-harness tail`.
#[derive(Debug, Clone, PartialEq, Eq, Args)]
pub struct TailArgs {
    /// The session.
    pub session: String,
    /// Print the events after this seq (older ones are paged in). Default:
    /// the recent tail the server replays.
    #[arg(long)]
    pub after_seq: Option<u64>,
    /// Exit when the session is idle (its turn ended): code 0 when the
    /// turn ended well, 5 when in error, 6 when stopped.
    #[arg(long)]
    pub until_idle: bool,
    /// Where to connect and how to print.
    #[command(flatten)]
    pub connection: Connection,
}

/// `agent-harness history`.
#[derive(Debug, Clone, PartialEq, Eq, Args)]
pub struct HistoryArgs {
    /// The session.
    pub session: String,
    /// Print only the newest this many events (0: the whole log).
    #[arg(long, default_value_t = 0)]
    pub limit: usize,
    /// Where to connect and how to print.
    #[command(flatten)]
    pub connection: Connection,
}

/// Follows the session until told to stop (or, with `--until-idle`, until
/// its turn ended).
pub async fn tail(args: &TailArgs) -> Result<(), Failure> {
    let conn = &args.connection;
    let client = open(conn, &args.session, !conn.json).await?;
    let mut updates = client.watch();
    let snapshot = ready(&client).await?;
    let snapshot = match args.after_seq {
        Some(after) => backfill(&client, snapshot, |s| oldest(s) <= after + 1).await?,
        None => snapshot,
    };
    let mut printer = Printer::new(conn, &args.session);
    printer.printed = args
        .after_seq
        .unwrap_or_else(|| oldest(&snapshot).saturating_sub(1));
    let mut connected = true;
    let mut cursor = snapshot.cursor;
    loop {
        let snapshot = updates.borrow_and_update().clone();
        if let Some(fatal) = &snapshot.fatal {
            return Err(Failure::new(exit::UNAVAILABLE, fatal.to_string()));
        }
        // The cursor goes back only when the client rebuilt its events
        // from a replay (the server's log is behind what was seen).
        if snapshot.cursor < cursor {
            eprintln!("-- the server's log restarted; replaying its tail");
            printer.printed = oldest(&snapshot).saturating_sub(1);
        }
        cursor = snapshot.cursor;
        printer.show(&snapshot)?;
        if snapshot.connected != connected {
            connected = snapshot.connected;
            match (&snapshot.error, connected) {
                (_, true) => eprintln!("-- reconnected"),
                (Some(e), false) => eprintln!("-- disconnected ({e}); reconnecting"),
                (None, false) => eprintln!("-- disconnected; reconnecting"),
            }
        }
        if args.until_idle && idle(&snapshot) {
            printer.end_typing()?;
            return match outcome(&snapshot.events.to_vec()) {
                exit::OK => Ok(()),
                code => Err(Failure::new(code, "")),
            };
        }
        if updates.changed().await.is_err() {
            return Err(Failure::new(exit::UNAVAILABLE, "the session client closed"));
        }
    }
}

/// Prints the stored log (or its newest `--limit` events) and exits.
pub async fn history(args: &HistoryArgs) -> Result<(), Failure> {
    let conn = &args.connection;
    let client = open(conn, &args.session, false).await?;
    let snapshot = ready(&client).await?;
    let limit = args.limit;
    let snapshot = backfill(&client, snapshot, |s| limit > 0 && s.events.len() >= limit).await?;
    let mut printer = Printer::new(conn, &args.session);
    let skip = match limit {
        0 => 0,
        n => snapshot.events.len().saturating_sub(n),
    };
    printer.printed = snapshot.events.get(skip).map_or(0, |e| e.seq - 1);
    printer.show(&snapshot)?;
    client.close().await;
    Ok(())
}

/// The session client, once the session is known to exist and the token
/// is accepted: a Subscribe to an unknown session is valid (it goes live
/// when the session starts), and the client retries a refused stream for
/// ever, so GetSession answers both first.
async fn open(
    conn: &Connection,
    session: &str,
    live_typing: bool,
) -> Result<SessionClient, Failure> {
    conn.rpc(Some(session))?
        .get_session(pb::GetSessionRequest {
            session_id: session.to_owned(),
        })
        .await
        .map_err(|s| Failure::rpc("GetSession", &s))?;
    conn.session(session, live_typing)
}

/// The first snapshot that holds the replayed log.
async fn ready(client: &SessionClient) -> Result<Snapshot, Failure> {
    Ok(client
        .wait_for(|s| s.hydration == Hydration::Ready || s.fatal.is_some())
        .await?)
}

/// Pages older events in until `enough` holds or the log's start is held.
async fn backfill(
    client: &SessionClient,
    mut snapshot: Snapshot,
    enough: impl Fn(&Snapshot) -> bool,
) -> Result<Snapshot, Failure> {
    while snapshot.has_more_history && !enough(&snapshot) {
        client.fetch_history(None).await?;
        snapshot = client.snapshot();
    }
    Ok(snapshot)
}

/// The seq of the oldest event held (1 when none is).
fn oldest(snapshot: &Snapshot) -> u64 {
    snapshot.events.first().map_or(1, |e| e.seq)
}

/// The session has events and no turn is in progress.
fn idle(snapshot: &Snapshot) -> bool {
    snapshot.hydration == Hydration::Ready
        && snapshot.derived.head_seq > 0
        && snapshot.derived.status == Status::Idle
        && !snapshot.derived.turn_in_progress
}

/// How the latest turn ended, as an exit code, from the events since
/// its input (the last `input_sent`): stopped when they hold a stop
/// request; failed when they hold an error turn end or a run error, or
/// no turn end at all (the run ended mid-turn: crashed, killed, the server
/// restarted); else done. No input at all: no turn, done.
fn outcome(events: &[pb::Event]) -> u8 {
    let Some(start) = events
        .iter()
        .rposition(|e| matches!(e.payload, Some(Payload::InputSent(_))))
    else {
        return exit::OK;
    };
    let turn = &events[start..];
    let stopped = turn
        .iter()
        .any(|e| matches!(e.payload, Some(Payload::StopRequested(_))));
    let ends: Vec<bool> = turn
        .iter()
        .filter_map(|e| match &e.payload {
            Some(Payload::TurnEnd(t)) if !t.compact => Some(t.is_error),
            _ => None,
        })
        .collect();
    let errors = turn
        .iter()
        .any(|e| matches!(e.payload, Some(Payload::RunError(_))));
    if stopped {
        exit::TURN_STOPPED
    } else if errors || ends.is_empty() || ends.contains(&true) {
        exit::TURN_FAILED
    } else {
        exit::OK
    }
}

/// The text block being typed and how much of it is on the screen.
struct Typing {
    message_id: String,
    index: u32,
    shown: String,
    /// Its line is not ended yet: more text goes right after it. Once
    /// another line came between, more text goes on a new line after "…".
    open: bool,
}

/// Prints each event once, in seq order, and the answer as it is typed.
struct Printer<'a> {
    json: bool,
    session: &'a str,
    /// What the suggested `approve` / `deny` commands need beyond the
    /// session and request: the server, when this one was not found the
    /// way they would find it.
    flags: String,
    /// The newest seq printed.
    printed: u64,
    /// The partial text on the screen, its line not ended yet.
    typing: Option<Typing>,
}

impl<'a> Printer<'a> {
    fn new(conn: &Connection, session: &'a str) -> Self {
        let found_alike = conn.server == DEFAULT_SERVER
            || std::env::var(SERVER_ENV).is_ok_and(|s| s == conn.server);
        Self {
            json: conn.json,
            session,
            flags: if found_alike {
                String::new()
            } else {
                format!(" --server {}", conn.server)
            },
            printed: 0,
            typing: None,
        }
    }

    /// The events past the last printed, then the text being typed.
    fn show(&mut self, snapshot: &Snapshot) -> Result<(), Failure> {
        let after = self.printed;
        for event in snapshot.events.iter().filter(|e| e.seq > after) {
            if self.json {
                out::json(event)?;
            } else {
                self.event(event, snapshot)?;
            }
            self.printed = event.seq;
        }
        if !self.json {
            self.typed(&snapshot.partial)?;
        }
        Ok(())
    }

    fn event(&mut self, event: &pb::Event, snapshot: &Snapshot) -> Result<(), Failure> {
        match &event.payload {
            Some(Payload::PermissionRequested(p)) => {
                let pending = snapshot
                    .derived
                    .pending_permissions
                    .iter()
                    .any(|q| q.request_id == p.request_id);
                self.end_typing()?;
                render::permission_lines(self.session, p, pending, &self.flags)
                    .iter()
                    .try_for_each(|l| out::line(l))
            }
            Some(Payload::Content(c)) if c.parent_tool_use_id.is_empty() => {
                for block in &c.blocks {
                    if block.r#type == "text" {
                        self.recorded_text(&c.message_id, &block.text)?;
                    } else if let Some(line) = render::block_line(block, false) {
                        self.end_typing()?;
                        out::line(&line)?;
                    }
                }
                Ok(())
            }
            Some(Payload::TurnEnd(_) | Payload::RunEnd(_))
                if self.typing.as_ref().is_some_and(|t| !t.shown.is_empty()) =>
            {
                // The turn ended before the text being typed was recorded
                // (stopped, or the run died): say so, it is not in the log.
                self.end_typing()?;
                self.typing = None;
                out::line("-- (the typed text above was not recorded)")?;
                self.lines(event)
            }
            _ => self.lines(event),
        }
    }

    fn lines(&mut self, event: &pb::Event) -> Result<(), Failure> {
        let lines = render::event_lines(self.session, event);
        if !lines.is_empty() {
            self.end_typing()?;
        }
        lines.iter().try_for_each(|l| out::line(l))
    }

    /// A recorded text block: the rest of it when its start is what was
    /// typed on the screen, else all of it on a line of its own.
    fn recorded_text(&mut self, message_id: &str, text: &str) -> Result<(), Failure> {
        match self.typing.take() {
            Some(t) if t.message_id == message_id && text.starts_with(&t.shown) => {
                let rest = &text[t.shown.len()..];
                match (t.open, rest.is_empty()) {
                    (true, _) => out::line(rest),
                    (false, true) => Ok(()),
                    (false, false) => out::line(&format!("…{rest}")),
                }
            }
            typing => {
                self.typing = typing;
                self.end_typing()?;
                self.typing = None;
                out::line(text)
            }
        }
    }

    /// Live typing: the growth of the main thread's text block being
    /// written.
    fn typed(&mut self, partial: &Partial) -> Result<(), Failure> {
        let Some(block) = partial
            .main_thread()
            .filter(|b| b.block_type == DeltaBlockType::Text)
            .last()
        else {
            return Ok(());
        };
        if let Some(t) = &mut self.typing
            && t.message_id == block.message_id
            && t.index == block.index
            && block.text.starts_with(&t.shown)
        {
            let rest = &block.text[t.shown.len()..];
            if !rest.is_empty() {
                out::print(&if t.open {
                    rest.to_owned()
                } else {
                    format!("…{rest}")
                })?;
                t.open = true;
                t.shown.clone_from(&block.text);
            }
            return Ok(());
        }
        self.end_typing()?;
        out::print(&block.text)?;
        self.typing = Some(Typing {
            message_id: block.message_id.clone(),
            index: block.index,
            open: !block.text.is_empty(),
            shown: block.text.clone(),
        });
        Ok(())
    }

    /// Ends the line of text being typed, if open: what follows goes on a
    /// line of its own.
    fn end_typing(&mut self) -> Result<(), Failure> {
        match &mut self.typing {
            Some(t) if t.open => {
                t.open = false;
                out::line("")
            }
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(payload: Payload) -> pb::Event {
        pb::Event {
            payload: Some(payload),
            ..Default::default()
        }
    }

    fn turn_end(is_error: bool) -> pb::Event {
        event(Payload::TurnEnd(pb::TurnEnd {
            is_error,
            ..Default::default()
        }))
    }

    #[test]
    fn the_exit_code_says_how_the_latest_turn_ended() {
        let input = || event(Payload::InputSent(pb::InputSent::default()));
        let run_end = || event(Payload::RunEnd(pb::RunEnd::default()));
        assert_eq!(outcome(&[]), exit::OK, "no turn");
        assert_eq!(outcome(&[input(), turn_end(false)]), exit::OK);
        // An earlier failed turn does not count; a later idle end neither.
        assert_eq!(
            outcome(&[input(), turn_end(true), input(), turn_end(false), run_end()]),
            exit::OK
        );
        assert_eq!(outcome(&[input(), turn_end(true)]), exit::TURN_FAILED);
        assert_eq!(
            outcome(&[input(), run_end()]),
            exit::TURN_FAILED,
            "ended mid-turn"
        );
        let stop = event(Payload::StopRequested(pb::StopRequested::default()));
        assert_eq!(
            outcome(&[input(), stop, turn_end(true)]),
            exit::TURN_STOPPED
        );
    }
}
