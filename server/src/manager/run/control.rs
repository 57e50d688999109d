//! Host control requests on the live process (`control_request` →
//! `control_response`): sent by [`Run::send_control`], answered from stdout
//! ([`Run::answered`]), timed out by [`Run::control_timeouts`], and
//! failed when the process ends.
//!
//! A request may carry a [`Record`]: an event to append when the CLI says
//! success (a `setting_changed`, a `files_rewound`), with the keyed call's
//! receipt in the same commit, before the caller hears the answer (durable
//! before visible). A recorded setting change on a process with no control
//! channel (one-shot) is recorded for the next spawn instead. A record the
//! CLI has no part in (a `title_set`) is appended without a request
//! ([`Run::record`]).

use agent_harness_protocol::pb;
use agent_harness_protocol::pb::event::Payload;
use tokio::sync::oneshot;
use tokio::time::Instant;

use super::Run;
use crate::adapter::ControlReply;
use crate::manager::receipts::Keyed;
use crate::store::ReceiptWrite;

/// How long a control request waits for the CLI's answer.
pub const CONTROL_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// Why a control request got no answer from the CLI.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum ControlFailure {
    /// The adapter has no control channel (one-shot, replay).
    Unsupported,
    /// The CLI answered with an error: its message.
    Refused(String),
    /// No answer within [`CONTROL_TIMEOUT`].
    Timeout,
    /// The process is ending or gone.
    Ended,
    /// The answer was success but its record could not be committed.
    NotRecorded(String),
}

/// The CLI's answer, and where its record went.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Answered {
    /// The `response` object of the CLI's success (`{}` when it had none;
    /// null when the change was recorded for the next spawn instead).
    pub(crate) response: serde_json::Value,
    /// The seq of the recorded event (0 when nothing was recorded).
    pub(crate) seq: u64,
    /// The event that was recorded (a setting recorded for the next spawn
    /// differs from the one asked for in its `applied`).
    pub(crate) recorded: Option<Payload>,
}

/// What to append when the CLI says success.
#[derive(Debug, Clone)]
pub(crate) struct Record {
    /// A `setting_changed` (applied LIVE) or a `files_rewound`.
    pub(crate) payload: Payload,
    /// The keyed call whose receipt goes with it.
    pub(crate) keyed: Option<Keyed>,
}

pub(crate) type ControlReplyTx = oneshot::Sender<Result<Answered, ControlFailure>>;

/// A control request waiting for the CLI's answer.
pub(super) struct PendingControl {
    pub(super) deadline: Instant,
    pub(super) record: Option<Record>,
    pub(super) reply: ControlReplyTx,
}

/// The receipt of the keyed call that recorded `payload` at `seq`: the
/// response its RPC answers.
fn recorded_receipt(keyed: &Keyed, payload: &Payload, seq: u64) -> Option<ReceiptWrite> {
    match payload {
        // SetModel, SetPermissionMode and SetMaxThinkingTokens answer the
        // same message.
        Payload::SettingChanged(s) => Some(keyed.put(&pb::SetModelResponse {
            applied: s.applied,
            seq,
        })),
        Payload::TitleSet(_) => Some(keyed.put(&pb::SetTitleResponse { seq })),
        Payload::FilesRewound(f) => Some(keyed.put(&pb::RewindFilesResponse {
            files_changed: f.files_changed.clone(),
            insertions: f.insertions,
            deletions: f.deletions,
            seq,
        })),
        _ => None,
    }
}

/// A success that says it did not do it (`rewind_files` answers
/// `{canRewind: false, error}`): its message.
fn refused_in_success(response: &serde_json::Value) -> Option<String> {
    (response.get("canRewind") == Some(&serde_json::Value::Bool(false))).then(|| {
        response
            .get("error")
            .and_then(|e| e.as_str())
            .unwrap_or("the CLI cannot do it")
            .to_owned()
    })
}

impl Run {
    /// Sends a control request; the answer comes back through stdout
    /// ([`Run::answered`]), a timeout ([`Run::control_timeouts`]) or
    /// the exit.
    pub(super) async fn send_control(
        &mut self,
        request: serde_json::Value,
        record: Option<Box<Record>>,
        reply: ControlReplyTx,
    ) {
        let record = record.map(|r| *r);
        if self.ladder.ending() || self.storage_failed.is_some() {
            let _ = reply.send(Err(ControlFailure::Ended));
            return;
        }
        let request_id = format!("ah-ctl-{}", uuid::Uuid::new_v4());
        if let Some(outcome) = self.control.answer_control(&request) {
            // The adapter answered itself: the same path as an answer
            // from stdout, at once.
            self.controls.insert(
                request_id.clone(),
                PendingControl {
                    deadline: Instant::now() + CONTROL_TIMEOUT,
                    record,
                    reply,
                },
            );
            self.answered(vec![ControlReply {
                request_id,
                outcome,
            }])
            .await;
            return;
        }
        match self.control.control(&request_id, &request) {
            Ok(true) => {
                self.last_activity = Instant::now();
                self.controls.insert(
                    request_id,
                    PendingControl {
                        deadline: Instant::now() + CONTROL_TIMEOUT,
                        record,
                        reply,
                    },
                );
            }
            Ok(false) => match record {
                // A one-shot process takes no setting: its next spawn does.
                Some(Record {
                    payload: Payload::SettingChanged(s),
                    keyed,
                }) => {
                    let next = Payload::SettingChanged(pb::SettingChanged {
                        applied: pb::SettingApplied::NextSpawn as i32,
                        ..s
                    });
                    let answered = self
                        .commit_record(serde_json::Value::Null, next, keyed.as_ref())
                        .await;
                    let _ = reply.send(answered);
                }
                _ => {
                    let _ = reply.send(Err(ControlFailure::Unsupported));
                }
            },
            Err(e) => {
                tracing::warn!(session_id = %self.session_id, error = %e, "control request not delivered");
                let _ = reply.send(Err(ControlFailure::Ended));
            }
        }
    }

    /// Appends `record` without asking the CLI (see [`super::RunCmd::Record`]).
    pub(super) async fn record(&mut self, record: Record, reply: ControlReplyTx) {
        if self.storage_failed.is_some() {
            let _ = reply.send(Err(ControlFailure::Ended));
            return;
        }
        let answered = self
            .commit_record(
                serde_json::Value::Null,
                record.payload,
                record.keyed.as_ref(),
            )
            .await;
        let _ = reply.send(answered);
    }

    /// Hands the CLI's answers to whoever waits for them, first committing
    /// what a successful one records. Called after the batch the answers
    /// came in was appended (see [`Run::settle`]), so a recorded event
    /// follows what the CLI wrote before its answer.
    pub(super) async fn answered(&mut self, replies: Vec<ControlReply>) {
        for r in replies {
            // An answer is activity: a caller that asks again right after
            // (RewindFiles previews, then rewinds) must find the process.
            self.last_activity = Instant::now();
            let pending = self.controls.remove(&r.request_id);
            let late = self.late_records.remove(&r.request_id);
            let outcome = r.outcome.and_then(|v| match refused_in_success(&v) {
                Some(why) => Err(why),
                None => Ok(v),
            });
            match (pending, outcome) {
                (Some(p), Ok(response)) => {
                    let answered = match p.record {
                        Some(rec) => {
                            self.commit_record(response, rec.payload, rec.keyed.as_ref())
                                .await
                        }
                        None => Ok(Answered {
                            response,
                            seq: 0,
                            recorded: None,
                        }),
                    };
                    let _ = p.reply.send(answered);
                }
                (Some(p), Err(why)) => {
                    let _ = p.reply.send(Err(ControlFailure::Refused(why)));
                }
                // Its caller was told it timed out; the CLI did it after
                // all, so the log still says so (without a receipt: the call
                // failed, and a retry applies it again).
                (None, Ok(response)) => {
                    if let Some(payload) = late {
                        tracing::info!(session_id = %self.session_id, request_id = %r.request_id, "a control request answered after its timeout; recording it");
                        let _ = self.commit_record(response, payload, None).await;
                    }
                }
                (None, Err(_)) => {}
            }
        }
    }

    /// Fails the requests whose deadline passed; a recorded one is kept
    /// in mind in case the CLI still does it.
    pub(super) fn control_timeouts(&mut self, now: Instant) {
        let late: Vec<String> = self
            .controls
            .iter()
            .filter(|(_, c)| c.deadline <= now)
            .map(|(id, _)| id.clone())
            .collect();
        for id in late {
            if let Some(c) = self.controls.remove(&id) {
                if let Some(rec) = c.record {
                    self.late_records.insert(id, rec.payload);
                }
                let _ = c.reply.send(Err(ControlFailure::Timeout));
            }
        }
    }

    /// Appends `payload` with its keyed call's receipt.
    async fn commit_record(
        &mut self,
        response: serde_json::Value,
        payload: Payload,
        keyed: Option<&Keyed>,
    ) -> Result<Answered, ControlFailure> {
        // This task is the session's only writer: the event gets the seq
        // after the fold's head, which the receipt names.
        let seq = self.fold.with(|d| d.head()).unwrap_or(0) + 1;
        let receipt = keyed.and_then(|k| recorded_receipt(k, &payload, seq));
        let appended = self
            .commit_events(vec![(payload.clone(), String::new())], None, receipt)
            .await
            .map_err(ControlFailure::NotRecorded)?;
        let seq = appended.first().map_or(seq, |e| e.seq);
        Ok(Answered {
            response,
            seq,
            recorded: Some(payload),
        })
    }
}
