//! Cassettes: record a real process's stdout, stdin and exit with time
//! offsets, and replay them as a [`ProcessAdapter`] without any process.
//!
//! A cassette is one agent's process: the claude CLI's, or Codex's
//! app-server's. Its header names the agent (`agent`, absent for claude),
//! and replay decodes its lines with that agent's decoder.
//!
//! Format (JSONL): a header line
//! `{"type":"header","cli_version","argv","date","adapter","agent"}`, then one
//! record per line: `{"t":ms,"dir":"out","line":…}` (a too-long line adds
//! `"too_long":len` and keeps only its head), `{"t":ms,"dir":"in","kind":…,"line":…}`
//! (`kind` is `initial`, `user`, `interrupt`, `permission`, `control`,
//! `close` or `signal`; `line` in the agent's stdin protocol), and
//! `{"t":ms,"dir":"exit","code","signal","stderr_tail"}`.
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
