//! The ACP decoder: an ACP agent's stdout lines (JSON-RPC 2.0) in, log
//! events out.

use agent_harness_protocol::pb::event::Payload;
use serde_json::Value;

use crate::adapter::{Decoder, DecoderSetup, StdoutLine};
use crate::decoder::line::{self, Read};
use crate::partial::{Change, Tracker};

/// Per-run decoder state for one ACP agent process.
#[derive(Debug)]
pub struct AcpDecoder {
    max_line_bytes: usize,
    agent: String,
    partial: Tracker,
}

impl AcpDecoder {
    /// A decoder for one run of the agent `agent` (its configured name,
    /// recorded in run_ready) spawned with `setup`.
    pub fn new(setup: &DecoderSetup, agent: &str) -> Self {
        Self {
            max_line_bytes: setup.max_line_bytes,
            agent: agent.to_owned(),
            partial: Tracker::new(setup.max_partial_bytes),
        }
    }
}

impl Decoder for AcpDecoder {
    fn line(&mut self, line: &StdoutLine) -> Vec<(Payload, String)> {
        let (text, obj) = match line::object(line, self.max_line_bytes) {
            Read::Unreadable(unreadable) => return vec![*unreadable],
            Read::Blank => return Vec::new(),
            Read::Object(text, obj) => (text, obj),
        };
        if obj.get("method").and_then(Value::as_str).is_none() && obj.get("id").is_none() {
            return vec![line::bad_line(
                "an object without a \"method\" or an \"id\"",
                text,
            )];
        }
        tracing::debug!(agent = %self.agent, "ACP line not decoded yet");
        Vec::new()
    }

    fn input_sent(&mut self) {}

    fn take_partial(&mut self) -> Vec<Change> {
        self.partial.take()
    }

    fn partial_dropped(&self) -> u64 {
        self.partial.dropped()
    }
}
