//! An in-memory `SessionService` served by a real tonic server on
//! 127.0.0.1:0, faithful to the Subscribe contract
//! (docs/ARCHITECTURE.md, "Gapless catch-up": ReplayStart first, events in
//! strictly increasing seq, CaughtUp once, heartbeats while idle, reset when
//! the cursor is past the head or older than the replay window), plus hooks
//! to append events, drop connections and script misbehaviour so the
//! client's recovery paths can be driven on purpose. Live typing too: deltas
//! pushed with [`State::push_delta`] reach the streams that asked for them,
//! never before an event appended earlier, and a stream that asked gets a
//! snapshot delta per block still being written right after CaughtUp.

#![allow(dead_code)] // each test binary uses a different subset

use std::collections::HashMap;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_harness_client::pb::{
    self, event::Payload, session_service_server::SessionService,
    session_service_server::SessionServiceServer, subscribe_response::Kind,
};
use tokio::sync::{broadcast, mpsc, watch};
use tokio_stream::wrappers::ReceiverStream;
use tokio_stream::{Stream, StreamExt};
use tonic::{Request, Response, Status};

/// Bound on every wait in the tests: long enough for a loaded 2-core CI
/// machine, short enough that a broken test fails instead of hanging.
pub const WAIT: Duration = Duration::from_secs(20);

/// Misbehaviour for the next Subscribe call(s), consumed in order.
#[derive(Debug, Clone, Default)]
pub struct Script {
    /// End the stream with UNAVAILABLE after sending this many events.
    pub fail_after_events: Option<usize>,
    /// Replay this many events from before the requested cursor
    /// (duplicates the client already holds), with a truthful from_seq.
    pub overlap: u64,
    /// Send every live event twice.
    pub duplicate_live: bool,
    /// Leave this seq out of the stream (a gap).
    pub skip_seq: Option<u64>,
    /// Stop after this many replayed events until `release_replay` is called.
    pub pause_replay_after: Option<usize>,
    /// After CaughtUp send nothing at all (no event, no heartbeat) but keep
    /// the stream open until the client drops it: a half-open connection.
    pub silent_after_caught_up: bool,
}

/// What the test can observe and steer.
#[derive(Default)]
pub struct Inner {
    /// Session id -> log (seq i+1 at index i).
    pub logs: HashMap<String, Vec<pb::Event>>,
    /// The `after_seq` of every Subscribe call, in order.
    pub subscribe_after: Vec<u64>,
    /// The `include_deltas` of every Subscribe call, in order.
    pub subscribe_deltas: Vec<bool>,
    /// Session id -> the blocks being written, as snapshot deltas (text so
    /// far), in order of first appearance.
    pub writing: HashMap<String, Vec<pb::Delta>>,
    /// History calls answered or in progress.
    pub history_calls: usize,
    /// Heartbeats sent, over all streams.
    pub heartbeats_sent: usize,
    /// Every History request, in order.
    pub history_requests: Vec<pb::HistoryRequest>,
    /// Send requests received.
    pub sent: Vec<pb::SendRequest>,
    /// Start requests received.
    pub starts: Vec<pb::StartRequest>,
    /// Stop requests received.
    pub stops: usize,
    /// Every Stop request, in order.
    pub stop_requests: Vec<pb::StopRequest>,
    /// Every StopTask request, in order.
    pub stop_task_requests: Vec<pb::StopTaskRequest>,
    /// Every DeleteSession request, in order.
    pub delete_requests: Vec<pb::DeleteSessionRequest>,
    /// Every SetModel request, in order.
    pub set_model_requests: Vec<pb::SetModelRequest>,
    /// Every SetPermissionMode request, in order.
    pub set_permission_mode_requests: Vec<pb::SetPermissionModeRequest>,
    /// Every SetMaxThinkingTokens request, in order.
    pub set_max_thinking_tokens_requests: Vec<pb::SetMaxThinkingTokensRequest>,
    /// Every SetTitle request, in order.
    pub set_title_requests: Vec<pb::SetTitleRequest>,
    /// Every RewindFiles request, in order.
    pub rewind_files_requests: Vec<pb::RewindFilesRequest>,
    /// GetContextUsage calls received.
    pub context_usage_calls: usize,
    /// The answer to GetContextUsage; None: FAILED_PRECONDITION, as the
    /// server answers without a live process.
    pub context_usage: Option<pb::GetContextUsageResponse>,
    /// The next this many Start, Send, Stop, RespondPermission, StopTask,
    /// SetModel, SetPermissionMode, SetMaxThinkingTokens, RewindFiles and
    /// GetContextUsage calls are recorded, then answered UNAVAILABLE, as if
    /// the connection dropped before the answer came back (nothing is
    /// appended for them).
    pub lose_answers: usize,
    /// RespondPermission requests received.
    pub permission_answers: Vec<pb::RespondPermissionRequest>,
    /// The `authorization` header of every call.
    pub auth_headers: Vec<Option<String>>,
    /// The `x-session-id` header of every call.
    pub session_headers: Vec<Option<String>>,
    /// Scripts for upcoming Subscribe calls.
    pub scripts: std::collections::VecDeque<Script>,
    /// When false, Subscribe answers UNAVAILABLE.
    pub refuse_subscribe: bool,
}

/// The shared state of the test service.
pub struct State {
    pub inner: Mutex<Inner>,
    /// Most events one replay sends; a cursor further behind gets a reset.
    pub replay_window: u64,
    /// Idle time before a heartbeat.
    pub heartbeat: Duration,
    /// When set, every call must carry `authorization: Bearer <token>`.
    pub token: Option<String>,
    /// Bumped on every append: live streams wait on it.
    appended: watch::Sender<u64>,
    /// Bumped to end every open stream with UNAVAILABLE.
    kill: watch::Sender<u64>,
    /// False holds History calls until opened.
    history_open: watch::Sender<bool>,
    /// Bumped to let paused replays continue.
    replay_release: watch::Sender<u64>,
    /// Every pushed delta with its session, for the streams that asked.
    deltas: broadcast::Sender<(String, pb::Delta)>,
    /// Bumped whenever the service changes [`Inner`]: what
    /// [`State::wait_until`] waits on.
    changes: watch::Sender<u64>,
}

/// The state locked by the service: a change made through it (any mutable
/// access) wakes [`State::wait_until`] when the lock is released.
struct Locked<'a> {
    inner: std::sync::MutexGuard<'a, Inner>,
    changes: &'a watch::Sender<u64>,
    changed: bool,
}

impl std::ops::Deref for Locked<'_> {
    type Target = Inner;
    fn deref(&self) -> &Inner {
        &self.inner
    }
}

impl std::ops::DerefMut for Locked<'_> {
    fn deref_mut(&mut self) -> &mut Inner {
        self.changed = true;
        &mut self.inner
    }
}

impl Drop for Locked<'_> {
    fn drop(&mut self) {
        if self.changed {
            self.changes.send_modify(|v| *v += 1);
        }
    }
}

impl State {
    fn lock(&self) -> Locked<'_> {
        Locked {
            inner: self.inner.lock().unwrap(),
            changes: &self.changes,
            changed: false,
        }
    }

    /// Waits until `cond` holds, checking it again after each change the
    /// service makes to its state (a call recorded, a heartbeat sent).
    /// Unbounded: callers bound it.
    pub async fn wait_until(&self, mut cond: impl FnMut() -> bool) {
        let mut changes = self.changes.subscribe();
        while !cond() {
            changes
                .changed()
                .await
                .expect("the state outlives its waiters");
        }
    }

    /// UNAVAILABLE while answers are being lost (see [`Inner::lose_answers`]).
    fn lost_answer(&self) -> Result<(), Status> {
        let mut inner = self.lock();
        if inner.lose_answers == 0 {
            return Ok(());
        }
        inner.lose_answers -= 1;
        Err(Status::unavailable("connection dropped before the answer"))
    }

    /// The session's log.
    pub fn events(&self, session: &str) -> Vec<pb::Event> {
        self.lock().logs.get(session).cloned().unwrap_or_default()
    }

    /// The session's events with `from < seq <= to`.
    pub fn events_between(&self, session: &str, from: u64, to: u64) -> Vec<pb::Event> {
        let inner = self.lock();
        let Some(log) = inner.logs.get(session) else {
            return Vec::new();
        };
        let start = (from as usize).min(log.len());
        let end = (to as usize).min(log.len());
        log[start..end.max(start)].to_vec()
    }

    /// Appends `n` events (alternating input_sent / turn_end, so the derived
    /// status changes), returning the new head.
    pub fn append(&self, session: &str, n: usize) -> u64 {
        let head = {
            let mut inner = self.lock();
            let log = inner.logs.entry(session.to_owned()).or_default();
            for _ in 0..n {
                let seq = log.len() as u64 + 1;
                log.push(make_event(session, seq));
            }
            log.len() as u64
        };
        self.appended.send_modify(|v| *v += 1);
        head
    }

    /// Appends one given event (its seq is assigned here). A `content`
    /// ends the blocks of its message being written; `turn_end` and
    /// `run_end` end them all.
    pub fn append_event(&self, session: &str, mut event: pb::Event) -> u64 {
        let head = {
            let mut inner = self.lock();
            if let Some(writing) = inner.writing.get_mut(session) {
                match &event.payload {
                    Some(Payload::Content(c)) => writing.retain(|d| d.message_id != c.message_id),
                    Some(Payload::TurnEnd(_) | Payload::RunEnd(_)) => writing.clear(),
                    _ => {}
                }
            }
            let log = inner.logs.entry(session.to_owned()).or_default();
            event.seq = log.len() as u64 + 1;
            event.session_id = session.to_owned();
            log.push(event);
            log.len() as u64
        };
        self.appended.send_modify(|v| *v += 1);
        head
    }

    /// Appends a `setting_changed` (applied live) and returns its seq.
    fn record_setting(&self, session: &str, setting: pb::Setting, value: String) -> u64 {
        let changed = pb::SettingChanged {
            setting: setting as i32,
            value,
            applied: pb::SettingApplied::Live as i32,
        };
        self.append_event(
            session,
            pb::Event {
                payload: Some(Payload::SettingChanged(changed)),
                ..Default::default()
            },
        )
    }

    /// Writes a fragment of block (`message_id`, `index`) of the message
    /// being written: streams that asked for deltas get it after every event
    /// appended so far (`after_seq` is set here), and it joins the block's
    /// text for the snapshots of later streams.
    pub fn push_delta(&self, session: &str, mut delta: pb::Delta) {
        let mut inner = self.lock();
        delta.after_seq = inner.logs.get(session).map_or(0, |l| l.len() as u64);
        let writing = inner.writing.entry(session.to_owned()).or_default();
        match writing
            .iter_mut()
            .find(|d| d.message_id == delta.message_id && d.index == delta.index)
        {
            Some(block) => {
                block.fragment.push_str(&delta.fragment);
                block.after_seq = delta.after_seq;
            }
            None => writing.push(pb::Delta {
                snapshot: true,
                ..delta.clone()
            }),
        }
        // Under the lock, so a stream's snapshot and its live deltas never
        // overlap (see `subscribe`). No receiver: nobody is live.
        let _ = self.deltas.send((session.to_owned(), delta));
        drop(inner);
        // Wakes the live streams, which take queued deltas in order.
        self.appended.send_modify(|v| *v += 1);
    }

    /// The `include_deltas` of every Subscribe call so far.
    pub fn subscribe_deltas(&self) -> Vec<bool> {
        self.lock().subscribe_deltas.clone()
    }

    /// Ends every open Subscribe stream with UNAVAILABLE.
    pub fn drop_connections(&self) {
        self.kill.send_modify(|v| *v += 1);
    }

    /// Simulates a restart that lost the session's tail: the log becomes
    /// `n` fresh events and every stream is dropped.
    pub fn restart_with(&self, session: &str, n: usize) {
        {
            let mut inner = self.lock();
            let log: Vec<pb::Event> = (1..=n as u64).map(|s| make_event(session, s)).collect();
            inner.logs.insert(session.to_owned(), log);
        }
        self.drop_connections();
    }

    /// Queues a script for the next Subscribe call.
    pub fn script(&self, script: Script) {
        self.lock().scripts.push_back(script);
    }

    /// Makes Subscribe answer UNAVAILABLE (true) or work again (false).
    pub fn refuse_subscribe(&self, refuse: bool) {
        self.lock().refuse_subscribe = refuse;
    }

    /// Holds (false) or releases (true) History calls.
    pub fn open_history(&self, open: bool) {
        self.history_open.send_replace(open);
    }

    /// Lets replays paused by `Script::pause_replay_after` continue.
    pub fn release_replay(&self) {
        self.replay_release.send_modify(|v| *v += 1);
    }

    /// The `after_seq` of every Subscribe call so far.
    pub fn subscribe_after(&self) -> Vec<u64> {
        self.lock().subscribe_after.clone()
    }

    /// History calls so far.
    pub fn history_calls(&self) -> usize {
        self.lock().history_calls
    }

    /// Heartbeats sent so far, over all streams.
    pub fn heartbeats_sent(&self) -> usize {
        self.lock().heartbeats_sent
    }

    fn check_auth<T>(&self, request: &Request<T>) -> Result<(), Status> {
        let header = request
            .metadata()
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let session = request
            .metadata()
            .get("x-session-id")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let mut inner = self.lock();
        inner.auth_headers.push(header.clone());
        inner.session_headers.push(session);
        drop(inner);
        match &self.token {
            Some(token) if header.as_deref() != Some(&format!("Bearer {token}")) => {
                Err(Status::unauthenticated("missing or wrong bearer token"))
            }
            _ => Ok(()),
        }
    }
}

/// An event of a plausible log: seq 1 starts a run, then even seqs are
/// input_sent (a turn begins) and odd seqs turn_end, so the derived status
/// flips between streaming and idle as events arrive.
pub fn make_event(session: &str, seq: u64) -> pb::Event {
    let payload = if seq == 1 {
        Payload::RunStart(pb::RunStart::default())
    } else if seq % 2 == 0 {
        Payload::InputSent(pb::InputSent {
            text: format!("message {seq}"),
            ..Default::default()
        })
    } else {
        Payload::TurnEnd(pb::TurnEnd::default())
    };
    pb::Event {
        seq,
        session_id: session.to_owned(),
        run_id: "run-1".to_owned(),
        payload: Some(payload),
        ..Default::default()
    }
}

/// The service.
#[derive(Clone)]
pub struct TestService(pub Arc<State>);

type SubscribeStream = Pin<Box<dyn Stream<Item = Result<pb::SubscribeResponse, Status>> + Send>>;

fn msg(kind: Kind) -> Result<pb::SubscribeResponse, Status> {
    Ok(pb::SubscribeResponse { kind: Some(kind) })
}

#[tonic::async_trait]
impl SessionService for TestService {
    async fn start(
        &self,
        request: Request<pb::StartRequest>,
    ) -> Result<Response<pb::StartResponse>, Status> {
        self.0.check_auth(&request)?;
        self.0.lock().starts.push(request.into_inner());
        self.0.lost_answer()?;
        Ok(Response::new(pb::StartResponse {
            run_id: "run-1".to_owned(),
            process_id: "test:1".to_owned(),
        }))
    }

    async fn send(
        &self,
        request: Request<pb::SendRequest>,
    ) -> Result<Response<pb::SendResponse>, Status> {
        self.0.check_auth(&request)?;
        let req = request.into_inner();
        if req.input.is_empty() {
            return Err(Status::invalid_argument("input: must not be empty"));
        }
        let input = pb::Event {
            run_id: "run-1".to_owned(),
            payload: Some(Payload::InputSent(pb::InputSent {
                text: req.input.clone(),
                content_blocks: req.content_blocks.clone(),
                source: pb::InputSource::User as i32,
                ..Default::default()
            })),
            ..Default::default()
        };
        let session = req.session_id.clone();
        self.0.lock().sent.push(req);
        self.0.lost_answer()?;
        self.0.append_event(&session, input);
        Ok(Response::new(pb::SendResponse {
            run_id: "run-1".to_owned(),
        }))
    }

    async fn stop(
        &self,
        request: Request<pb::StopRequest>,
    ) -> Result<Response<pb::StopResponse>, Status> {
        self.0.check_auth(&request)?;
        {
            let mut inner = self.0.lock();
            inner.stops += 1;
            inner.stop_requests.push(request.into_inner());
        }
        self.0.lost_answer()?;
        Ok(Response::new(pb::StopResponse { stopping: false }))
    }

    async fn stop_task(
        &self,
        request: Request<pb::StopTaskRequest>,
    ) -> Result<Response<pb::StopTaskResponse>, Status> {
        self.0.check_auth(&request)?;
        let req = request.into_inner();
        if req.task_id.is_empty() {
            return Err(Status::invalid_argument("task_id: must not be empty"));
        }
        self.0.lock().stop_task_requests.push(req);
        self.0.lost_answer()?;
        Ok(Response::new(pb::StopTaskResponse {}))
    }

    async fn delete_session(
        &self,
        request: Request<pb::DeleteSessionRequest>,
    ) -> Result<Response<pb::DeleteSessionResponse>, Status> {
        self.0.check_auth(&request)?;
        let req = request.into_inner();
        self.0.lock().delete_requests.push(req);
        self.0.lost_answer()?;
        Ok(Response::new(pb::DeleteSessionResponse {}))
    }

    async fn set_model(
        &self,
        request: Request<pb::SetModelRequest>,
    ) -> Result<Response<pb::SetModelResponse>, Status> {
        self.0.check_auth(&request)?;
        let req = request.into_inner();
        let (session, value) = (req.session_id.clone(), req.model.clone());
        self.0.lock().set_model_requests.push(req);
        self.0.lost_answer()?;
        let seq = self.0.record_setting(&session, pb::Setting::Model, value);
        Ok(Response::new(pb::SetModelResponse {
            applied: pb::SettingApplied::Live as i32,
            seq,
        }))
    }

    async fn set_permission_mode(
        &self,
        request: Request<pb::SetPermissionModeRequest>,
    ) -> Result<Response<pb::SetPermissionModeResponse>, Status> {
        self.0.check_auth(&request)?;
        let req = request.into_inner();
        if req.mode.is_empty() {
            return Err(Status::invalid_argument("mode: must not be empty"));
        }
        let (session, value) = (req.session_id.clone(), req.mode.clone());
        self.0.lock().set_permission_mode_requests.push(req);
        self.0.lost_answer()?;
        let seq = self
            .0
            .record_setting(&session, pb::Setting::PermissionMode, value);
        Ok(Response::new(pb::SetPermissionModeResponse {
            applied: pb::SettingApplied::Live as i32,
            seq,
        }))
    }

    async fn set_max_thinking_tokens(
        &self,
        request: Request<pb::SetMaxThinkingTokensRequest>,
    ) -> Result<Response<pb::SetMaxThinkingTokensResponse>, Status> {
        self.0.check_auth(&request)?;
        let req = request.into_inner();
        let session = req.session_id.clone();
        let value = req
            .max_thinking_tokens
            .map(|n| n.to_string())
            .unwrap_or_default();
        self.0.lock().set_max_thinking_tokens_requests.push(req);
        self.0.lost_answer()?;
        let seq = self
            .0
            .record_setting(&session, pb::Setting::MaxThinkingTokens, value);
        Ok(Response::new(pb::SetMaxThinkingTokensResponse {
            applied: pb::SettingApplied::Live as i32,
            seq,
        }))
    }

    async fn rewind_files(
        &self,
        request: Request<pb::RewindFilesRequest>,
    ) -> Result<Response<pb::RewindFilesResponse>, Status> {
        self.0.check_auth(&request)?;
        let req = request.into_inner();
        if req.to_seq == 0 {
            return Err(Status::invalid_argument("to_seq: must not be 0"));
        }
        let (session, to_seq, dry_run) = (req.session_id.clone(), req.to_seq, req.dry_run);
        self.0.lock().rewind_files_requests.push(req);
        self.0.lost_answer()?;
        let mut answer = pb::RewindFilesResponse {
            files_changed: vec!["notes.txt".to_owned()],
            insertions: 1,
            deletions: 1,
            seq: 0,
        };
        if !dry_run {
            let rewound = pb::FilesRewound {
                to_seq,
                message_uuid: "uuid-1".to_owned(),
                files_changed: answer.files_changed.clone(),
                insertions: answer.insertions,
                deletions: answer.deletions,
            };
            answer.seq = self.0.append_event(
                &session,
                pb::Event {
                    payload: Some(Payload::FilesRewound(rewound)),
                    ..Default::default()
                },
            );
        }
        Ok(Response::new(answer))
    }

    async fn get_context_usage(
        &self,
        request: Request<pb::GetContextUsageRequest>,
    ) -> Result<Response<pb::GetContextUsageResponse>, Status> {
        self.0.check_auth(&request)?;
        let usage = {
            let mut inner = self.0.lock();
            inner.context_usage_calls += 1;
            inner.context_usage.clone()
        };
        self.0.lost_answer()?;
        usage
            .map(Response::new)
            .ok_or_else(|| Status::failed_precondition("no live process"))
    }

    type SubscribeStream = SubscribeStream;

    async fn subscribe(
        &self,
        request: Request<pb::SubscribeRequest>,
    ) -> Result<Response<Self::SubscribeStream>, Status> {
        self.0.check_auth(&request)?;
        let req = request.into_inner();
        let state = self.0.clone();
        // Register for live notifications before reading the log (gapless
        // catch-up: docs/ARCHITECTURE.md, "Gapless catch-up").
        let mut appended = state.appended.subscribe();
        let mut kill = state.kill.subscribe();
        let mut release = state.replay_release.subscribe();
        let mut deltas = state.deltas.subscribe();
        let include_deltas = req.include_deltas;
        let (script, head) = {
            let mut inner = state.lock();
            inner.subscribe_after.push(req.after_seq);
            inner.subscribe_deltas.push(req.include_deltas);
            if inner.refuse_subscribe {
                return Err(Status::unavailable("refusing subscriptions"));
            }
            let head = inner
                .logs
                .get(&req.session_id)
                .map_or(0, |l| l.len() as u64);
            (inner.scripts.pop_front().unwrap_or_default(), head)
        };
        let window = state.replay_window;
        let (reset, from_seq) = if req.after_seq > head || head - req.after_seq > window {
            (true, head.saturating_sub(window))
        } else {
            (false, req.after_seq.saturating_sub(script.overlap))
        };
        let (tx, rx) = mpsc::channel(16);
        let session = req.session_id;
        tokio::spawn(async move {
            let mut sent_events = 0usize;
            let mut last = from_seq;
            macro_rules! send {
                ($m:expr) => {
                    if tx.send($m).await.is_err() {
                        return;
                    }
                };
            }
            macro_rules! send_event {
                ($e:expr) => {{
                    let e: pb::Event = $e;
                    last = e.seq;
                    if script.skip_seq != Some(e.seq) {
                        send!(msg(Kind::Event(e)));
                        sent_events += 1;
                        if script.fail_after_events == Some(sent_events) {
                            send!(Err(Status::unavailable("scripted failure")));
                            return;
                        }
                    }
                }};
            }
            send!(msg(Kind::Replay(pb::ReplayStart {
                reset,
                from_seq,
                head_seq: head,
            })));
            let replay = state.events_between(&session, from_seq, head);
            for (i, e) in replay.into_iter().enumerate() {
                if script.pause_replay_after == Some(i) {
                    let _ = release.changed().await;
                }
                if kill.has_changed().unwrap_or(true) {
                    let _ = tx
                        .send(Err(Status::unavailable("connection dropped")))
                        .await;
                    return;
                }
                send_event!(e);
            }
            send!(msg(Kind::CaughtUp(pb::CaughtUp { head_seq: head })));
            if script.silent_after_caught_up {
                tx.closed().await;
                return;
            }
            if include_deltas {
                // Taken together under the lock: the events the snapshot
                // follows, the snapshot, and the live deltas it already
                // holds (dropped from the queue).
                let (events, snapshot) = {
                    let inner = state.lock();
                    while deltas.try_recv().is_ok() {}
                    let events = inner
                        .logs
                        .get(&session)
                        .map(|l| l[(last as usize).min(l.len())..].to_vec())
                        .unwrap_or_default();
                    let snapshot = inner.writing.get(&session).cloned().unwrap_or_default();
                    (events, snapshot)
                };
                for e in events {
                    send_event!(e);
                }
                for d in snapshot {
                    send!(msg(Kind::Delta(pb::Delta {
                        after_seq: last,
                        ..d
                    })));
                }
            }
            loop {
                if kill.has_changed().unwrap_or(true) {
                    let _ = tx
                        .send(Err(Status::unavailable("connection dropped")))
                        .await;
                    return;
                }
                // One consistent cut of the log and the queued deltas (both
                // change under the lock), each delta after the events
                // appended before it.
                let batch = {
                    let inner = state.lock();
                    let log = inner.logs.get(&session).map_or(&[][..], |l| &l[..]);
                    let tail = |from: u64, to: u64| {
                        log[(from as usize).min(log.len())..(to as usize).min(log.len())]
                            .iter()
                            .cloned()
                            .map(Kind::Event)
                    };
                    let mut batch = Vec::new();
                    let mut cursor = last;
                    // Without include_deltas the queue is left alone.
                    while let Some(next) = include_deltas.then(|| deltas.try_recv()) {
                        match next {
                            Ok((sid, delta)) if sid == session => {
                                let to = delta.after_seq.max(cursor);
                                batch.extend(tail(cursor, to));
                                cursor = to;
                                batch.push(Kind::Delta(delta));
                            }
                            Ok(_) => {}
                            Err(broadcast::error::TryRecvError::Empty) => break,
                            // 1024 queued: no test pushes that many.
                            Err(e) => panic!("a test stream fell behind the deltas: {e}"),
                        }
                    }
                    batch.extend(tail(cursor, u64::MAX));
                    batch
                };
                let idle = batch.is_empty();
                for kind in batch {
                    match kind {
                        Kind::Event(e) => {
                            if script.duplicate_live {
                                send!(msg(Kind::Event(e.clone())));
                            }
                            send_event!(e);
                        }
                        other => send!(msg(other)),
                    }
                }
                if !idle {
                    continue;
                }
                tokio::select! {
                    changed = appended.changed() => if changed.is_err() { return },
                    _ = kill.changed() => {
                        let _ = tx.send(Err(Status::unavailable("connection dropped"))).await;
                        return;
                    }
                    _ = tokio::time::sleep(state.heartbeat) => {
                        send!(msg(Kind::Heartbeat(pb::Heartbeat { head_seq: last })));
                        state.lock().heartbeats_sent += 1;
                    }
                    _ = tx.closed() => return,
                }
            }
        });
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }

    type ReadFullEventStream =
        Pin<Box<dyn Stream<Item = Result<pb::ReadFullEventResponse, Status>> + Send>>;

    async fn read_full_event(
        &self,
        _request: Request<pb::ReadFullEventRequest>,
    ) -> Result<Response<Self::ReadFullEventStream>, Status> {
        Err(Status::unimplemented(
            "the test service keeps no full events",
        ))
    }

    async fn history(
        &self,
        request: Request<pb::HistoryRequest>,
    ) -> Result<Response<pb::HistoryResponse>, Status> {
        self.0.check_auth(&request)?;
        let req = request.into_inner();
        {
            let mut inner = self.0.lock();
            inner.history_calls += 1;
            inner.history_requests.push(req.clone());
        }
        let mut open = self.0.history_open.subscribe();
        let _ = open.wait_for(|open| *open).await;
        let limit = match req.limit {
            0 => 50,
            n => n.min(1000),
        } as usize;
        let older: Vec<pb::Event> = self
            .0
            .events(&req.session_id)
            .into_iter()
            .filter(|e| req.before_seq == 0 || e.seq < req.before_seq)
            .collect();
        let start = older.len().saturating_sub(limit);
        Ok(Response::new(pb::HistoryResponse {
            has_more: start > 0,
            events: older[start..].to_vec(),
        }))
    }

    async fn respond_permission(
        &self,
        request: Request<pb::RespondPermissionRequest>,
    ) -> Result<Response<pb::RespondPermissionResponse>, Status> {
        self.0.check_auth(&request)?;
        let req = request.into_inner();
        if req.request_id.is_empty() {
            return Err(Status::invalid_argument("request_id: must not be empty"));
        }
        self.0.lock().permission_answers.push(req);
        self.0.lost_answer()?;
        Ok(Response::new(pb::RespondPermissionResponse {}))
    }

    async fn get_session(
        &self,
        request: Request<pb::GetSessionRequest>,
    ) -> Result<Response<pb::GetSessionResponse>, Status> {
        self.0.check_auth(&request)?;
        let req = request.into_inner();
        let events = self.0.events(&req.session_id);
        Ok(Response::new(pb::GetSessionResponse {
            session: Some(agent_harness_client::derive::session(
                &req.session_id,
                &events,
            )),
        }))
    }

    async fn list_sessions(
        &self,
        request: Request<pb::ListSessionsRequest>,
    ) -> Result<Response<pb::ListSessionsResponse>, Status> {
        self.0.check_auth(&request)?;
        Err(Status::unimplemented("not needed by the client tests"))
    }

    async fn set_title(
        &self,
        request: Request<pb::SetTitleRequest>,
    ) -> Result<Response<pb::SetTitleResponse>, Status> {
        self.0.check_auth(&request)?;
        let req = request.into_inner();
        let (session, title) = (req.session_id.clone(), req.title.trim().to_owned());
        self.0.lock().set_title_requests.push(req);
        self.0.lost_answer()?;
        let seq = self.0.append_event(
            &session,
            pb::Event {
                payload: Some(Payload::TitleSet(pb::TitleSet { title })),
                ..Default::default()
            },
        );
        Ok(Response::new(pb::SetTitleResponse { seq }))
    }

    async fn list_agents(
        &self,
        request: Request<pb::ListAgentsRequest>,
    ) -> Result<Response<pb::ListAgentsResponse>, Status> {
        self.0.check_auth(&request)?;
        let agent = |name: &str, kind: &str| pb::AgentInfo {
            name: name.into(),
            kind: kind.into(),
            is_default: name == "claude",
        };
        Ok(Response::new(pb::ListAgentsResponse {
            agents: vec![agent("claude", "claude"), agent("gemini", "acp")],
        }))
    }
}

/// Options of a [`TestServer`].
#[derive(Debug, Clone)]
pub struct ServerOptions {
    /// See [`State::replay_window`].
    pub replay_window: u64,
    /// See [`State::heartbeat`].
    pub heartbeat: Duration,
    /// See [`State::token`].
    pub token: Option<String>,
}

impl Default for ServerOptions {
    fn default() -> Self {
        Self {
            replay_window: 1000,
            heartbeat: Duration::from_millis(100),
            token: None,
        }
    }
}

/// A running server; shut down on drop.
pub struct TestServer {
    /// Where it listens.
    pub addr: SocketAddr,
    /// Its state and hooks.
    pub state: Arc<State>,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
}

fn new_state(options: ServerOptions) -> Arc<State> {
    Arc::new(State {
        inner: Mutex::new(Inner::default()),
        replay_window: options.replay_window,
        heartbeat: options.heartbeat,
        token: options.token,
        appended: watch::channel(0).0,
        changes: watch::channel(0).0,
        kill: watch::channel(0).0,
        history_open: watch::channel(true).0,
        replay_release: watch::channel(0).0,
        deltas: broadcast::channel(1024).0,
    })
}

/// The same service over in-memory pipes instead of TCP: no socket, so
/// tokio's paused time (which jumps ahead whenever every task waits) never
/// fires a timer while bytes are still in flight. For timing tests.
pub struct InMemoryServer {
    /// Its state and hooks.
    pub state: Arc<State>,
    /// A channel whose every connection is a fresh pipe into the server.
    pub channel: tonic::transport::Channel,
}

impl InMemoryServer {
    /// Starts serving; the server task ends with the runtime.
    pub fn start(options: ServerOptions) -> Self {
        let state = new_state(options);
        let (conn_tx, conn_rx) = mpsc::unbounded_channel::<tokio::io::DuplexStream>();
        let service = SessionServiceServer::new(TestService(state.clone()));
        tokio::spawn(async move {
            let incoming = tokio_stream::wrappers::UnboundedReceiverStream::new(conn_rx)
                .map(Ok::<_, std::io::Error>);
            tonic::transport::Server::builder()
                .add_service(service)
                .serve_with_incoming(incoming)
                .await
                .unwrap();
        });
        let channel = tonic::transport::Endpoint::from_static("http://in-memory.invalid")
            .connect_with_connector_lazy(tower::service_fn(move |_uri| {
                let (client, server) = tokio::io::duplex(1 << 20);
                let sent = conn_tx.send(server);
                async move {
                    sent.map_err(|_| std::io::Error::other("server gone"))?;
                    Ok::<_, std::io::Error>(hyper_util::rt::TokioIo::new(client))
                }
            }));
        Self { state, channel }
    }
}

impl TestServer {
    /// Starts a server on 127.0.0.1:0.
    pub async fn start(options: ServerOptions) -> Self {
        let state = new_state(options);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (shutdown, stop) = tokio::sync::oneshot::channel::<()>();
        let service = SessionServiceServer::new(TestService(state.clone()));
        tokio::spawn(async move {
            tonic::transport::Server::builder()
                .add_service(service)
                .serve_with_incoming_shutdown(
                    tokio_stream::wrappers::TcpListenerStream::new(listener),
                    async {
                        let _ = stop.await;
                    },
                )
                .await
                .unwrap();
        });
        Self {
            addr,
            state,
            shutdown: Some(shutdown),
        }
    }

    /// `http://` address for the client.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        if let Some(s) = self.shutdown.take() {
            let _ = s.send(());
        }
        self.state.drop_connections();
    }
}
