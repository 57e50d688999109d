//! The cassette file format: a header, then records, one JSON object per line.

use std::path::PathBuf;

use agent_harness_protocol::vocab::agent;
use serde_json::{Value, json};

use crate::adapter::{AdapterError, ExitInfo, Signal, StdoutLine};

/// Errors reading or writing a cassette.
#[derive(Debug, thiserror::Error)]
pub enum CassetteError {
    /// The file could not be read or written.
    #[error("cassette {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// A line is not a valid cassette record.
    #[error("cassette line {line}: {message}")]
    Format {
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        message: String,
    },
    /// Spawning or driving the recorded process failed.
    #[error("adapter: {0}")]
    Adapter(#[from] AdapterError),
    /// The recording script did not finish in time.
    #[error("recording timed out: {0}")]
    Timeout(String),
}

/// The header of a cassette.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CassetteHeader {
    /// The CLI version (from its first system/init).
    pub cli_version: String,
    /// The argv the process ran with (without the binary).
    pub argv: Vec<String>,
    /// RFC 3339 date of the recording (UTC).
    pub date: String,
    /// The adapter that ran it ("interactive", "cli", "codex").
    pub adapter: String,
    /// The agent it was recorded from: "" (claude, as every cassette
    /// written before Codex could be recorded) or "codex". Replay decodes
    /// its lines as that agent's.
    pub agent: String,
}

impl CassetteHeader {
    /// The agent's name as a run names it ("claude" for "").
    pub fn agent(&self) -> &str {
        agent::of_run(&self.agent)
    }
}

/// The agent a cassette of adapter `name` is recorded from, as the header
/// spells it: "codex" for the Codex adapter, "" (claude) otherwise.
pub(super) fn agent_of_adapter(name: &str) -> &'static str {
    if name == agent::CODEX {
        agent::CODEX
    } else {
        ""
    }
}

/// One recorded record after the header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CassetteRecord {
    /// A stdout line.
    Out {
        /// Milliseconds since spawn.
        t: u64,
        /// The line.
        line: StdoutLine,
    },
    /// Something the harness sent.
    In {
        /// Milliseconds since spawn.
        t: u64,
        /// `initial`, `user`, `interrupt`, `permission`, `close`, `signal`.
        kind: String,
        /// The stdin line (or the signal name).
        line: String,
    },
    /// The process exited.
    Exit {
        /// Milliseconds since spawn.
        t: u64,
        /// How.
        info: ExitInfo,
    },
}

/// A parsed cassette.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cassette {
    /// The header.
    pub header: CassetteHeader,
    /// Records in order.
    pub records: Vec<CassetteRecord>,
}

impl Cassette {
    /// Parse a cassette's text.
    pub fn parse(text: &str) -> Result<Self, CassetteError> {
        let mut lines = text
            .lines()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty());
        let (_, first) = lines.next().ok_or(CassetteError::Format {
            line: 1,
            message: "empty cassette".into(),
        })?;
        let h: Value = serde_json::from_str(first).map_err(|e| fmt_err(0, e.to_string()))?;
        if h["type"] != "header" {
            return Err(fmt_err(0, "the first line must be the header".into()));
        }
        let header = CassetteHeader {
            cli_version: h["cli_version"].as_str().unwrap_or_default().into(),
            argv: h["argv"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(|v| v.as_str().map(str::to_string))
                        .collect()
                })
                .unwrap_or_default(),
            date: h["date"].as_str().unwrap_or_default().into(),
            adapter: h["adapter"].as_str().unwrap_or_default().into(),
            agent: h["agent"].as_str().unwrap_or_default().into(),
        };
        let mut records = Vec::new();
        for (i, l) in lines {
            let v: Value = serde_json::from_str(l).map_err(|e| fmt_err(i, e.to_string()))?;
            let t = v["t"]
                .as_u64()
                .ok_or_else(|| fmt_err(i, "missing t".into()))?;
            let line = v["line"].as_str().unwrap_or_default().to_string();
            records.push(match v["dir"].as_str() {
                Some("out") => CassetteRecord::Out {
                    t,
                    line: match v["too_long"].as_u64() {
                        Some(len) => StdoutLine::TooLong {
                            head: line,
                            len: len as usize,
                        },
                        None => StdoutLine::Line(line),
                    },
                },
                Some("in") => CassetteRecord::In {
                    t,
                    kind: v["kind"].as_str().unwrap_or("user").into(),
                    line,
                },
                Some("exit") => CassetteRecord::Exit {
                    t,
                    info: ExitInfo {
                        code: v["code"].as_i64().map(|c| c as i32),
                        signal: v["signal"].as_str().map(str::to_string),
                        stderr_tail: v["stderr_tail"].as_str().unwrap_or_default().into(),
                    },
                },
                other => return Err(fmt_err(i, format!("unknown dir {other:?}"))),
            });
        }
        Ok(Self { header, records })
    }

    /// The cassette as JSONL text.
    pub fn to_jsonl(&self) -> String {
        let mut header = json!({
            "type": "header",
            "cli_version": self.header.cli_version,
            "argv": self.header.argv,
            "date": self.header.date,
            "adapter": self.header.adapter,
        });
        // Claude's cassettes keep the header they always had.
        if !self.header.agent.is_empty() {
            header["agent"] = json!(self.header.agent);
        }
        let mut out = header.to_string();
        out.push('\n');
        for r in &self.records {
            let v = match r {
                CassetteRecord::Out {
                    t,
                    line: StdoutLine::Line(l),
                } => json!({"t": t, "dir": "out", "line": l}),
                CassetteRecord::Out {
                    t,
                    line: StdoutLine::TooLong { head, len },
                } => json!({"t": t, "dir": "out", "line": head, "too_long": len}),
                CassetteRecord::In { t, kind, line } => {
                    json!({"t": t, "dir": "in", "kind": kind, "line": line})
                }
                CassetteRecord::Exit { t, info } => json!({
                    "t": t, "dir": "exit", "code": info.code, "signal": info.signal,
                    "stderr_tail": info.stderr_tail,
                }),
            };
            out.push_str(&v.to_string());
            out.push('\n');
        }
        out
    }
}

fn fmt_err(i: usize, message: String) -> CassetteError {
    CassetteError::Format {
        line: i + 1,
        message,
    }
}

/// How a signal is written in a record.
pub(super) fn signal_label(signal: Signal) -> &'static str {
    match signal {
        Signal::Int => "SIGINT",
        Signal::Term => "SIGTERM",
        Signal::Kill => "SIGKILL",
    }
}
