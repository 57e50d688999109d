//! Receipts of keyed calls (docs/api.md, "Retry safety"): what a Start, Send,
//! Stop or RespondPermission carrying an `idempotency_key` did, so that its
//! repeat answers the same and changes nothing.
//!
//! A receipt is written in the same transaction as the events its call
//! appended (see [`crate::manager`]'s receipts module for why), keyed by
//! `(session_id, key)`, and pruned once older than the server's TTL. Stores
//! keep them on disk only: memory does not grow with the number of keys.

use serde::{Deserialize, Serialize};

/// What one keyed call did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Receipt {
    /// The session the call was on.
    pub session_id: String,
    /// The client's `idempotency_key`.
    pub key: String,
    /// When the call was applied, Unix milliseconds: the TTL counts from here.
    pub created_ms: i64,
    /// Hash of the request (which RPC, and every field but the key): a
    /// repeat must match it, or it is a different request under the same key.
    pub fingerprint: String,
    /// The answer the call gave (its repeats give it again).
    pub outcome: Outcome,
}

/// The response of a keyed call, per RPC.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "rpc", rename_all = "snake_case")]
pub enum Outcome {
    /// `StartResponse`.
    Start {
        /// The run started.
        run_id: String,
        /// The adapter's process id ("" when the server stopped before the
        /// spawn was recorded).
        process_id: String,
    },
    /// `SendResponse`.
    Send {
        /// The run that got the input.
        run_id: String,
    },
    /// `StopResponse`.
    Stop {
        /// Whether a stop was under way.
        stopping: bool,
    },
    /// `RespondPermissionResponse` (empty).
    RespondPermission,
    /// `SetModelResponse`, `SetPermissionModeResponse`,
    /// `SetMaxThinkingTokensResponse`.
    Setting {
        /// `SettingApplied` as its number.
        applied: i32,
        /// The seq of the setting_changed event.
        seq: u64,
    },
    /// `RewindFilesResponse`.
    RewindFiles {
        /// The files restored.
        files_changed: Vec<String>,
        /// Lines added back.
        insertions: u64,
        /// Lines taken away.
        deletions: u64,
        /// The seq of the files_rewound event.
        seq: u64,
    },
    /// `StopTaskResponse` (empty).
    StopTask,
    /// `DeleteSessionResponse` (empty). Written in the deletion's own
    /// transaction, so a retry after the session is gone still succeeds.
    DeleteSession,
}

impl Outcome {
    /// The RPC's name, for messages.
    pub fn rpc(&self) -> &'static str {
        match self {
            Outcome::Start { .. } => "Start",
            Outcome::Send { .. } => "Send",
            Outcome::Stop { .. } => "Stop",
            Outcome::RespondPermission => "RespondPermission",
            Outcome::Setting { .. } => "a setting change",
            Outcome::RewindFiles { .. } => "RewindFiles",
            Outcome::StopTask => "StopTask",
            Outcome::DeleteSession => "DeleteSession",
        }
    }
}

/// A change to the receipts, committed with a batch of events.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReceiptWrite {
    /// Records (or replaces) a receipt.
    Put(Receipt),
    /// Forgets the receipt of `(session_id, key)`: its call turned out to
    /// fail after all (a spawn that failed after `run_start` was recorded),
    /// and a failed call leaves no receipt.
    Remove {
        /// The session.
        session_id: String,
        /// The key.
        key: String,
    },
}

pub(super) fn encode(receipt: &Receipt) -> Vec<u8> {
    // A plain struct of strings, integers and a tagged enum cannot fail.
    serde_json::to_vec(receipt).unwrap_or_default()
}

/// A stored receipt; `None` (with a warning) for a row that cannot be
/// decoded: the key then reads as never used, rather than failing every
/// call that carries it.
pub(super) fn decode(session_id: &str, bytes: &[u8]) -> Option<Receipt> {
    serde_json::from_slice(bytes)
        .inspect_err(|e| {
            tracing::warn!(session_id, error = %e, "stored receipt cannot be decoded; ignored");
        })
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_receipt_round_trips_as_json() {
        for outcome in [
            Outcome::Start {
                run_id: "r".into(),
                process_id: "pid:1".into(),
            },
            Outcome::Send { run_id: "r".into() },
            Outcome::Stop { stopping: true },
            Outcome::RespondPermission,
        ] {
            let r = Receipt {
                session_id: "s".into(),
                key: "k".into(),
                created_ms: 7,
                fingerprint: "f".into(),
                outcome,
            };
            assert_eq!(decode("s", &encode(&r)), Some(r));
        }
    }
}
