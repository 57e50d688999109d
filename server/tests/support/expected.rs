//! `cassettes/expected.json`: what replaying each committed recording
//! through the normalizer must yield (the event kinds in order, spelled as
//! [`super::common::detailed_kind`] spells them), and for a cassette the
//! adapter it was recorded with and its exit code. The one table of these
//! expectations: the replay, recording and transcript tests all read it,
//! and it is plain JSON so that any other suite can too.
#![allow(dead_code)]

use std::collections::BTreeMap;

use serde::Deserialize;

use super::common::cassettes_dir;

/// The whole table.
#[derive(Debug, Deserialize)]
pub struct Table {
    /// How the table is spelled, for a reader of the file.
    pub about: String,
    /// By cassette name (the file stem of `cassettes/NAME.cassette.jsonl`).
    pub cassettes: BTreeMap<String, Cassette>,
    /// By transcript name (`cassettes/transcripts/NAME.transcript.jsonl`).
    pub transcripts: BTreeMap<String, Transcript>,
}

/// What one cassette yields.
#[derive(Debug, Clone, Deserialize)]
pub struct Cassette {
    /// The adapter it was recorded with (its header's): "interactive" or
    /// "cli".
    pub adapter: String,
    /// The recorded exit code (`null`: ended by a signal).
    pub exit_code: Option<i32>,
    /// The event kinds, in order.
    pub events: Vec<String>,
}

/// What one transcript yields.
#[derive(Debug, Clone, Deserialize)]
pub struct Transcript {
    /// The event kinds, in order.
    pub events: Vec<String>,
}

/// The table, read from the repository.
pub fn table() -> Table {
    let path = cassettes_dir().join("expected.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// What cassette `name` yields.
pub fn cassette(name: &str) -> Cassette {
    table()
        .cassettes
        .remove(name)
        .unwrap_or_else(|| panic!("cassettes/expected.json has no cassette {name}"))
}
