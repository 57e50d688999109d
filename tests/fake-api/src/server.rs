//! The HTTP side: [`FakeApi`] owns a listener on its own thread and runtime, routes
//! requests, keeps the request log and stops when dropped.

use crate::conversation::Position;
use crate::gemini_api::{self, stream::Shape};
use crate::ids;
use crate::responses;
use crate::script::{self, Reply, ScriptedMessage};
use crate::sse;
use crate::usage::Usage;
use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use std::collections::hash_map::DefaultHasher;
use std::collections::{BTreeMap, HashMap};
use std::hash::{Hash, Hasher};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// One request the fake API received, for assertions.
#[derive(Debug, Clone)]
pub struct RecordedRequest {
    /// Time since the server started.
    pub at: Duration,
    /// HTTP method.
    pub method: String,
    /// Path and query, e.g. `/v1/messages?beta=true`.
    pub path: String,
    /// Request headers, lower-case names (the last value wins for repeated names).
    pub headers: BTreeMap<String, String>,
    /// The body when it was JSON.
    pub body: Option<Value>,
    /// What the script made of a `POST /v1/messages` (the directive, `+tool_result`, ...);
    /// empty for other endpoints.
    pub scenario: String,
}

impl RecordedRequest {
    /// Whether this is a `POST /v1/messages` call (not `count_tokens`).
    pub fn is_messages(&self) -> bool {
        self.method == "POST"
            && (self.path == "/v1/messages" || self.path.starts_with("/v1/messages?"))
    }

    /// Whether this is a `POST /v1/responses` call (what Codex sends).
    pub fn is_responses(&self) -> bool {
        self.method == "POST" && self.path.split('?').next() == Some("/v1/responses")
    }

    /// Whether this is a Gemini API model call: `:streamGenerateContent` (the
    /// conversation) or `:generateContent` (Gemini CLI's side calls).
    pub fn is_gemini(&self) -> bool {
        self.method == "POST"
            && gemini_api::Call::of_path(&self.path).is_some_and(|c| {
                matches!(
                    c.method.as_str(),
                    "streamGenerateContent" | "generateContent"
                )
            })
    }

    /// Whether this is a Gemini `:streamGenerateContent` call: a turn of the conversation.
    pub fn is_gemini_stream(&self) -> bool {
        self.method == "POST"
            && gemini_api::Call::of_path(&self.path)
                .is_some_and(|c| c.method == "streamGenerateContent")
    }

    /// The user's prompts of a Messages, Responses or Gemini call, oldest first, without
    /// the client's own context blocks: a resumed conversation shows its earlier prompts
    /// here.
    pub fn user_prompts(&self) -> Vec<String> {
        let Some(body) = &self.body else {
            return Vec::new();
        };
        if self.is_responses() {
            responses::input::user_prompts(body)
        } else if self.is_gemini() {
            gemini_api::input::user_prompts(body)
        } else {
            crate::conversation::user_prompts(body)
        }
    }

    /// The request's `model`, if any.
    pub fn model(&self) -> Option<&str> {
        self.body.as_ref()?.get("model")?.as_str()
    }
}

/// State shared by all requests of one server.
#[derive(Debug)]
struct Shared {
    started: Instant,
    /// The bound port, to name dump files.
    port: u16,
    requests: Mutex<Vec<RecordedRequest>>,
    /// How many times each distinct request body was seen, for `ERROR <status> <times>`.
    attempts: Mutex<HashMap<u64, u32>>,
    shutdown: CancellationToken,
    /// SSE responses still being written: lets a test see that the CLI dropped a connection.
    active_streams: AtomicUsize,
    /// SSE events handed to the connection so far, over all streams: lets a test wait until
    /// a slow reply is some way in.
    sse_events: AtomicUsize,
}

/// Counts one open SSE stream for as long as it lives.
struct StreamGuard(Arc<Shared>);

impl StreamGuard {
    fn new(shared: &Arc<Shared>) -> Self {
        shared.active_streams.fetch_add(1, Ordering::SeqCst);
        Self(shared.clone())
    }
}

impl Drop for StreamGuard {
    fn drop(&mut self) {
        self.0.active_streams.fetch_sub(1, Ordering::SeqCst);
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A scripted Messages API (and Responses and Gemini APIs) on loopback. Dropping it stops the server and closes every open
/// connection (a `HANG` stream included) before `drop` returns.
///
/// ```no_run
/// # async fn demo() {
/// let api = agent_harness_fake_api::FakeApi::start().await;
/// // run `claude` with ANTHROPIC_BASE_URL = api.base_url()
/// assert!(api.requests().iter().all(|r| r.is_messages()));
/// # }
/// ```
#[derive(Debug)]
pub struct FakeApi {
    addr: SocketAddr,
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

impl FakeApi {
    /// Starts on `127.0.0.1:0`. Panics when it cannot bind (a test fixture has no better
    /// answer); use [`FakeApi::bind`] to handle the error.
    pub async fn start() -> FakeApi {
        Self::start_blocking()
    }

    /// [`FakeApi::start`] for synchronous callers.
    pub fn start_blocking() -> FakeApi {
        match Self::bind(SocketAddr::from(([127, 0, 0, 1], 0))) {
            Ok(api) => api,
            Err(e) => panic!("fake Messages API: cannot bind 127.0.0.1:0: {e}"),
        }
    }

    /// Binds `addr` and serves on a thread of its own, so the server keeps running while the
    /// caller's runtime (or thread) is blocked.
    pub fn bind(addr: SocketAddr) -> std::io::Result<FakeApi> {
        let listener = std::net::TcpListener::bind(addr)?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            started: Instant::now(),
            port: addr.port(),
            requests: Mutex::new(Vec::new()),
            attempts: Mutex::new(HashMap::new()),
            shutdown: CancellationToken::new(),
            active_streams: AtomicUsize::new(0),
            sse_events: AtomicUsize::new(0),
        });
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("fake-messages-api")
            .enable_all()
            .build()?;
        let app = Router::new()
            .fallback(handle)
            .layer(DefaultBodyLimit::disable())
            .with_state(shared.clone());
        let shutdown = shared.shutdown.clone();
        let thread = std::thread::Builder::new()
            .name("fake-messages-api".into())
            .spawn(move || {
                runtime.block_on(async move {
                    let listener = match tokio::net::TcpListener::from_std(listener) {
                        Ok(l) => l,
                        Err(e) => {
                            tracing::error!(error = %e, "fake Messages API: listener");
                            return;
                        }
                    };
                    tokio::select! {
                        r = axum::serve(listener, app) => {
                            if let Err(e) = r {
                                tracing::error!(error = %e, "fake Messages API: serve");
                            }
                        }
                        _ = shutdown.cancelled() => {}
                    }
                });
                // Drops every connection and stream task at once; nothing here needs a
                // graceful end.
                runtime.shutdown_timeout(Duration::ZERO);
            })?;
        tracing::info!(%addr, "fake Messages API listening");
        Ok(FakeApi {
            addr,
            shared,
            thread: Some(thread),
        })
    }

    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT`, the value for `ANTHROPIC_BASE_URL`.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The environment the CLI needs to use this server (besides a fresh `HOME`):
    /// `ANTHROPIC_BASE_URL`, `ANTHROPIC_API_KEY=test` and
    /// `CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1`.
    pub fn cli_env(&self) -> [(&'static str, String); 3] {
        [
            ("ANTHROPIC_BASE_URL", self.base_url()),
            ("ANTHROPIC_API_KEY", "test".to_owned()),
            ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1".to_owned()),
        ]
    }

    /// Every request received so far, oldest first.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        lock(&self.shared.requests).clone()
    }

    /// Only the `POST /v1/messages` calls.
    pub fn message_requests(&self) -> Vec<RecordedRequest> {
        self.requests()
            .into_iter()
            .filter(RecordedRequest::is_messages)
            .collect()
    }

    /// Only the `POST /v1/responses` calls.
    pub fn responses_requests(&self) -> Vec<RecordedRequest> {
        self.requests()
            .into_iter()
            .filter(RecordedRequest::is_responses)
            .collect()
    }

    /// Only the Gemini `:streamGenerateContent` calls: the conversation's model turns.
    pub fn gemini_requests(&self) -> Vec<RecordedRequest> {
        self.requests()
            .into_iter()
            .filter(RecordedRequest::is_gemini_stream)
            .collect()
    }

    /// Only the Gemini `:generateContent` calls: Gemini CLI's side calls (routing, the
    /// next-speaker check), each with a JSON schema.
    pub fn gemini_side_calls(&self) -> Vec<RecordedRequest> {
        self.requests()
            .into_iter()
            .filter(|r| r.is_gemini() && !r.is_gemini_stream())
            .collect()
    }

    /// How many streamed replies are still open (a `HANG` stays open until the CLI drops the
    /// connection, e.g. after an interrupt).
    pub fn active_streams(&self) -> usize {
        self.shared.active_streams.load(Ordering::SeqCst)
    }

    /// SSE events (`message_start`, each delta, ...) written to connections so far, over all
    /// streamed replies.
    pub fn sse_events_sent(&self) -> usize {
        self.shared.sse_events.load(Ordering::SeqCst)
    }

    /// Forgets the requests received so far.
    pub fn clear_requests(&self) {
        lock(&self.shared.requests).clear();
    }
}

impl Drop for FakeApi {
    fn drop(&mut self) {
        self.shared.shutdown.cancel();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

async fn handle(
    State(shared): State<Arc<Shared>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let path = uri
        .path_and_query()
        .map_or_else(|| uri.path().to_owned(), |p| p.as_str().to_owned());
    let json_body = parse_body(&body);
    let mut record = RecordedRequest {
        at: shared.started.elapsed(),
        method: method.to_string(),
        path: path.clone(),
        headers: headers
            .iter()
            .map(|(k, v)| {
                (
                    k.as_str().to_owned(),
                    String::from_utf8_lossy(v.as_bytes()).into_owned(),
                )
            })
            .collect(),
        body: json_body.clone(),
        scenario: String::new(),
    };
    tracing::debug!(%method, %path, "fake Messages API request");
    let response = match (method.as_str(), uri.path()) {
        ("POST", "/v1/messages") => match json_body {
            Some(b) => messages(&shared, &b, &mut record),
            None => error_response(&Api::Messages, 400, "request body is not JSON"),
        },
        ("POST", "/v1/responses") => match json_body {
            Some(b) => responses(&shared, &b, &mut record),
            None => error_response(&Api::Responses, 400, "request body is not JSON"),
        },
        ("POST", p) if gemini_api::Call::of_path(p).is_some() => {
            let call = gemini_api::Call::of_path(p).unwrap_or_else(|| unreachable!());
            match (call.method.as_str(), json_body) {
                ("streamGenerateContent" | "generateContent", Some(b)) => {
                    gemini(&shared, &call, &b, &mut record)
                }
                ("countTokens", b) => {
                    let n = b.map_or(1, |b| gemini_api::input::usage(&b).total_input());
                    axum::Json(json!({"totalTokens": n})).into_response()
                }
                (_, None) => error_response(&Api::Gemini(None), 400, "request body is not JSON"),
                (method, Some(_)) => error_response(
                    &Api::Gemini(None),
                    404,
                    &format!("method {method} is not scripted"),
                ),
            }
        }
        ("POST", "/v1/messages/count_tokens") => {
            let n = json_body.map_or(1, |b| Usage::for_request(&b).total_input());
            axum::Json(json!({"input_tokens": n})).into_response()
        }
        // The CLI warms its connection up with `HEAD /` before the first call.
        ("HEAD", "/") => StatusCode::OK.into_response(),
        ("GET", "/v1/models") => axum::Json(json!({
            "data": [{"type": "model", "id": "claude-sonnet-4-5",
                      "display_name": "Claude Sonnet 4.5", "created_at": "2025-09-29T00:00:00Z"}],
            "has_more": false,
            "first_id": "claude-sonnet-4-5",
            "last_id": "claude-sonnet-4-5",
        }))
        .into_response(),
        _ => {
            tracing::warn!(%method, %path, "fake Messages API: unscripted endpoint, answering {{}}");
            axum::Json(json!({})).into_response()
        }
    };
    tracing::debug!(%method, %path, scenario = %record.scenario, status = response.status().as_u16(), "fake Messages API reply");
    let mut requests = lock(&shared.requests);
    dump(
        &format!("{}-{:04}", shared.port, requests.len()),
        &record,
        &body,
    );
    requests.push(record);
    drop(requests);
    response
}

/// With `FAKE_MESSAGES_API_DUMP_DIR` set, writes each request (headers and raw body) to
/// `<dir>/<port>-<n>.json`: the way to see exactly what the CLI sent.
fn dump(name: &str, record: &RecordedRequest, body: &[u8]) {
    let Some(dir) = std::env::var_os("FAKE_MESSAGES_API_DUMP_DIR") else {
        return;
    };
    let doc = json!({
        "method": record.method,
        "path": record.path,
        "headers": record.headers,
        "scenario": record.scenario,
        "body": record.body.clone().unwrap_or_else(|| String::from_utf8_lossy(body).into()),
    });
    let file = std::path::Path::new(&dir).join(format!("{name}.json"));
    if let Err(e) = std::fs::write(&file, format!("{doc:#}")) {
        tracing::warn!(error = %e, file = %file.display(), "fake Messages API: dump failed");
    }
}

/// Which of the scripted APIs a request came to: the script is the same, the wire format
/// differs.
#[derive(Debug, Clone)]
enum Api {
    /// Anthropic Messages (`POST /v1/messages`), for claude.
    Messages,
    /// OpenAI Responses (`POST /v1/responses`), for codex.
    Responses,
    /// Gemini (`:streamGenerateContent`, `:generateContent`), for gemini; what the request
    /// declares about its reply (none for an error before the body was read).
    Gemini(Option<Shape>),
}

/// How many times this conversation was asked before, for `ERROR <status> <times>`: keyed by
/// the conversation and the client's session header, so two clients sending the same first
/// prompt to one server count separately.
fn attempt(shared: &Shared, conversation: Option<&Value>, session: Option<&String>) -> u32 {
    let mut h = DefaultHasher::new();
    conversation.map(Value::to_string).hash(&mut h);
    session.hash(&mut h);
    let mut attempts = lock(&shared.attempts);
    let n = attempts.entry(h.finish()).or_insert(0);
    *n += 1;
    *n - 1
}

fn messages(shared: &Arc<Shared>, body: &Value, record: &mut RecordedRequest) -> Response {
    let pos = Position::of_request(body);
    let n = attempt(
        shared,
        body.get("messages"),
        record.headers.get("x-claude-code-session-id"),
    );
    record.scenario = pos.label();
    let model = model_of(body, "claude-sonnet-4-5");
    let usage = Usage::for_request(body);
    let streaming = body.get("stream").and_then(Value::as_bool) == Some(true);
    answer(
        shared,
        Api::Messages,
        script::reply(&pos, n),
        streaming,
        model,
        usage,
    )
}

fn responses(shared: &Arc<Shared>, body: &Value, record: &mut RecordedRequest) -> Response {
    let pos = responses::input::position(body);
    let n = attempt(shared, body.get("input"), record.headers.get("session-id"));
    record.scenario = pos.label();
    let model = model_of(body, "gpt-fake");
    let usage = responses::input::usage(body);
    let streaming = body.get("stream").and_then(Value::as_bool) == Some(true);
    answer(
        shared,
        Api::Responses,
        script::reply(&pos, n),
        streaming,
        model,
        usage,
    )
}

fn gemini(
    shared: &Arc<Shared>,
    call: &gemini_api::Call,
    body: &Value,
    record: &mut RecordedRequest,
) -> Response {
    let pos = gemini_api::input::position(body);
    // Gemini CLI sends no session header; the conversation alone keys the attempts.
    let n = attempt(shared, body.get("contents"), None);
    record.scenario = pos.label();
    let shape = Shape {
        model: call.model.clone(),
        thoughts: gemini_api::input::wants_thoughts(body),
        shell: gemini_api::stream::ShellTool::of_request(body),
    };
    answer(
        shared,
        Api::Gemini(Some(shape)),
        script::reply(&pos, n),
        call.method == "streamGenerateContent",
        call.model.clone(),
        gemini_api::input::usage(body),
    )
}

fn model_of(body: &Value, default: &str) -> String {
    body.get("model")
        .and_then(Value::as_str)
        .unwrap_or(default)
        .to_owned()
}

/// Sends the script's reply in `api`'s wire format: streamed when the request asked for it.
fn answer(
    shared: &Arc<Shared>,
    api: Api,
    reply: Reply,
    streaming: bool,
    model: String,
    usage: Usage,
) -> Response {
    match reply {
        Reply::Error { status, message } => error_response(&api, status, &message),
        Reply::Message(msg) if !streaming => {
            let whole = match api {
                Api::Messages => sse::message_json(&msg, &model, usage),
                Api::Responses => responses::stream::response_json(&msg, &model, usage),
                Api::Gemini(shape) => {
                    gemini_api::stream::response_json(&msg, usage, &gemini_shape(shape, &model))
                }
            };
            let mut resp = axum::Json(whole).into_response();
            insert_request_id(resp.headers_mut());
            resp
        }
        Reply::Message(msg) => sse_response(shared, |tx| {
            let shutdown = shared.shutdown.clone();
            let guard = StreamGuard::new(shared);
            async move {
                let _guard = guard;
                if !stream(api, tx, msg, model, usage, shutdown).await {
                    tracing::debug!("fake API: client left mid-stream");
                }
            }
        }),
        Reply::Hang if streaming => sse_response(shared, |tx| {
            let shutdown = shared.shutdown.clone();
            let guard = StreamGuard::new(shared);
            async move {
                let _guard = guard;
                match api {
                    Api::Messages => sse::hang(tx, model, usage, shutdown).await,
                    Api::Responses => responses::stream::hang(tx, model, shutdown).await,
                    // The Gemini API has no opening event: the headers, then silence.
                    Api::Gemini(_) => sse::hold_open(&tx, &shutdown).await,
                }
                tracing::debug!("fake API: HANG stream ended");
            }
        }),
        Reply::Hang => {
            // Non-streaming HANG: a body that never yields.
            let shutdown = shared.shutdown.clone();
            let body = futures::stream::once(async move {
                shutdown.cancelled().await;
                Ok::<_, std::convert::Infallible>(String::new())
            });
            Response::new(Body::from_stream(body))
        }
    }
}

async fn stream(
    api: Api,
    tx: sse::EventTx,
    msg: ScriptedMessage,
    model: String,
    usage: Usage,
    shutdown: CancellationToken,
) -> bool {
    match api {
        Api::Messages => sse::stream_message(tx, msg, model, usage, shutdown).await,
        Api::Responses => responses::stream::stream_response(tx, msg, model, usage, shutdown).await,
        Api::Gemini(shape) => {
            let shape = gemini_shape(shape, &model);
            gemini_api::stream::stream_response(tx, msg, usage, shape, shutdown).await
        }
    }
}

/// The reply shape of a Gemini request (a plain one when it was not read).
fn gemini_shape(shape: Option<Shape>, model: &str) -> Shape {
    shape.unwrap_or_else(|| Shape {
        model: model.to_owned(),
        thoughts: false,
        shell: gemini_api::stream::ShellTool::of_request(&Value::Null),
    })
}

/// A `text/event-stream` response fed by a task that writes events into a channel.
fn sse_response<F, Fut>(shared: &Arc<Shared>, producer: F) -> Response
where
    F: FnOnce(sse::EventTx) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let (tx, mut rx) = mpsc::channel(64);
    tokio::spawn(producer(tx));
    let counted = shared.clone();
    let stream = futures::stream::poll_fn(move |cx| {
        let polled = rx.poll_recv(cx);
        if let std::task::Poll::Ready(Some(_)) = &polled {
            counted.sse_events.fetch_add(1, Ordering::SeqCst);
        }
        polled
    });
    let mut resp = Response::new(Body::from_stream(stream));
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream; charset=utf-8"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    insert_request_id(h);
    resp
}

fn error_response(api: &Api, status: u16, message: &str) -> Response {
    let request_id = ids::request_id();
    let code = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let body = match api {
        Api::Messages => sse::error_json(status, message, &request_id),
        Api::Responses => responses::stream::error_json(status, message),
        Api::Gemini(_) => gemini_api::stream::error_json(status, message),
    };
    let mut resp = (code, axum::Json(body)).into_response();
    if let Ok(v) = HeaderValue::from_str(&request_id) {
        resp.headers_mut().insert("request-id", v);
    }
    resp
}

fn insert_request_id(h: &mut HeaderMap) {
    if let Ok(v) = HeaderValue::from_str(&ids::request_id()) {
        h.insert("request-id", v);
    }
}

/// A request body as JSON, at any depth: the real API takes a conversation
/// whose tool inputs nest past serde_json's default limit of 128 levels
/// (see `DEEPTOOL`). Bodies come from the CLI under test, so the stack this
/// takes is bounded by what the tests script.
fn parse_body(body: &[u8]) -> Option<Value> {
    use serde::Deserialize;
    let mut de = serde_json::Deserializer::from_slice(body);
    de.disable_recursion_limit();
    let v = Value::deserialize(&mut de).ok()?;
    de.end().ok()?;
    Some(v)
}
