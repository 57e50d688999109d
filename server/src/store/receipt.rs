//! Receipts of keyed calls (docs/api.md, "Retry safety"): what a call
//! carrying an `idempotency_key` answered, so that its repeat answers the
//! same and changes nothing.
//!
//! A receipt is written in the same transaction as the events its call
//! appended (see [`crate::manager`]'s receipts module for why), keyed by
//! `(session_id, key)`, and pruned once older than the server's TTL. Stores
//! keep them on disk only: memory does not grow with the number of keys.
//!
//! The store does not know what the calls are: it keeps the answer as the
//! bytes its caller encoded, with the name the caller gave the call (for
//! messages) and the fingerprint a repeat must match.

use serde::{Deserialize, Serialize};

/// What one keyed call did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Receipt {
    /// The session the call was on.
    pub session_id: String,
    /// The client's `idempotency_key`.
    pub key: String,
    /// When the call was applied, Unix milliseconds: the TTL counts from here.
    pub created_ms: i64,
    /// Hash of the request (which call, and every field but the key): a
    /// repeat must match it, or it is a different request under the same key.
    pub fingerprint: String,
    /// The answer the call gave (its repeats give it again).
    pub answer: Answer,
}

/// A keyed call's answer, as the store keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// The call's name (for messages) and its response as its caller
    /// encoded it.
    Encoded {
        /// What the call was, as its caller names it.
        call: String,
        /// The encoded response.
        response: Vec<u8>,
    },
    /// A row written before answers were kept as bytes: the answer as that
    /// server described it (a JSON object tagged `"rpc"`), handed back for
    /// the caller to read. Never written again.
    Legacy(serde_json::Value),
}

impl Receipt {
    /// A receipt of an encoded answer.
    pub fn encoded(
        session_id: &str,
        key: &str,
        created_ms: i64,
        fingerprint: &str,
        call: &str,
        response: Vec<u8>,
    ) -> Self {
        Self {
            session_id: session_id.to_owned(),
            key: key.to_owned(),
            created_ms,
            fingerprint: fingerprint.to_owned(),
            answer: Answer::Encoded {
                call: call.to_owned(),
                response,
            },
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

impl ReceiptWrite {
    /// The session whose receipt it writes.
    pub fn session_id(&self) -> &str {
        match self {
            Self::Put(r) => &r.session_id,
            Self::Remove { session_id, .. } => session_id,
        }
    }
}

/// A receipt as stored: JSON, the response as hex. Rows written before
/// answers were bytes have `outcome` instead of `call` and `response`.
#[derive(Serialize, Deserialize)]
struct Row {
    session_id: String,
    key: String,
    created_ms: i64,
    fingerprint: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    call: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    response: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    outcome: Option<serde_json::Value>,
}

pub(super) fn encode(receipt: &Receipt) -> Vec<u8> {
    let (call, response, outcome) = match &receipt.answer {
        Answer::Encoded { call, response } => (Some(call.clone()), Some(hex(response)), None),
        Answer::Legacy(v) => (None, None, Some(v.clone())),
    };
    let row = Row {
        session_id: receipt.session_id.clone(),
        key: receipt.key.clone(),
        created_ms: receipt.created_ms,
        fingerprint: receipt.fingerprint.clone(),
        call,
        response,
        outcome,
    };
    // A plain struct of strings, integers and JSON cannot fail.
    serde_json::to_vec(&row).unwrap_or_default()
}

/// A stored receipt; `None` (with a warning) for a row that cannot be
/// decoded: the key then reads as never used, rather than failing every
/// call that carries it.
pub(super) fn decode(session_id: &str, bytes: &[u8]) -> Option<Receipt> {
    let row: Row = serde_json::from_slice(bytes)
        .inspect_err(|e| {
            tracing::warn!(session_id, error = %e, "stored receipt cannot be decoded; ignored");
        })
        .ok()?;
    let answer = match (row.call, row.response, row.outcome) {
        (Some(call), Some(response), _) => Answer::Encoded {
            call,
            response: unhex(&response)?,
        },
        (_, _, Some(outcome)) => Answer::Legacy(outcome),
        _ => {
            tracing::warn!(session_id, "stored receipt has no answer; ignored");
            return None;
        }
    };
    Some(Receipt {
        session_id: row.session_id,
        key: row.key,
        created_ms: row.created_ms,
        fingerprint: row.fingerprint,
        answer,
    })
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(text: &str) -> Option<Vec<u8>> {
    if text.len() % 2 != 0 {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_receipt_round_trips_as_json() {
        for response in [vec![], vec![0x0a, 0x01, b'r'], (0..=255).collect()] {
            let r = Receipt::encoded("s", "k", 7, "f", "Send", response);
            assert_eq!(decode("s", &encode(&r)), Some(r));
        }
    }

    #[test]
    fn a_row_written_before_answers_were_bytes_reads_as_legacy() {
        let old = br#"{"session_id":"s","key":"k","created_ms":7,"fingerprint":"f",
            "outcome":{"rpc":"send","run_id":"r"}}"#;
        let r = decode("s", old).expect("an old row");
        assert_eq!(r.created_ms, 7);
        assert_eq!(
            r.answer,
            Answer::Legacy(serde_json::json!({"rpc": "send", "run_id": "r"}))
        );
    }

    #[test]
    fn a_row_without_an_answer_or_with_bad_hex_is_ignored() {
        let none = br#"{"session_id":"s","key":"k","created_ms":7,"fingerprint":"f"}"#;
        assert_eq!(decode("s", none), None);
        let bad = br#"{"session_id":"s","key":"k","created_ms":7,"fingerprint":"f",
            "call":"Send","response":"0g"}"#;
        assert_eq!(decode("s", bad), None);
    }
}
