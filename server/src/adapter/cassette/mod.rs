//! Cassettes: record a real process's stdout, stdin and exit with time
//! offsets, and replay them as a [`ProcessAdapter`] without any process.
//!
//! Format (JSONL): a header line
//! `{"type":"header","cli_version","argv","date","adapter"}`, then one
//! record per line: `{"t":ms,"dir":"out","line":…}` (a too-long line adds
//! `"too_long":len` and keeps only its head), `{"t":ms,"dir":"in","kind":…,"line":…}`
//! (`kind` is `initial`, `user`, `interrupt`, `permission`, `close` or
//! `signal`), and `{"t":ms,"dir":"exit","code","signal","stderr_tail"}`.
//!
//! Replay plays "out" lines with the recorded gaps times `timescale`, stops
//! at each "in" record (except `initial`) until the harness does something
//! (write, interrupt, respond_permission, close_stdin or the recorded
//! signal), and resolves `exited` with the recorded exit.
//!
//! - [`format`]: the file format ([`Cassette`], its records, parse and write);
//! - [`record`]: [`CassetteRecorder`], wrapping any adapter;
//! - [`replay`]: [`CassetteAdapter`], a cassette played back as a process;
//! - [`script`]: [`record_cassette`], a script of steps driven against a
//!   real process while it is recorded.

mod format;
mod record;
mod replay;
mod script;

pub use format::{Cassette, CassetteError, CassetteHeader, CassetteRecord};
pub use record::CassetteRecorder;
pub use replay::CassetteAdapter;
pub use script::{LAST_TASK, ScriptStep, record_cassette};
