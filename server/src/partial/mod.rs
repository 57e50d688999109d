//! Live typing: the assistant message the CLI is writing, from its
//! `stream_event` lines (`--include-partial-messages`), streamed to the
//! Subscribe streams that ask for it (`include_deltas`) and never stored.
//!
//! Three parts, one per side of the flow:
//! - [`Tracker`] (in the run's decoder) reads the agent's lines and says
//!   what changed ([`Change`]): a block started, a fragment was appended, a
//!   block is now durable (its `assistant` line), the turn ended. It keeps
//!   no text, only which blocks are in flight and their sizes, and it
//!   enforces the per-session byte budget.
//! - [`Board`] (one per resident session, beside the log's head) holds the
//!   text of the blocks in flight, and for each block how long its text was
//!   at each log head it was written after. Of a batch of stdout lines, the
//!   run task publishes the changes of the lines before the batch's first
//!   event at once; closes the blocks the batch completes before its
//!   events are committed; and applies the rest after. So a stream sends a
//!   block's text only up to what the CLI wrote before the next event it
//!   has not sent, never a fragment ahead of an event the CLI wrote before
//!   it, and nothing of a block once it has sent the block's `content`;
//!   while a block's last fragments, even when they share a batch with its
//!   `assistant` line, go out before its `content`. Per block, the
//!   fragments a stream that keeps up receives join to exactly the text its
//!   `content` stores (unless the block passed the byte budget).
//! - [`Cursor`] (one per subscriber that asked) remembers how much of each
//!   block it has sent and turns the board into deltas: the whole text of a
//!   block it has not sent yet, then only what was appended since. A slow
//!   subscriber therefore gets fragments coalesced, never a queue, and never
//!   holds up anyone else.
//!
//! What the CLI 2.1.197 writes (`cli-transcripts/partial_messages`):
//! `message_start` (the message id), then per block `content_block_start`
//! (index, type; `tool_use` names the tool and its id), any number of
//! `content_block_delta` (`text_delta`, `thinking_delta`,
//! `input_json_delta`; `signature_delta` is ignored), then the complete
//! `assistant` line for that block, *before* its `content_block_stop`; then
//! `message_delta` and `message_stop`. Each `assistant` line carries one
//! block, in index order, so the n-th `assistant` line of a message
//! completes its n-th block.
//!
//! A tool's output while it runs (Codex's command output) is a block of its
//! own, keyed by its tool_use id instead of a message
//! ([`Tracker::output`]); it is done when the tool's `result` is committed,
//! and cleared at the turn's or the run's end like any other block.

mod board;
mod track;

pub use board::{Board, Cursor, KEEP_DONE, State};
pub use track::Tracker;

use std::sync::Arc;

/// The default per-session budget of partial text (`--max-partial-bytes`).
pub const DEFAULT_MAX_PARTIAL_BYTES: usize = 1024 * 1024;

/// What a block holds while it is being written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BlockKind {
    /// Answer text.
    Text,
    /// Extended thinking.
    Thinking,
    /// A tool call's input, as the JSON text streamed so far.
    ToolInput {
        /// The tool's name.
        tool_name: String,
        /// The tool_use id.
        tool_use_id: String,
    },
    /// What a running tool has printed so far. It belongs to no message:
    /// its block is keyed by the tool_use id (as its `message_id`), so
    /// several tools can stream at once, and its `result` supersedes it.
    ToolOutput {
        /// The tool's name.
        tool_name: String,
        /// The tool_use id.
        tool_use_id: String,
    },
}

/// One change to the blocks in flight.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// A block began.
    Started {
        /// The API message id (a tool-output block's tool_use id).
        message_id: Arc<str>,
        /// The Agent tool_use id for a subagent's message, else empty.
        parent_tool_use_id: Arc<str>,
        /// The block's index in its message.
        index: u32,
        /// What it holds.
        kind: BlockKind,
    },
    /// `fragment` was appended to a block.
    Fragment {
        /// The API message id.
        message_id: Arc<str>,
        /// The block.
        index: u32,
        /// What was appended.
        fragment: String,
    },
    /// The block is complete and durable as a `content` event (or the
    /// message ended without one for it).
    Done {
        /// The API message id.
        message_id: Arc<str>,
        /// The block; `None` for every block of the message.
        index: Option<u32>,
    },
    /// The turn ended: nothing is in flight any more.
    Cleared,
}

impl Change {
    /// Whether this change removes partial text (applied before the commit
    /// as well as after it; see the module docs).
    pub fn removes(&self) -> bool {
        matches!(self, Change::Done { .. } | Change::Cleared)
    }
}
