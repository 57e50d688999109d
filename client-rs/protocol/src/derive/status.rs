//! Status and process-alive: the fold every other derive function builds on.

use crate::pb::{Event, SessionStatus, event::Payload};

/// What a session is doing, as one word.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Status {
    /// No run is live, or the live run has no turn in progress.
    #[default]
    Idle,
    /// A run with input pending was started and the CLI has not spoken yet.
    Starting,
    /// A turn is in progress.
    Streaming,
    /// A stop was requested while a turn (or start-up) was in progress, and
    /// the turn has not ended yet.
    Stopping,
}

impl Status {
    /// Lowercase name, as the vectors and the other ports spell it:
    /// "idle" | "starting" | "streaming" | "stopping".
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Idle => "idle",
            Status::Starting => "starting",
            Status::Streaming => "streaming",
            Status::Stopping => "stopping",
        }
    }
}

impl std::fmt::Display for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl From<Status> for SessionStatus {
    fn from(s: Status) -> Self {
        match s {
            Status::Idle => SessionStatus::Idle,
            Status::Starting => SessionStatus::Starting,
            Status::Streaming => SessionStatus::Streaming,
            Status::Stopping => SessionStatus::Stopping,
        }
    }
}

/// Incremental status: apply events one at a time, read the state at any
/// point. O(1) per event; the server keeps one per session on its hot path.
///
/// Rules (the contract every port obeys):
/// - `run_start` begins a run: the process is alive until the run's
///   `run_end`. A non-empty prompt (or content blocks) in its config means
///   input is pending, so a turn begins.
/// - `input_sent` (any source) while a run is live begins a turn, or is
///   folded into the turn already in progress.
/// - `turn_start` (the CLI began a turn on its own) begins a turn.
/// - Until the run's CLI has said anything (`run_ready`, or any other CLI
///   output: content, result, turn_end, turn_start, task frames, permission
///   requests), a turn in progress shows as *starting*; afterwards as
///   *streaming*.
/// - `turn_end` with `compact = false` ends the turn; `compact = true` marks
///   a compaction boundary and changes nothing.
/// - `stop_requested` while a turn is in progress makes it *stopping* until
///   the turn ends (`turn_end`) or the run ends (`run_end`); when nothing is
///   in progress it changes nothing.
/// - `run_end` ends everything: idle, process dead.
/// - Events that need a live run (input_sent, turn_start, stop_requested)
///   are ignored while none is live.
///
/// Serializable, so a server can store it beside the log and go on folding
/// from it later (its session index).
#[derive(Debug, Default, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct StatusFold {
    head_seq: u64,
    run_id: Option<String>,
    run_live: bool,
    /// The CLI of the live run has produced output.
    cli_spoke: bool,
    /// A turn (or the start-up input) is in progress.
    turn: bool,
    /// A stop was requested during the current turn.
    stopping: bool,
}

impl StatusFold {
    /// An empty fold: the state of an empty log.
    pub fn new() -> Self {
        Self::default()
    }

    /// Applies the next event of the log.
    pub fn apply(&mut self, e: &Event) {
        self.head_seq = self.head_seq.max(e.seq);
        if self.run_id.is_none() && !e.run_id.is_empty() {
            // Logs paged from the middle may lack the run_start.
            self.run_id = Some(e.run_id.clone());
        }
        let Some(p) = &e.payload else { return };
        if let Some(live) = run_liveness(p) {
            self.run_live = live;
        }
        match p {
            Payload::RunStart(rs) => {
                self.run_id = Some(e.run_id.clone());
                self.cli_spoke = false;
                self.stopping = false;
                self.turn = rs
                    .config
                    .as_ref()
                    .is_some_and(|c| !c.prompt.is_empty() || !c.content_blocks.is_empty());
            }
            Payload::RunEnd(_) => {
                self.turn = false;
                self.stopping = false;
                self.cli_spoke = false;
            }
            Payload::InputSent(_) => {
                if self.run_live {
                    self.turn = true;
                }
            }
            Payload::TurnStart(_) => {
                if self.run_live {
                    self.turn = true;
                    self.cli_spoke = true;
                }
            }
            Payload::StopRequested(_) => {
                if self.run_live && self.turn {
                    self.stopping = true;
                }
            }
            Payload::TurnEnd(te) => {
                if self.run_live {
                    self.cli_spoke = true;
                    if !te.compact {
                        self.turn = false;
                        self.stopping = false;
                    }
                }
            }
            Payload::RunReady(_)
            | Payload::Content(_)
            | Payload::Result(_)
            | Payload::TaskStarted(_)
            | Payload::TaskUpdated(_)
            | Payload::TaskNotification(_)
            | Payload::PermissionRequested(_) => {
                if self.run_live {
                    self.cli_spoke = true;
                }
            }
            // Harness-side records: neither begin nor end anything. An
            // unreadable stored event is not known to have done either.
            Payload::RunError(_)
            | Payload::PermissionResolved(_)
            | Payload::SettingChanged(_)
            | Payload::FilesRewound(_)
            | Payload::Unreadable(_)
            | Payload::TitleSet(_) => {}
        }
    }

    /// The derived status (see the rules on [`StatusFold`]).
    pub fn status(&self) -> Status {
        if !self.run_live || !self.turn {
            Status::Idle
        } else if self.stopping {
            Status::Stopping
        } else if !self.cli_spoke {
            Status::Starting
        } else {
            Status::Streaming
        }
    }

    /// True between a `run_start` and its `run_end`.
    pub fn process_alive(&self) -> bool {
        self.run_live
    }

    /// True when a run started and has no `run_end` yet (same as
    /// [`process_alive`](Self::process_alive); named for the server's
    /// "is a run live" checks).
    pub fn run_live(&self) -> bool {
        self.run_live
    }

    /// The run id of the latest `run_start` (or, in a log without one, the
    /// first run id seen). Stays set after the run ends: "the current or
    /// last run".
    pub fn current_run_id(&self) -> Option<&str> {
        self.run_id.as_deref()
    }

    /// True while a turn (or start-up with input pending) is in progress in
    /// a live run.
    pub fn turn_in_progress(&self) -> bool {
        self.run_live && self.turn
    }

    /// The highest seq applied (0 for an empty log).
    pub fn head_seq(&self) -> u64 {
        self.head_seq
    }
}

/// The session status after `events` (see [`StatusFold`] for the rules).
pub fn status(events: &[Event]) -> Status {
    fold(events).status()
}

/// What one event says about whether a run is live: `Some(true)` for a
/// `run_start`, `Some(false)` for a `run_end`, `None` for any other event
/// (nothing else moves [`StatusFold::run_live`]). So the newest event that
/// answers decides, and a reader going back from a log's head (the
/// server's start-up recovery) can stop at it.
pub fn run_liveness(payload: &Payload) -> Option<bool> {
    match payload {
        Payload::RunStart(_) => Some(true),
        Payload::RunEnd(_) => Some(false),
        _ => None,
    }
}

/// True when the log's latest run has a `run_start` and no `run_end`: the
/// CLI process exists (a keep-alive session between turns is idle but alive).
pub fn process_alive(events: &[Event]) -> bool {
    fold(events).process_alive()
}

/// Folds a whole slice.
pub(crate) fn fold(events: &[Event]) -> StatusFold {
    let mut f = StatusFold::new();
    for e in events {
        f.apply(e);
    }
    f
}
