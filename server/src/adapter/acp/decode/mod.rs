//! Placeholder until the ACP decoder lands: every line is a bad line.

use agent_harness_protocol::pb::event::Payload;

use crate::decoder::{Decoder, DecoderSetup};
use crate::partial::Change;
use crate::process::StdoutLine;

/// The ACP decoder.
pub struct AcpDecoder;

impl AcpDecoder {
    /// A decoder for one run of `agent`.
    pub fn new(_setup: &DecoderSetup, _agent: &str) -> Self {
        Self
    }
}

impl Decoder for AcpDecoder {
    fn line(&mut self, _line: &StdoutLine) -> Vec<(Payload, String)> {
        Vec::new()
    }
    fn input_sent(&mut self) {}
    fn take_partial(&mut self) -> Vec<Change> {
        Vec::new()
    }
    fn partial_dropped(&self) -> u64 {
        0
    }
}
