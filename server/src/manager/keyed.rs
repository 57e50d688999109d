//! The one path of every call that may carry an `idempotency_key`
//! ([`SessionManager::idempotent`]): the key's gate and receipt lookup, the
//! repeat answered from the receipt, a key reused with another request
//! refused, and the receipt of a call that appended nothing. The rules are
//! in [`super::receipts`]; what each call contributes is its request as a
//! [`KeyedRequest`] and its response as a protobuf message.

use std::future::Future;

use agent_harness_protocol::pb;
use prost::Message;
use serde_json::{Value, json};

use super::SessionManager;
use super::control::SettingChange;
use super::receipts::{Begun, Keyed, fingerprint, start_for_print};
use crate::error::{Error, Result};
use crate::log::Commit;
use crate::secrets::SecretsKey;

/// A request that may carry an `idempotency_key`: what identifies its
/// repeat.
pub(super) trait KeyedRequest {
    /// The RPC's name: part of the fingerprint, and named in messages.
    fn rpc(&self) -> &'static str;
    /// The session the call is on (keys are per session).
    fn session_id(&self) -> &str;
    /// The key; empty for none.
    fn key(&self) -> &str;
    /// The request as its fingerprint sees it: every field but the key.
    /// Receipts outlive the server, so what this returns for a request
    /// must not change between builds.
    fn print(&self, secrets: &SecretsKey) -> Value;
}

/// The request itself with its key cleared, as JSON.
fn without_key<R: Clone + serde::Serialize>(request: &R, clear: impl FnOnce(&mut R)) -> Value {
    let mut request = request.clone();
    clear(&mut request);
    // Serializing a generated message cannot fail; Null would still be a
    // stable (if coarse) fingerprint.
    serde_json::to_value(&request).unwrap_or_default()
}

/// [`KeyedRequest`] for a generated request (its `session_id` and
/// `idempotency_key` fields), named `$rpc` and printed as `$print` says;
/// by default, as the request without its key.
macro_rules! keyed_request {
    ($ty:ty, $rpc:literal) => {
        keyed_request!($ty, $rpc, |r, _| without_key(r, |r| r
            .idempotency_key
            .clear()));
    };
    ($ty:ty, $rpc:literal, |$r:ident, $secrets:pat_param| $print:expr) => {
        impl KeyedRequest for $ty {
            fn rpc(&self) -> &'static str {
                $rpc
            }
            fn session_id(&self) -> &str {
                &self.session_id
            }
            fn key(&self) -> &str {
                &self.idempotency_key
            }
            fn print(&self, $secrets: &SecretsKey) -> Value {
                let $r = self;
                $print
            }
        }
    };
}

keyed_request!(pb::StartRequest, "Start", |r, secrets| without_key(
    &start_for_print(r, secrets),
    |r| {
        r.idempotency_key.clear();
        // A Start without a config is one with the default config.
        r.config.get_or_insert_default();
    }
));
keyed_request!(pb::SendRequest, "Send");
keyed_request!(pb::StopRequest, "Stop");
keyed_request!(pb::RespondPermissionRequest, "RespondPermission");
keyed_request!(pb::DeleteSessionRequest, "DeleteSession");
keyed_request!(pb::SetTitleRequest, "SetTitle");
// StopTask, RewindFiles and the settings (below) are fingerprinted over
// the fields that tell their requests apart, as their receipts always were.
keyed_request!(pb::StopTaskRequest, "StopTask", |r, _| json!({
    "task_id": r.task_id
}));
keyed_request!(pb::RewindFilesRequest, "RewindFiles", |r, _| json!({
    "to_seq": r.to_seq,
    "dry_run": r.dry_run
}));

/// SetModel, SetPermissionMode or SetMaxThinkingTokens, as the manager
/// takes them.
pub(super) struct SettingRequest<'a> {
    pub(super) session_id: &'a str,
    pub(super) key: &'a str,
    pub(super) change: &'a SettingChange,
}

impl KeyedRequest for SettingRequest<'_> {
    fn rpc(&self) -> &'static str {
        self.change.rpc()
    }
    fn session_id(&self) -> &str {
        self.session_id
    }
    fn key(&self) -> &str {
        self.key
    }
    fn print(&self, _: &SecretsKey) -> Value {
        json!({"setting": self.change.setting() as i32, "value": self.change.value()})
    }
}

impl SessionManager {
    /// Runs `call` as the keyed call `request` (see [`super::receipts`]):
    /// without a key, just runs it. With one, takes the key's gate and
    /// looks for its receipt: a repeat answers the stored response, the
    /// same key with another request is [`Error::IdempotencyKeyReused`],
    /// and a new call runs with its [`Keyed`], whose receipt goes into the
    /// commit of the call's events; a call that succeeded without making
    /// one (it appended nothing) gets its receipt committed alone here.
    pub(super) async fn idempotent<R, F, Fut>(
        &self,
        request: &impl KeyedRequest,
        call: F,
    ) -> Result<R>
    where
        R: Message + Default,
        F: FnOnce(Option<Keyed>) -> Fut,
        Fut: Future<Output = Result<R>>,
    {
        let (session_id, key) = (request.session_id(), request.key());
        self.claim(session_id).await?;
        if key.is_empty() {
            return call(None).await;
        }
        let rpc = request.rpc();
        let print = fingerprint(rpc, &request.print(&self.inner.opts.secrets));
        let ticket = match self
            .inner
            .receipts
            .begin(session_id, key, rpc, print)
            .await?
        {
            Begun::Repeat(response) => {
                // The RPC is part of the fingerprint: a response that does
                // not decode is a bug, not a client's error.
                return R::decode(response.as_slice()).map_err(|e| {
                    Error::Internal(format!(
                        "idempotency receipt of {session_id:?} cannot be read as a {rpc} \
                         response: {e}"
                    ))
                });
            }
            Begun::New(ticket) => ticket,
        };
        let response = call(Some(ticket.keyed.clone())).await?;
        if !ticket.keyed.recorded() {
            // The call appended nothing (the task's end, say, is the CLI's
            // to report): its receipt alone.
            self.inner
                .logs
                .commit(
                    session_id,
                    Commit::default().with_receipt(Some(ticket.keyed.put(&response))),
                )
                .await?;
        }
        Ok(response)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Receipts outlive the server: each request is fingerprinted exactly
    /// as the server that wrote the receipts did, the request rebuilt
    /// without its key (settings, StopTask and RewindFiles over the fields
    /// that tell them apart).
    #[test]
    fn each_request_prints_as_receipts_already_stored_expect() {
        let secrets = SecretsKey::from_hex(&"a1".repeat(32), "test").unwrap();
        let print = |r: &dyn KeyedRequest| fingerprint(r.rpc(), &r.print(&secrets));
        let config = pb::StartConfig {
            prompt: "hi".into(),
            env: [("TOKEN".to_owned(), "1234".to_owned())].into(),
            ..Default::default()
        };
        let start = pb::StartRequest {
            session_id: "s".into(),
            config: Some(config.clone()),
            idempotency_key: "k".into(),
        };
        let unkeyed = pb::StartRequest {
            idempotency_key: String::new(),
            ..start.clone()
        };
        assert_eq!(
            print(&start),
            fingerprint("Start", &start_for_print(&unkeyed, &secrets))
        );
        // A Start without a config was fingerprinted with the default one.
        let bare = pb::StartRequest {
            config: None,
            ..start.clone()
        };
        let defaulted = pb::StartRequest {
            config: Some(pb::StartConfig::default()),
            ..unkeyed.clone()
        };
        assert_eq!(print(&bare), fingerprint("Start", &defaulted));
        let send = pb::SendRequest {
            session_id: "s".into(),
            input: "hi".into(),
            content_blocks: vec![],
            idempotency_key: "k".into(),
        };
        let send_unkeyed = pb::SendRequest {
            idempotency_key: String::new(),
            ..send.clone()
        };
        assert_eq!(print(&send), fingerprint("Send", &send_unkeyed));
        // The pinned value of a Stop (see the receipts module's test).
        let stop = pb::StopRequest {
            session_id: "s".into(),
            idempotency_key: "k".into(),
        };
        assert_eq!(print(&stop), "4d58019232f6e3c40f26686b23d077fb");
        let task = pb::StopTaskRequest {
            session_id: "s".into(),
            task_id: "t".into(),
            idempotency_key: "k".into(),
        };
        assert_eq!(
            print(&task),
            fingerprint("StopTask", &json!({"task_id": "t"}))
        );
        let rewind = pb::RewindFilesRequest {
            session_id: "s".into(),
            to_seq: 4,
            dry_run: false,
            idempotency_key: "k".into(),
        };
        assert_eq!(
            print(&rewind),
            fingerprint("RewindFiles", &json!({"to_seq": 4, "dry_run": false}))
        );
        let change = SettingChange::MaxThinkingTokens(Some(8));
        let setting = SettingRequest {
            session_id: "s",
            key: "k",
            change: &change,
        };
        assert_eq!(
            print(&setting),
            fingerprint("SetMaxThinkingTokens", &json!({"setting": 3, "value": "8"}))
        );
    }
}
