//! Writing to stdout: text lines, or one proto3-JSON object per line. A
//! reader that closed the pipe (`agent-harness ls | head`) ends the
//! command quietly with code 0 instead of a panic.

use std::io::Write;

use super::exit::{Failure, OK, USAGE};

/// Writes `text` to stdout and flushes (a partial line of live typing is
/// shown at once).
pub fn print(text: &str) -> Result<(), Failure> {
    let mut stdout = std::io::stdout().lock();
    stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::BrokenPipe => Failure::new(OK, ""),
            _ => Failure::new(USAGE, format!("cannot write to stdout: {e}")),
        })
}

/// Writes one line.
pub fn line(text: &str) -> Result<(), Failure> {
    print(&format!("{text}\n"))
}

/// Writes `value` as one line of JSON (the proto3 JSON mapping, for the
/// generated types).
pub fn json(value: &impl serde::Serialize) -> Result<(), Failure> {
    let text = serde_json::to_string(value)
        .map_err(|e| Failure::new(USAGE, format!("cannot write JSON: {e}")))?;
    line(&text)
}
