//! Idempotency keys (docs/api.md, "Retry safety"): a call (Start, Send,
//! Stop, RespondPermission, a setting change, SetTitle, RewindFiles, StopTask,
//! DeleteSession) that carries an `idempotency_key` the session has already
//! applied answers with the first call's response and appends or writes
//! nothing. Every such call goes through one path ([`super::keyed`]); the
//! receipt keeps the response as its encoded bytes.
//!
//! # The rules, written down
//! - **What counts as a repeat.** Same session, same key, within the TTL
//!   ([`IdempotencyOptions::ttl`], 15 minutes by default, at least 10), and
//!   the same request: the RPC and every field but the key, compared by a
//!   [`fingerprint`] of the request's canonical JSON. The same key with a
//!   different request is refused ([`Error::IdempotencyKeyReused`],
//!   INVALID_ARGUMENT): it is a client bug, and answering it with another
//!   call's response would hide it.
//! - **Errors are not receipts.** Only a call that succeeded leaves one, so
//!   a call that failed (refused, not pending, a spawn that failed, storage
//!   down) may be retried with the same key and then runs.
//! - **Concurrent duplicates apply once.** A keyed call holds its key's
//!   gate (one async mutex per `(session, key)` in flight) from the lookup
//!   until its receipt is durable, so an identical call racing it waits and
//!   then finds the receipt.
//!
//! # Durable with its events, never before
//! A receipt is committed in the same transaction as the events its call
//! appended ([`EventLogs::commit`]): `input_sent` for a Send to a live
//! process, `stop_requested` for a Stop, `permission_resolved` for an
//! answer, `run_start` (+ `input_sent`) for a Start or a respawning Send.
//! A call that appends nothing (a Stop with nothing running, a repeated
//! Stop while stopping) commits its receipt alone. So there is no moment
//! when the events are durable and the receipt is not, or the reverse: a
//! crash leaves both or neither, and a retry after it either finds the
//! receipt or finds nothing applied in the log.
//!
//! What stays outside the transaction is the process. A Send to a live
//! process and a permission answer are written to the process *before* the
//! commit (the log never claims an input the process did not get). A crash
//! between that write and the commit leaves neither event nor receipt: the
//! retry after the restart applies the call (a resumed run), and the log
//! holds it once; the crashed process, which may have read it, was ended by
//! recovery (`SERVER_RESTART`). A Start's `run_start` is committed (with
//! its receipt, `process_id` still empty) before the spawn; the spawned
//! process's id is added to the receipt in the commit that records its pid.
//! A spawn that fails removes the receipt in the commit of its `run_error`
//! and `run_end` (the call failed); a crash before that leaves the receipt,
//! and recovery ends the run: the repeat answers with that run, which the
//! log shows started and ended, never a second run.
//!
//! # Memory
//! Receipts live in the store only (a redb lookup per keyed call, a read
//! transaction without fsync); memory holds one gate per keyed call in
//! flight and nothing once it returns. Expired receipts are deleted by
//! [`Receipts::prune`], which the server runs every minute; one that is
//! expired but not yet pruned is ignored, so a key is forgotten exactly at
//! its TTL.

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use prost::Message;
use serde::{Deserialize, Serialize};
use tokio::sync::OwnedMutexGuard;

use agent_harness_protocol::pb;

use crate::error::{Error, Result};
use crate::log::EventLogs;
use crate::secrets::SecretsKey;
use crate::store::{Answer, Receipt, ReceiptWrite};

/// The least TTL the server accepts: the API promises keys are kept at least
/// this long (docs/api.md, "Retry safety").
pub const MIN_IDEMPOTENCY_TTL: Duration = Duration::from_secs(10 * 60);
/// Default TTL of a receipt (`--idempotency-ttl`).
pub const DEFAULT_IDEMPOTENCY_TTL: Duration = Duration::from_secs(15 * 60);

/// `--idempotency-ttl`: a duration of at least [`MIN_IDEMPOTENCY_TTL`]
/// (retries are safe for at least 10 minutes: docs/api.md, "Retry safety").
pub fn parse_idempotency_ttl(s: &str) -> std::result::Result<Duration, String> {
    let ttl = crate::duration::parse_duration(s)?;
    let min = MIN_IDEMPOTENCY_TTL;
    if ttl < min {
        return Err(format!(
            "{s:?} is shorter than {}m: retries must stay safe for at least that long",
            min.as_secs() / 60
        ));
    }
    Ok(ttl)
}

/// Most receipts one prune transaction deletes.
const PRUNE_BATCH: usize = 10_000;

/// Wall-clock time in Unix milliseconds. Receipts outlive the process, so
/// their age is wall-clock time; tests inject a [`ManualClock`].
pub trait Clock: Send + Sync + fmt::Debug + 'static {
    /// Now, in Unix milliseconds.
    fn now_ms(&self) -> i64;
}

/// The system clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> i64 {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        i64::try_from(now.as_millis()).unwrap_or(i64::MAX)
    }
}

/// A clock moved by hand (tests).
#[derive(Debug, Default)]
pub struct ManualClock(AtomicI64);

impl ManualClock {
    /// A clock at `now_ms`.
    pub fn at(now_ms: i64) -> Self {
        Self(AtomicI64::new(now_ms))
    }

    /// Moves the clock forward by `by`.
    pub fn advance(&self, by: Duration) {
        let ms = i64::try_from(by.as_millis()).unwrap_or(i64::MAX);
        self.0.fetch_add(ms, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> i64 {
        self.0.load(Ordering::SeqCst)
    }
}

/// How long receipts are kept, and by which clock.
#[derive(Debug, Clone)]
pub struct IdempotencyOptions {
    /// A receipt older than this is forgotten (and pruned): a repeat then
    /// runs as a new call.
    pub ttl: Duration,
    /// Where receipt times come from.
    pub clock: Arc<dyn Clock>,
}

impl Default for IdempotencyOptions {
    fn default() -> Self {
        Self {
            ttl: DEFAULT_IDEMPOTENCY_TTL,
            clock: Arc::new(SystemClock),
        }
    }
}

/// A Start request as its fingerprint sees it: each env value replaced by
/// its keyed digest ([`SecretsKey::digest`]). The fingerprint is stored
/// with the receipt, and FNV is no cryptographic hash: over the values
/// themselves it would let anyone who reads the store test a guess of one.
/// A request without env is fingerprinted as it is.
pub(super) fn start_for_print(
    request: &pb::StartRequest,
    secrets: &SecretsKey,
) -> pb::StartRequest {
    let mut out = request.clone();
    if let Some(config) = out.config.as_mut() {
        for value in config.env.values_mut() {
            *value = secrets.digest(value);
        }
    }
    out
}

/// The fingerprint of a request: FNV-1a (128 bits) over `rpc` and the
/// request's proto3 JSON with object keys sorted (maps and `Struct`s have
/// no order of their own), as 32 hex digits. Stable across restarts and
/// builds, unlike `std`'s hasher. Not a cryptographic hash: it tells a
/// client's retry from a different request under the same key, and a
/// client that forged a collision would only confuse itself.
pub(super) fn fingerprint(rpc: &str, request: &impl Serialize) -> String {
    const OFFSET: u128 = 0x6c62_272e_07bb_0142_62b8_2175_6295_c58d;
    const PRIME: u128 = 0x0000_0000_0100_0000_0000_0000_0000_013b;
    struct Fnv(u128);
    impl Fnv {
        fn bytes(&mut self, bytes: &[u8]) {
            for b in bytes {
                self.0 ^= u128::from(*b);
                self.0 = self.0.wrapping_mul(PRIME);
            }
        }
        fn tag(&mut self, tag: u8, len: usize) {
            self.bytes(&[tag]);
            self.bytes(&(len as u64).to_le_bytes());
        }
        fn str(&mut self, tag: u8, s: &str) {
            self.tag(tag, s.len());
            self.bytes(s.as_bytes());
        }
        fn value(&mut self, v: &serde_json::Value) {
            use serde_json::Value as V;
            match v {
                V::Null => self.tag(b'n', 0),
                V::Bool(b) => self.tag(b'b', usize::from(*b)),
                V::Number(n) => self.str(b'#', &n.to_string()),
                V::String(s) => self.str(b's', s),
                V::Array(items) => {
                    self.tag(b'[', items.len());
                    for item in items {
                        self.value(item);
                    }
                }
                V::Object(map) => {
                    let mut keys: Vec<&String> = map.keys().collect();
                    keys.sort();
                    self.tag(b'{', keys.len());
                    for k in keys {
                        self.str(b'k', k);
                        self.value(&map[k]);
                    }
                }
            }
        }
    }
    let mut h = Fnv(OFFSET);
    h.str(b'r', rpc);
    // Serializing a generated message cannot fail; Null would still be a
    // stable (if coarse) fingerprint.
    h.value(&serde_json::to_value(request).unwrap_or_default());
    format!("{:032x}", h.0)
}

/// Every keyed call's gate and the receipt store behind them.
pub(super) struct Receipts {
    logs: EventLogs,
    opts: IdempotencyOptions,
    gates: Arc<Mutex<Gates>>,
}

type Gates = HashMap<(String, String), Arc<tokio::sync::Mutex<()>>>;

/// What [`Receipts::begin`] found.
pub(super) enum Begun {
    /// The key was applied: answer this (the encoded response).
    Repeat(Vec<u8>),
    /// A new call: do it, committing the ticket's receipt with its events.
    New(Ticket),
}

/// A keyed call in flight: holds its key's gate until dropped (after the
/// call has committed its receipt, or failed).
pub(super) struct Ticket {
    _gate: Gate,
    /// What the call's commits need to write its receipt.
    pub(super) keyed: Keyed,
}

/// The receipt-to-be of a keyed call, handed to whoever commits its events
/// (the manager, or the run task owning the session).
#[derive(Clone)]
pub(super) struct Keyed {
    session_id: String,
    key: String,
    fingerprint: String,
    /// The RPC, as the receipt names it.
    call: &'static str,
    clock: Arc<dyn Clock>,
    /// Set once a receipt was made for a commit (shared by the clones the
    /// call hands to whoever commits its events).
    recorded: Arc<AtomicBool>,
}

impl fmt::Debug for Keyed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Keyed")
            .field("session_id", &self.session_id)
            .field("key", &self.key)
            .finish_non_exhaustive()
    }
}

impl Keyed {
    /// The receipt saying the call answered `response`, stamped now.
    pub(super) fn put(&self, response: &impl Message) -> ReceiptWrite {
        self.recorded.store(true, Ordering::SeqCst);
        ReceiptWrite::Put(Receipt::encoded(
            &self.session_id,
            &self.key,
            self.clock.now_ms(),
            &self.fingerprint,
            self.call,
            response.encode_to_vec(),
        ))
    }

    /// Whether a receipt was made for one of the call's commits.
    pub(super) fn recorded(&self) -> bool {
        self.recorded.load(Ordering::SeqCst)
    }

    /// The call answers without a receipt: it changed nothing (a dry run),
    /// so its repeat may simply run again.
    pub(super) fn leave_unrecorded(&self) {
        self.recorded.store(true, Ordering::SeqCst);
    }

    /// Forgets the receipt: the call failed after all.
    pub(super) fn remove(&self) -> ReceiptWrite {
        ReceiptWrite::Remove {
            session_id: self.session_id.clone(),
            key: self.key.clone(),
        }
    }
}

/// Helpers so `Option<&Keyed>` reads well at the commit sites.
pub(super) trait KeyedExt {
    /// `Some(receipt)` for a keyed call.
    fn put<M: Message>(self, response: impl FnOnce() -> M) -> Option<ReceiptWrite>;
}

impl KeyedExt for Option<&Keyed> {
    fn put<M: Message>(self, response: impl FnOnce() -> M) -> Option<ReceiptWrite> {
        self.map(|k| k.put(&response()))
    }
}

impl Receipts {
    pub(super) fn new(logs: EventLogs, opts: IdempotencyOptions) -> Self {
        Self {
            logs,
            opts,
            gates: Arc::default(),
        }
    }

    /// Takes the gate of `(session_id, key)` (waiting for an identical call
    /// in flight), then looks the key up: a live receipt with the same
    /// fingerprint is a repeat, one with another is
    /// [`Error::IdempotencyKeyReused`], none (or an expired one) a new call.
    pub(super) async fn begin(
        &self,
        session_id: &str,
        key: &str,
        call: &'static str,
        fingerprint: String,
    ) -> Result<Begun> {
        let gate = self.gate(session_id, key).await;
        let found = self.logs.receipt(session_id, key).await?;
        let now = self.opts.clock.now_ms();
        let live = found
            .filter(|r| !self.expired(r, now))
            .and_then(|r| Some((r.fingerprint, answered(session_id, r.answer)?)));
        match live {
            Some((print, (first, response))) => {
                if print == fingerprint {
                    tracing::debug!(session_id, key, rpc = %first, "repeat of a keyed call");
                    Ok(Begun::Repeat(response))
                } else {
                    Err(Error::IdempotencyKeyReused {
                        session_id: session_id.to_owned(),
                        first_rpc: first,
                        ttl: self.opts.ttl,
                    })
                }
            }
            None => Ok(Begun::New(Ticket {
                _gate: gate,
                keyed: Keyed {
                    session_id: session_id.to_owned(),
                    key: key.to_owned(),
                    fingerprint,
                    call,
                    clock: self.opts.clock.clone(),
                    recorded: Arc::default(),
                },
            })),
        }
    }

    fn expired(&self, r: &Receipt, now_ms: i64) -> bool {
        let ttl = i64::try_from(self.opts.ttl.as_millis()).unwrap_or(i64::MAX);
        now_ms.saturating_sub(r.created_ms) >= ttl
    }

    /// Deletes every expired receipt; returns how many.
    pub(super) async fn prune(&self) -> Result<usize> {
        let ttl = i64::try_from(self.opts.ttl.as_millis()).unwrap_or(i64::MAX);
        // Expired: created_ms <= now - ttl (as in `expired`).
        let before = self.opts.clock.now_ms().saturating_sub(ttl) + 1;
        Ok(self.logs.prune_receipts(before, PRUNE_BATCH).await?)
    }

    /// Keyed calls in flight (each holds one gate); 0 when idle.
    pub(super) fn gates_in_memory(&self) -> usize {
        self.gates.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    async fn gate(&self, session_id: &str, key: &str) -> Gate {
        let id = (session_id.to_owned(), key.to_owned());
        let mutex = {
            let mut gates = self.gates.lock().unwrap_or_else(|p| p.into_inner());
            gates.entry(id.clone()).or_default().clone()
        };
        let guard = mutex.lock_owned().await;
        Gate {
            gates: self.gates.clone(),
            id,
            guard: Some(guard),
        }
    }
}

/// A stored answer as the call's name and its encoded response; `None`
/// (with a warning) for an old row that cannot be read, which then counts
/// as no receipt, as an undecodable row does.
fn answered(session_id: &str, answer: Answer) -> Option<(String, Vec<u8>)> {
    match answer {
        Answer::Encoded { call, response } => Some((call, response)),
        Answer::Legacy(outcome) => serde_json::from_value::<LegacyOutcome>(outcome)
            .inspect_err(|e| {
                tracing::warn!(session_id, error = %e, "stored receipt cannot be read; ignored");
            })
            .ok()
            .map(LegacyOutcome::response),
    }
}

/// A receipt's answer as the server wrote it before receipts kept the
/// encoded response: one variant per RPC, tagged `"rpc"`. Rows of it are
/// still read until their TTL runs out (a retry just after an upgrade
/// answers as the first call did); none is written.
#[derive(Deserialize)]
#[serde(tag = "rpc", rename_all = "snake_case")]
enum LegacyOutcome {
    Start {
        run_id: String,
        process_id: String,
    },
    Send {
        run_id: String,
    },
    Stop {
        stopping: bool,
    },
    RespondPermission,
    Setting {
        applied: i32,
        seq: u64,
    },
    RewindFiles {
        files_changed: Vec<String>,
        insertions: u64,
        deletions: u64,
        seq: u64,
    },
    StopTask,
    DeleteSession,
}

impl LegacyOutcome {
    /// The call's name (as that server named it in messages) and the
    /// response it answered, encoded.
    fn response(self) -> (String, Vec<u8>) {
        let (call, bytes) = match self {
            LegacyOutcome::Start { run_id, process_id } => (
                "Start",
                pb::StartResponse { run_id, process_id }.encode_to_vec(),
            ),
            LegacyOutcome::Send { run_id } => ("Send", pb::SendResponse { run_id }.encode_to_vec()),
            LegacyOutcome::Stop { stopping } => {
                ("Stop", pb::StopResponse { stopping }.encode_to_vec())
            }
            LegacyOutcome::RespondPermission => ("RespondPermission", Vec::new()),
            // The three setting RPCs answer the same message.
            LegacyOutcome::Setting { applied, seq } => (
                "a setting change",
                pb::SetModelResponse { applied, seq }.encode_to_vec(),
            ),
            LegacyOutcome::RewindFiles {
                files_changed,
                insertions,
                deletions,
                seq,
            } => (
                "RewindFiles",
                pb::RewindFilesResponse {
                    files_changed,
                    insertions,
                    deletions,
                    seq,
                }
                .encode_to_vec(),
            ),
            LegacyOutcome::StopTask => ("StopTask", Vec::new()),
            LegacyOutcome::DeleteSession => ("DeleteSession", Vec::new()),
        };
        (call.to_owned(), bytes)
    }
}

/// One `(session, key)` held; the map entry goes when nobody holds or
/// waits for it.
struct Gate {
    gates: Arc<Mutex<Gates>>,
    id: (String, String),
    guard: Option<OwnedMutexGuard<()>>,
}

impl Drop for Gate {
    fn drop(&mut self) {
        // Release first: a waiter holds its own clone of the mutex, so the
        // count below is 1 (the map's) only when nobody waits.
        drop(self.guard.take());
        let mut gates = self.gates.lock().unwrap_or_else(|p| p.into_inner());
        if gates
            .get(&self.id)
            .is_some_and(|m| Arc::strong_count(m) == 1)
        {
            gates.remove(&self.id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fingerprints_ignore_map_order_and_tell_requests_apart() {
        let config = |env: &[(&str, &str)]| pb::StartConfig {
            prompt: "hi".into(),
            env: env
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            ..Default::default()
        };
        let a = fingerprint("Start", &config(&[("A", "1"), ("B", "2"), ("C", "3")]));
        let b = fingerprint("Start", &config(&[("C", "3"), ("A", "1"), ("B", "2")]));
        assert_eq!(a, b);
        assert_eq!(a.len(), 32);
        assert_ne!(a, fingerprint("Start", &config(&[("A", "1")])));
        // The RPC is part of it: the same body under another RPC differs.
        let stop = pb::StopRequest {
            session_id: "s".into(),
            idempotency_key: String::new(),
        };
        assert_ne!(fingerprint("Stop", &stop), fingerprint("Start", &stop));
        // Pinned (computed independently from the definition above): the
        // hash must not change between builds, receipts outlive them.
        assert_eq!(
            fingerprint("Stop", &stop),
            "4d58019232f6e3c40f26686b23d077fb"
        );
    }

    #[test]
    fn an_old_receipt_reads_as_the_response_it_recorded() {
        let read = |v: serde_json::Value| answered("s", Answer::Legacy(v)).expect("readable");
        let (call, bytes) = read(serde_json::json!(
            {"rpc": "start", "run_id": "r", "process_id": "pid:1"}
        ));
        assert_eq!(call, "Start");
        let start = pb::StartResponse::decode(bytes.as_slice()).unwrap();
        assert_eq!(
            (start.run_id.as_str(), start.process_id.as_str()),
            ("r", "pid:1")
        );
        let (call, bytes) = read(serde_json::json!({"rpc": "stop", "stopping": true}));
        assert_eq!(call, "Stop");
        assert!(pb::StopResponse::decode(bytes.as_slice()).unwrap().stopping);
        let (_, bytes) = read(serde_json::json!({"rpc": "setting", "applied": 2, "seq": 9}));
        let set = pb::SetPermissionModeResponse::decode(bytes.as_slice()).unwrap();
        assert_eq!((set.applied, set.seq), (2, 9));
        let (_, bytes) = read(serde_json::json!({"rpc": "rewind_files",
            "files_changed": ["a"], "insertions": 1, "deletions": 2, "seq": 3}));
        let rewound = pb::RewindFilesResponse::decode(bytes.as_slice()).unwrap();
        assert_eq!(rewound.files_changed, vec!["a".to_owned()]);
        assert_eq!(
            (rewound.insertions, rewound.deletions, rewound.seq),
            (1, 2, 3)
        );
        for (rpc, name) in [
            ("respond_permission", "RespondPermission"),
            ("stop_task", "StopTask"),
            ("delete_session", "DeleteSession"),
        ] {
            assert_eq!(
                read(serde_json::json!({"rpc": rpc})),
                (name.to_owned(), vec![])
            );
        }
        // One that cannot be read counts as no receipt, as an undecodable row.
        assert_eq!(
            answered("s", Answer::Legacy(serde_json::json!({"rpc": "x"}))),
            None
        );
        let encoded = Answer::Encoded {
            call: "Send".into(),
            response: vec![1],
        };
        assert_eq!(answered("s", encoded), Some(("Send".into(), vec![1])));
    }

    #[test]
    fn a_start_is_fingerprinted_over_keyed_digests_of_its_env_values() {
        let key = |b: &str| SecretsKey::from_hex(&b.repeat(32), "test").unwrap();
        let start = |env: &[(&str, &str)]| pb::StartRequest {
            session_id: "s".into(),
            idempotency_key: String::new(),
            config: Some(pb::StartConfig {
                prompt: "hi".into(),
                env: env
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                    .collect(),
                ..Default::default()
            }),
        };
        let print = |k: &SecretsKey, env: &[(&str, &str)]| {
            fingerprint("Start", &start_for_print(&start(env), k))
        };
        let (a, b) = (key("a1"), key("b2"));
        let secret = [("MY_TOKEN", "1234")];
        // Stable under one key (a retry after a restart matches), and a
        // different value still tells requests apart.
        assert_eq!(print(&a, &secret), print(&a, &secret));
        assert_ne!(print(&a, &secret), print(&a, &[("MY_TOKEN", "1235")]));
        // Without the key a guess cannot be checked: the value enters only
        // through the keyed digest.
        assert_ne!(print(&a, &secret), print(&b, &secret));
        assert_ne!(print(&a, &secret), fingerprint("Start", &start(&secret)));
        // No env: the same fingerprint as before (receipts stay valid).
        assert_eq!(print(&a, &[]), fingerprint("Start", &start(&[])));
    }
}
