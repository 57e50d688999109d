//! The stop ladder, as a pure state machine: it is told what happened (a
//! Stop, the idle timeout, shutdown, a turn ending, a timer firing, the
//! process exiting) and the time, and answers what to do to the process
//! now and when to wake it next. The run task performs the actions and
//! sleeps until the deadline; nothing here touches a process or a clock.
//!
//! The rungs (docs/ARCHITECTURE.md, "Stop always works"):
//! - **Stop**: `interrupt`; if the turn has not ended `stop_grace` later,
//!   SIGINT; then SIGTERM and SIGKILL, `kill_grace` apart. A process with
//!   no interrupt (one-shot) starts at SIGINT.
//! - **Idle timeout**: close stdin (the CLI exits on its own); SIGTERM
//!   `kill_grace` later if it has not, then SIGKILL.
//! - **Shutdown**: SIGINT now, unless signals are already under way; then
//!   as above.
//!
//! An interrupt that works (the turn ends) takes the ladder back to off:
//! the process stays for the next turn.

use tokio::time::{Duration, Instant};

use crate::adapter::Signal;

/// Why the harness is ending (or stopping) the process, which decides the
/// run_end reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Cause {
    /// A Stop request.
    User,
    /// `--idle-timeout`.
    Idle,
    /// Server shutdown.
    Shutdown,
}

/// What happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Input {
    /// A Stop request.
    Stop,
    /// The interrupt could not be delivered (or the process has none).
    InterruptFailed,
    /// The idle timeout passed.
    Idle,
    /// The server is shutting down.
    Shutdown,
    /// The current turn ended (a non-compact `turn_end`).
    TurnEnded,
    /// The deadline the ladder asked for has come (or passed).
    TimerFired,
    /// The process exited.
    Exited,
}

/// What to do to the process now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Action {
    /// Send the stream-json interrupt; report [`Input::InterruptFailed`]
    /// when it could not be.
    Interrupt,
    /// Signal the process group.
    Signal(Signal),
    /// Close stdin.
    CloseStdin,
}

/// Where the ladder is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Rung {
    /// Not stopping.
    Off,
    /// Interrupt sent; waiting for the turn to end until `deadline`.
    Interrupted { deadline: Instant },
    /// `next` is sent at `deadline`.
    Signal { next: Signal, deadline: Instant },
    /// SIGKILL sent; only the exit can follow.
    Killed,
    /// The process has exited.
    Exited,
}

/// The stop ladder of one process.
#[derive(Debug, Clone)]
pub(super) struct Ladder {
    rung: Rung,
    cause: Option<Cause>,
    stop_grace: Duration,
    kill_grace: Duration,
}

impl Ladder {
    /// A ladder at rest, with these graces.
    pub(super) fn new(stop_grace: Duration, kill_grace: Duration) -> Self {
        Self {
            rung: Rung::Off,
            cause: None,
            stop_grace,
            kill_grace,
        }
    }

    /// Why the process is being ended, if it is.
    pub(super) fn cause(&self) -> Option<Cause> {
        self.cause
    }

    /// True from a Stop, idle timeout or shutdown until the interrupt
    /// worked: a second Stop is then a no-op.
    pub(super) fn stopping(&self) -> bool {
        self.cause.is_some() || !matches!(self.rung, Rung::Off)
    }

    /// True when the process will not take another turn: signals are
    /// under way, or it is being ended for idleness or shutdown.
    pub(super) fn ending(&self) -> bool {
        matches!(self.rung, Rung::Signal { .. } | Rung::Killed | Rung::Exited)
            || matches!(self.cause, Some(Cause::Idle | Cause::Shutdown))
    }

    /// When the ladder wants [`Input::TimerFired`] next, if at all.
    pub(super) fn deadline(&self) -> Option<Instant> {
        match self.rung {
            Rung::Interrupted { deadline } | Rung::Signal { deadline, .. } => Some(deadline),
            Rung::Off | Rung::Killed | Rung::Exited => None,
        }
    }

    /// Feeds one input at time `now`; returns what to do now (the caller
    /// does it before the next input).
    pub(super) fn step(&mut self, input: Input, now: Instant) -> Option<Action> {
        if self.rung == Rung::Exited {
            return None;
        }
        match input {
            Input::Stop if !self.stopping() => {
                self.cause = Some(Cause::User);
                self.rung = Rung::Interrupted {
                    deadline: now + self.stop_grace,
                };
                Some(Action::Interrupt)
            }
            Input::InterruptFailed if matches!(self.rung, Rung::Interrupted { .. }) => {
                Some(self.signal(Signal::Int, now))
            }
            Input::Idle if !self.stopping() => {
                self.cause = Some(Cause::Idle);
                self.rung = Rung::Signal {
                    next: Signal::Term,
                    deadline: now + self.kill_grace,
                };
                Some(Action::CloseStdin)
            }
            Input::Shutdown if self.cause != Some(Cause::Shutdown) => {
                self.cause = Some(Cause::Shutdown);
                match self.rung {
                    Rung::Off | Rung::Interrupted { .. } => Some(self.signal(Signal::Int, now)),
                    // Already signalling: the ladder in progress is as fast.
                    _ => None,
                }
            }
            Input::TurnEnded if matches!(self.rung, Rung::Interrupted { .. }) => {
                // The interrupt worked: the process stays for the next turn.
                self.rung = Rung::Off;
                self.cause = None;
                None
            }
            Input::TimerFired => match self.rung {
                Rung::Interrupted { deadline } if deadline <= now => {
                    Some(self.signal(Signal::Int, now))
                }
                Rung::Signal { next, deadline } if deadline <= now => Some(self.signal(next, now)),
                _ => None,
            },
            Input::Exited => {
                self.rung = Rung::Exited;
                None
            }
            _ => None,
        }
    }

    /// Moves to "`sig` sent" and arms the next rung.
    fn signal(&mut self, sig: Signal, now: Instant) -> Action {
        self.rung = match sig {
            Signal::Int => Rung::Signal {
                next: Signal::Term,
                deadline: now + self.kill_grace,
            },
            Signal::Term => Rung::Signal {
                next: Signal::Kill,
                deadline: now + self.kill_grace,
            },
            Signal::Kill => Rung::Killed,
        };
        Action::Signal(sig)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const STOP: Duration = Duration::from_secs(5);
    const KILL: Duration = Duration::from_secs(2);

    fn ladder() -> (Ladder, Instant) {
        (Ladder::new(STOP, KILL), Instant::now())
    }

    /// Fires the timer at each deadline until the ladder has none; returns
    /// (offset from `t0`, action) for each rung.
    fn run_out(l: &mut Ladder, t0: Instant) -> Vec<(Duration, Action)> {
        let mut out = Vec::new();
        while let Some(d) = l.deadline() {
            // Early wake-ups change nothing.
            assert_eq!(
                l.step(Input::TimerFired, d - Duration::from_millis(1)),
                None
            );
            let a = l
                .step(Input::TimerFired, d)
                .expect("an action at the deadline");
            out.push((d - t0, a));
        }
        out
    }

    #[test]
    fn stop_escalates_interrupt_sigint_sigterm_sigkill() {
        let (mut l, t0) = ladder();
        assert!(!l.stopping() && !l.ending());
        assert_eq!(l.step(Input::Stop, t0), Some(Action::Interrupt));
        assert_eq!(l.cause(), Some(Cause::User));
        assert!(
            l.stopping() && !l.ending(),
            "an interrupt keeps the process"
        );
        assert_eq!(l.deadline(), Some(t0 + STOP));
        assert_eq!(
            run_out(&mut l, t0),
            [
                (STOP, Action::Signal(Signal::Int)),
                (STOP + KILL, Action::Signal(Signal::Term)),
                (STOP + KILL * 2, Action::Signal(Signal::Kill)),
            ]
        );
        assert!(l.ending());
        assert_eq!(l.step(Input::Exited, t0 + STOP * 9), None);
        assert_eq!(l.cause(), Some(Cause::User));
    }

    #[test]
    fn an_interrupt_that_ends_the_turn_stops_the_ladder() {
        let (mut l, t0) = ladder();
        l.step(Input::Stop, t0);
        assert_eq!(l.step(Input::TurnEnded, t0 + KILL), None);
        assert!(!l.stopping());
        assert_eq!((l.cause(), l.deadline()), (None, None));
        // The next turn can be stopped again.
        assert_eq!(l.step(Input::Stop, t0 + STOP), Some(Action::Interrupt));
    }

    #[test]
    fn stop_is_idempotent() {
        let (mut l, t0) = ladder();
        l.step(Input::Stop, t0);
        assert_eq!(l.step(Input::Stop, t0 + KILL), None);
        assert_eq!(l.deadline(), Some(t0 + STOP), "a second Stop moves nothing");
    }

    #[test]
    fn without_an_interrupt_signals_start_at_once() {
        let (mut l, t0) = ladder();
        assert_eq!(l.step(Input::Stop, t0), Some(Action::Interrupt));
        assert_eq!(
            l.step(Input::InterruptFailed, t0),
            Some(Action::Signal(Signal::Int))
        );
        assert!(l.ending());
        assert_eq!(
            run_out(&mut l, t0),
            [
                (KILL, Action::Signal(Signal::Term)),
                (KILL * 2, Action::Signal(Signal::Kill)),
            ]
        );
    }

    #[test]
    fn a_turn_end_after_signals_changes_nothing() {
        let (mut l, t0) = ladder();
        l.step(Input::Stop, t0);
        l.step(Input::TimerFired, t0 + STOP);
        assert_eq!(l.step(Input::TurnEnded, t0 + STOP), None);
        assert_eq!(l.deadline(), Some(t0 + STOP + KILL));
        assert!(l.ending());
    }

    #[test]
    fn idle_closes_stdin_then_sigterm_then_sigkill() {
        let (mut l, t0) = ladder();
        assert_eq!(l.step(Input::Idle, t0), Some(Action::CloseStdin));
        assert_eq!(l.cause(), Some(Cause::Idle));
        assert!(l.ending());
        // A Stop during it is a no-op; so is a turn end.
        assert_eq!(l.step(Input::Stop, t0), None);
        assert_eq!(l.step(Input::TurnEnded, t0), None);
        assert_eq!(
            run_out(&mut l, t0),
            [
                (KILL, Action::Signal(Signal::Term)),
                (KILL * 2, Action::Signal(Signal::Kill)),
            ]
        );
    }

    #[test]
    fn shutdown_signals_at_once_and_overrides_the_cause() {
        let (mut l, t0) = ladder();
        assert_eq!(
            l.step(Input::Shutdown, t0),
            Some(Action::Signal(Signal::Int))
        );
        assert_eq!(l.cause(), Some(Cause::Shutdown));
        assert_eq!(l.step(Input::Shutdown, t0), None, "once");

        // During an interrupt: escalates now instead of after stop_grace.
        let (mut l, t0) = ladder();
        l.step(Input::Stop, t0);
        assert_eq!(
            l.step(Input::Shutdown, t0 + KILL),
            Some(Action::Signal(Signal::Int))
        );
        assert_eq!(l.cause(), Some(Cause::Shutdown));
        assert_eq!(l.deadline(), Some(t0 + KILL * 2));
        assert_eq!(l.step(Input::TurnEnded, t0 + KILL), None);
        assert!(l.ending(), "a turn end does not undo a shutdown");

        // While signals are under way: the ladder keeps its pace.
        let (mut l, t0) = ladder();
        l.step(Input::Idle, t0);
        assert_eq!(l.step(Input::Shutdown, t0), None);
        assert_eq!(l.cause(), Some(Cause::Shutdown));
        assert_eq!(l.deadline(), Some(t0 + KILL));
    }

    #[test]
    fn nothing_happens_after_the_exit() {
        let (mut l, t0) = ladder();
        l.step(Input::Stop, t0);
        l.step(Input::Exited, t0);
        assert_eq!(l.deadline(), None);
        for input in [Input::Stop, Input::Idle, Input::Shutdown, Input::TimerFired] {
            assert_eq!(l.step(input, t0 + STOP * 9), None, "{input:?}");
        }
        assert!(l.ending());
    }
}
