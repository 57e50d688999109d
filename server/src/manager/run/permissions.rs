//! Permission requests on the run task: which are pending, the answers
//! clients give, the timeouts that deny a request nobody answered, the
//! CLI's withdrawals, and the launch policy's ceiling on the permission
//! mode the CLI reports.

use agent_harness_protocol::vocab::{resolved_by, run_error_kind};
use std::collections::HashSet;

use agent_harness_protocol::pb;
use agent_harness_protocol::pb::event::Payload;
use pbjson_types::Struct;
use tokio::time::Instant;

use super::super::PermissionAnswer;
use super::super::receipts::{Keyed, KeyedExt};
use super::Run;
use crate::adapter::PermissionDecision;
use crate::error::{Error, Result};

impl Run {
    /// How many permission requests the log shows pending.
    pub(super) fn pending_permissions(&self) -> usize {
        self.fold
            .with(|d| d.fold.pending_permission_count())
            .unwrap_or(0)
    }

    /// Whether `request_id` is pending, and the input it asked with.
    pub(super) fn pending_input(&self, request_id: &str) -> Option<Option<Struct>> {
        self.fold
            .with(|d| {
                d.fold
                    .pending_permission(request_id)
                    .map(|p| p.input.clone())
            })
            .flatten()
    }

    /// The input a pending request asked with, whole: the fold holds the
    /// streamed form of its event, which is cut down when it was over the
    /// per-event budget (a Write of a large file), and the CLI must run the
    /// tool with what it asked for, not a shortened copy.
    pub(super) async fn whole_requested_input(
        &self,
        request_id: &str,
        folded: Option<Struct>,
    ) -> Option<Struct> {
        let seq = self
            .fold
            .with(|d| d.fold.pending_permission(request_id).map(|p| p.seq))
            .flatten()?;
        match self.logs.full_event(&self.session_id, seq).await {
            Ok(Some(pb::Event {
                payload: Some(Payload::PermissionRequested(p)),
                ..
            })) if p.request_id == request_id => p.input,
            Ok(_) => folded,
            Err(e) => {
                tracing::warn!(session_id = %self.session_id, error = %e, "cannot read the whole permission request; answering with its streamed input");
                folded
            }
        }
    }

    /// Checks each `run_ready`'s permission mode against the launch policy
    /// (the ceiling a client's own choice is held to): a mode beyond it got
    /// there around the policy, through the CLI's settings, so a
    /// `run_error{policy}` follows the `run_ready` and the caller ends the
    /// run (`true`).
    pub(super) fn check_permission_mode(
        &self,
        payloads: Vec<(Payload, String)>,
    ) -> (Vec<(Payload, String)>, bool) {
        let beyond = |payload: &Payload| match payload {
            Payload::RunReady(r)
                if !self.opts.launch.permission_mode_allowed(&r.permission_mode) =>
            {
                Some(r.permission_mode.clone())
            }
            _ => None,
        };
        // Nearly every batch: handed back as it is, no event moved.
        if payloads.iter().all(|(p, _)| beyond(p).is_none()) {
            return (payloads, false);
        }
        let mut refused = false;
        let mut out = Vec::with_capacity(payloads.len() + 1);
        for (payload, line) in payloads {
            let beyond = beyond(&payload);
            out.push((payload, line));
            if let Some(mode) = beyond {
                tracing::warn!(session_id = %self.session_id, run_id = %self.run_id, %mode, "the CLI runs in a permission mode the policy does not allow; ending the run");
                refused = true;
                out.push((
                    Payload::RunError(pb::RunError {
                        message: format!(
                            "the CLI reported permission mode {mode}, which this server does not \
                             allow (allowed: {}); the run is ended",
                            self.opts
                                .launch
                                .allowed_permission_modes()
                                .collect::<Vec<_>>()
                                .join(", ")
                        ),
                        kind: run_error_kind::POLICY.into(),
                        ..Default::default()
                    }),
                    String::new(),
                ));
            }
        }
        (out, refused)
    }

    /// Drops the CLI's withdrawals (`permission_resolved{cancelled}`) of
    /// requests that are not pending: never asked, or already answered or
    /// timed out. Pending means: in the fold, or asked earlier in the same
    /// batch and not resolved since.
    pub(super) fn only_pending_cancels(
        &self,
        payloads: Vec<(Payload, String)>,
    ) -> Vec<(Payload, String)> {
        if !payloads
            .iter()
            .any(|(p, _)| matches!(p, Payload::PermissionResolved(_)))
        {
            return payloads;
        }
        let mut asked: HashSet<String> = HashSet::new();
        let mut resolved: HashSet<String> = HashSet::new();
        payloads
            .into_iter()
            .filter(|(payload, _)| match payload {
                Payload::PermissionRequested(p) => {
                    asked.insert(p.request_id.clone());
                    resolved.remove(&p.request_id);
                    true
                }
                Payload::PermissionResolved(p) => {
                    let id = &p.request_id;
                    let pending = !resolved.contains(id)
                        && (asked.contains(id) || self.pending_input(id).is_some());
                    if !pending {
                        tracing::debug!(request_id = %id, "withdrawal of a request that is not pending");
                        return false;
                    }
                    resolved.insert(id.clone());
                    true
                }
                _ => true,
            })
            .collect()
    }

    pub(super) async fn answer(
        &mut self,
        request_id: String,
        answer: PermissionAnswer,
        keyed: Option<&Keyed>,
    ) -> Result<()> {
        let Some(requested_input) = self.pending_input(&request_id) else {
            return Err(Error::PermissionRequestNotPending {
                session_id: self.session_id.clone(),
                request_id,
            });
        };
        let requested_input = match answer.updated_input {
            None if answer.allow => {
                self.whole_requested_input(&request_id, requested_input)
                    .await
            }
            _ => requested_input,
        };
        let decision = if answer.allow {
            PermissionDecision::Allow {
                updated_input: answer
                    .updated_input
                    .clone()
                    .or(requested_input)
                    .unwrap_or_default(),
            }
        } else {
            PermissionDecision::Deny {
                message: if answer.message.is_empty() {
                    "The user denied this tool use.".into()
                } else {
                    answer.message.clone()
                },
            }
        };
        self.control.respond_permission(&request_id, &decision)?;
        let message = match &decision {
            PermissionDecision::Deny { message } => message.clone(),
            PermissionDecision::Allow { .. } => String::new(),
        };
        let event = Payload::PermissionResolved(pb::PermissionResolved {
            request_id,
            allow: answer.allow,
            by: resolved_by::USER.into(),
            message,
            updated_input: if answer.allow {
                answer.updated_input
            } else {
                None
            },
        });
        let receipt = keyed.put(|| pb::RespondPermissionResponse {});
        match self.append_keyed(Some(event), receipt).await {
            Err(why) if keyed.is_some() => Err(Error::Storage(why)),
            _ => Ok(()),
        }
    }

    /// Denies, on the CLI and in the log, every request whose time to be
    /// answered has run out.
    pub(super) async fn permission_timeouts(&mut self, now: Instant) {
        let expired: Vec<String> = self
            .permission_deadlines
            .iter()
            .filter(|(_, deadline)| **deadline <= now)
            .map(|(id, _)| id.clone())
            .collect();
        for request_id in expired {
            self.permission_deadlines.remove(&request_id);
            if self.pending_input(&request_id).is_none() {
                continue;
            }
            let message = format!(
                "Permission request timed out after {:?} with no answer; denied.",
                self.opts.permission_timeout
            );
            let _ = self.control.respond_permission(
                &request_id,
                &PermissionDecision::Deny {
                    message: message.clone(),
                },
            );
            self.append_one(Payload::PermissionResolved(pb::PermissionResolved {
                request_id,
                allow: false,
                by: resolved_by::TIMEOUT.into(),
                message,
                updated_input: None,
            }))
            .await;
        }
    }
}
