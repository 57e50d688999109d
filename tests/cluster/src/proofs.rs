//! The proofs, one function each, run in the order of [`ALL`] against one
//! [`Cluster`]. A proof that needs a node dead kills it, so those come last.
//! Every wait is on something the cluster does (a stream message, a log
//! line, a port), bounded by [`PATIENCE`]; none is a fixed sleep.

use std::collections::{BTreeSet, HashMap};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use agent_harness_protocol::pb;
use futures::future::BoxFuture;
use pb::session_service_client::SessionServiceClient;
use pb::subscribe_response::Kind;
use prost::Message;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tonic::transport::Channel;

use crate::cluster::{
    Cluster, Front, HEARTBEAT, NODE_LEASE, Node, PATIENCE, PROXY_IDLE_TIMEOUT, connect,
};

pub type Proof = fn(Arc<Cluster>) -> BoxFuture<'static, ()>;

/// Each proof function named, as `(its name, the proof)`.
macro_rules! proofs {
    ($($proof:ident),* $(,)?) => {
        &[$((stringify!($proof), |c| Box::pin($proof(c)))),*]
    };
}

/// Every proof, by name (`agent-harness-cluster NAME…` runs those whose
/// name contains one of the arguments).
pub const ALL: &[(&str, Proof)] = proofs![
    one_session_one_node_through_each_proxy,
    subscribe_on_another_node_is_gapless,
    stream_outlives_each_proxy_idle_timeout,
    list_sessions_through_each_proxy_is_complete,
    writes_answered_by_the_owner_only,
    paused_owner_is_fenced_on_sigcont,
    killed_node_streams_end_and_log_is_intact,
    kill_owner_mid_turn_takeover,
    returning_node_does_not_pull_sessions_back,
];

/// The header the balancers route by.
pub(crate) const SESSION_HEADER: &str = "x-session-id";
/// The response header naming the node that answered.
pub(crate) const NODE_HEADER: &str = "x-agent-harness-node";

/// `msg` with the session's routing header, as every client helper sends it.
pub(crate) fn routed<T>(sid: &str, msg: T) -> tonic::Request<T> {
    let mut req = tonic::Request::new(msg);
    req.metadata_mut()
        .insert(SESSION_HEADER, sid.parse().expect("ascii session id"));
    req
}

pub(crate) fn new_session_id() -> String {
    format!("cluster-{}", uuid::Uuid::new_v4())
}

/// Starts `sid` (the cassette's first turn plays).
pub(crate) async fn start(client: &mut SessionServiceClient<Channel>, sid: &str) {
    let config = pb::StartConfig {
        prompt: "first".into(),
        ..Default::default()
    };
    client
        .start(routed(
            sid,
            pb::StartRequest {
                session_id: sid.into(),
                config: Some(config),
                idempotency_key: format!("start-{sid}"),
            },
        ))
        .await
        .unwrap_or_else(|e| panic!("Start {sid}: {e}"));
}

/// The cassette's second turn.
pub(crate) async fn send(client: &mut SessionServiceClient<Channel>, sid: &str) {
    client
        .send(routed(
            sid,
            pb::SendRequest {
                session_id: sid.into(),
                input: "second".into(),
                idempotency_key: format!("send-{sid}"),
                ..Default::default()
            },
        ))
        .await
        .unwrap_or_else(|e| panic!("Send {sid}: {e}"));
}

/// The whole log of `sid`, oldest first.
async fn history(client: &mut SessionServiceClient<Channel>, sid: &str) -> Vec<pb::Event> {
    let mut events = Vec::new();
    let mut before_seq = 0;
    loop {
        let page = client
            .history(routed(
                sid,
                pb::HistoryRequest {
                    session_id: sid.into(),
                    before_seq,
                    limit: 500,
                },
            ))
            .await
            .unwrap_or_else(|e| panic!("History {sid}: {e}"))
            .into_inner();
        let Some(first) = page.events.first() else {
            break;
        };
        before_seq = first.seq;
        events.splice(0..0, page.events);
        if !page.has_more {
            break;
        }
    }
    events
}

/// One Subscribe stream and what it has shown, checked as it comes: every
/// event's seq is the one after the last, no reset.
struct Watch {
    what: String,
    stream: tonic::Streaming<pb::SubscribeResponse>,
    events: Vec<pb::Event>,
    caught_up: bool,
    heartbeats: usize,
}

impl Watch {
    async fn open(client: &mut SessionServiceClient<Channel>, sid: &str, what: &str) -> Self {
        let stream = subscribe(client, sid, 0)
            .await
            .unwrap_or_else(|e| panic!("{what}: Subscribe {sid}: {e}"));
        Self {
            what: what.into(),
            stream,
            events: Vec::new(),
            caught_up: false,
            heartbeats: 0,
        }
    }

    /// Subscribes again through `addr` from the last event seen, as a
    /// client does after its stream broke, retrying while the call fails
    /// (the balancer has not yet noticed a dead node); the events that
    /// follow must continue the ones seen, without a gap or a duplicate.
    async fn resume(&mut self, addr: SocketAddr, sid: &str) -> usize {
        let after_seq = self.events.last().map_or(0, |e| e.seq);
        let deadline = Instant::now() + PATIENCE;
        let mut failures = 0;
        loop {
            match subscribe(&mut connect(addr).await, sid, after_seq).await {
                Ok(stream) => {
                    self.stream = stream;
                    self.caught_up = false;
                    return failures;
                }
                Err(e) => {
                    failures += 1;
                    assert!(
                        Instant::now() < deadline,
                        "{}: Subscribe after {after_seq}: {e}",
                        self.what
                    );
                }
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Reads until the stream ends (its node died).
    async fn drain(&mut self) {
        while let Some(Ok(())) = self.next().await {}
    }

    fn runs(&self) -> Vec<String> {
        let mut runs: Vec<String> = Vec::new();
        for e in &self.events {
            if matches!(e.payload, Some(pb::event::Payload::RunStart(_))) {
                runs.push(e.run_id.clone());
            }
        }
        runs
    }

    fn count(&self, pred: fn(&pb::event::Payload) -> bool) -> usize {
        self.events
            .iter()
            .filter(|e| e.payload.as_ref().is_some_and(pred))
            .count()
    }

    /// The next message, checked; `None` when the stream ended or failed.
    async fn next(&mut self) -> Option<Result<(), tonic::Status>> {
        let msg = match tokio::time::timeout(PATIENCE, self.stream.message()).await {
            Err(_) => panic!("{}: nothing for {PATIENCE:?}", self.what),
            Ok(Err(status)) => return Some(Err(status)),
            Ok(Ok(None)) => return None,
            Ok(Ok(Some(msg))) => msg,
        };
        match msg.kind {
            Some(Kind::Replay(r)) => assert!(!r.reset, "{}: a reset on a fresh stream", self.what),
            Some(Kind::Event(e)) => {
                let want = self.events.last().map_or(1, |l| l.seq + 1);
                assert_eq!(e.seq, want, "{}: a gap or a duplicate", self.what);
                self.events.push(e);
            }
            Some(Kind::CaughtUp(_)) => self.caught_up = true,
            Some(Kind::Heartbeat(_)) => self.heartbeats += 1,
            Some(Kind::Delta(_)) | None => {}
        }
        Some(Ok(()))
    }

    /// Reads until `done` holds; any end of the stream fails.
    async fn until(&mut self, what: &str, done: impl Fn(&Self) -> bool) {
        let deadline = Instant::now() + PATIENCE;
        while !done(self) {
            assert!(
                Instant::now() < deadline,
                "{}: no {what} within {PATIENCE:?}: {} events (last {:?}), caught_up {}, {} heartbeats",
                self.what,
                self.events.len(),
                self.events.last().map(|e| (e.seq, &e.payload)),
                self.caught_up,
                self.heartbeats
            );
            match self.next().await {
                Some(Ok(())) => {}
                Some(Err(status)) => {
                    panic!("{}: stream failed waiting for {what}: {status}", self.what)
                }
                None => panic!("{}: stream ended waiting for {what}", self.what),
            }
        }
    }

    async fn turns(&mut self, n: usize) {
        self.until(&format!("{n} turn(s)"), |w| {
            w.caught_up && w.count(|p| matches!(p, pb::event::Payload::TurnEnd(_))) >= n
        })
        .await;
    }
}

async fn subscribe(
    client: &mut SessionServiceClient<Channel>,
    sid: &str,
    after_seq: u64,
) -> Result<tonic::Streaming<pb::SubscribeResponse>, tonic::Status> {
    Ok(client
        .subscribe(routed(
            sid,
            pb::SubscribeRequest {
                session_id: sid.into(),
                after_seq,
                include_deltas: false,
            },
        ))
        .await?
        .into_inner())
}

/// The node ids a balancer sent `sid`'s requests to, from its log, once it
/// has logged `n` of them.
async fn routed_to(c: &Cluster, front: &Front, sid: &str, n: usize) -> Vec<String> {
    let deadline = Instant::now() + PATIENCE;
    let needle = format!("session=\"{sid}\"");
    loop {
        let log = std::fs::read_to_string(&front.log).unwrap_or_default();
        let nodes: Vec<String> = log
            .lines()
            .filter(|l| l.contains(&needle))
            .map(|l| node_of_line(c, l))
            .collect();
        if nodes.len() >= n {
            return nodes;
        }
        assert!(
            Instant::now() < deadline,
            "{}: {} of {n} requests of {sid} logged:\n{log}",
            front.name,
            nodes.len()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The node a log line names: HAProxy's `nodes/nodeN`, nginx's
/// `upstream=ADDR` (the last one tried).
fn node_of_line(c: &Cluster, line: &str) -> String {
    if let Some((_, rest)) = line.split_once("upstream=") {
        // `ADDR, ADDR` when nginx tried more than one.
        let tried = rest.split(" session=").next().unwrap();
        let last = tried.rsplit(',').next().unwrap().trim();
        return c.node_at(last).id.clone();
    }
    if let Some(server) = line
        .split_whitespace()
        .find_map(|w| w.strip_prefix("nodes/"))
    {
        return server.to_owned();
    }
    panic!("no node in log line {line:?}");
}

/// Sends `msg` to `method` of the session service in grpc-web over
/// HTTP/1.1 through `addr`, as a browser does (`extra` headers, each
/// ending in CRLF, added); the connection, for the answer.
async fn grpc_web_call(
    addr: SocketAddr,
    method: &str,
    sid: &str,
    msg: &impl Message,
    extra: &str,
) -> tokio::net::TcpStream {
    let msg = msg.encode_to_vec();
    let mut body = vec![0u8];
    body.extend_from_slice(&(msg.len() as u32).to_be_bytes());
    body.extend_from_slice(&msg);
    let head = format!(
        "POST /agentharness.v1.SessionService/{method} HTTP/1.1\r\nHost: {addr}\r\n\
         Content-Type: application/grpc-web+proto\r\nX-Grpc-Web: 1\r\n{SESSION_HEADER}: {sid}\r\n\
         Content-Length: {}\r\n{extra}\r\n",
        body.len()
    );
    let mut conn = tokio::net::TcpStream::connect(addr).await.expect("connect");
    conn.write_all(head.as_bytes()).await.unwrap();
    conn.write_all(&body).await.unwrap();
    conn
}

/// A unary GetSession in grpc-web over HTTP/1.1, as a browser sends it,
/// answered 200 with `grpc-status: 0`.
async fn grpc_web_get_session(addr: SocketAddr, sid: &str) {
    let msg = pb::GetSessionRequest {
        session_id: sid.into(),
    };
    let mut conn = grpc_web_call(addr, "GetSession", sid, &msg, "Connection: close\r\n").await;
    let mut answer = Vec::new();
    tokio::time::timeout(PATIENCE, conn.read_to_end(&mut answer))
        .await
        .expect("a grpc-web answer")
        .expect("read the grpc-web answer");
    let text = String::from_utf8_lossy(&answer).to_lowercase();
    assert!(
        text.starts_with("http/1.1 200") && text.replace(' ', "").contains("grpc-status:0"),
        "grpc-web GetSession through {addr}:\n{text}"
    );
}

/// A grpc-web Subscribe over HTTP/1.1 through `addr`, as a browser without
/// TLS opens it: the answer keeps coming (heartbeats) for longer than
/// `quiet`, and the stream has not ended by then.
async fn grpc_web_subscribe_stays_open(addr: SocketAddr, sid: &str, quiet: Duration) {
    let msg = pb::SubscribeRequest {
        session_id: sid.into(),
        after_seq: 0,
        include_deltas: false,
    };
    let mut conn = grpc_web_call(addr, "Subscribe", sid, &msg, "").await;
    let since = Instant::now();
    let mut answer = Vec::new();
    let mut buf = vec![0u8; 16 * 1024];
    let mut last_read = since;
    while since.elapsed() < quiet {
        let n = tokio::time::timeout(PATIENCE, conn.read(&mut buf))
            .await
            .expect("grpc-web Subscribe: nothing for a minute")
            .expect("grpc-web Subscribe: read");
        assert!(
            n > 0,
            "grpc-web Subscribe through {addr} ended after {:.1}s:\n{}",
            since.elapsed().as_secs_f64(),
            String::from_utf8_lossy(&answer)
        );
        answer.extend_from_slice(&buf[..n]);
        last_read = Instant::now();
    }
    let text = String::from_utf8_lossy(&answer).to_lowercase();
    assert!(
        text.starts_with("http/1.1 200"),
        "grpc-web Subscribe through {addr}:\n{text}"
    );
    // A trailer frame in the body (`grpc-status:` …) would mean the stream ended.
    let body = text.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    assert!(
        !body.contains("grpc-status:"),
        "grpc-web Subscribe through {addr} ended:\n{text}"
    );
    assert!(last_read - since > PROXY_IDLE_TIMEOUT);
}

/// Through each balancer, in native gRPC and in grpc-web over HTTP/1.1 (on
/// HAProxy the same port), every call of one session reaches one node, and
/// the sessions spread over the nodes.
async fn one_session_one_node_through_each_proxy(c: Arc<Cluster>) {
    for front in c.fronts() {
        let mut client = connect(front.h2).await;
        let sids: Vec<String> = (0..9).map(|_| new_session_id()).collect();
        let mut named: HashMap<String, BTreeSet<String>> = HashMap::new();
        for sid in &sids {
            start(&mut client, sid).await;
            for _ in 0..3 {
                let answer = client
                    .get_session(routed(
                        sid,
                        pb::GetSessionRequest {
                            session_id: sid.clone(),
                        },
                    ))
                    .await
                    .unwrap_or_else(|e| panic!("{}: GetSession {sid}: {e}", front.name));
                // Where a node names itself in its answers, the name must be
                // the one the balancer logged.
                if let Some(node) = answer.metadata().get(NODE_HEADER) {
                    let node = node.to_str().expect("ascii node id").to_owned();
                    named.entry(sid.clone()).or_default().insert(node);
                }
            }
            history(&mut client, sid).await;
            grpc_web_get_session(front.web, sid).await;
        }
        let mut used = BTreeSet::new();
        for sid in &sids {
            let nodes = routed_to(&c, &front, sid, 6).await;
            let distinct: BTreeSet<_> = nodes.iter().collect();
            assert_eq!(distinct.len(), 1, "{}: {sid} went to {nodes:?}", front.name);
            if let Some(named) = named.get(sid) {
                assert_eq!(
                    named,
                    &BTreeSet::from([nodes[0].clone()]),
                    "{}: {sid}",
                    front.name
                );
            }
            used.insert(nodes[0].clone());
        }
        assert!(
            used.len() >= 2,
            "{}: 9 sessions all on {used:?}",
            front.name
        );
        println!(
            "  {}: 9 sessions, each on one node, over {used:?}",
            front.name
        );
    }
}

/// A Subscribe on a node that does not run the session follows it from the
/// shared store while the owner appends: gapless, `caught_up`, and the same
/// events as the owner's History.
async fn subscribe_on_another_node_is_gapless(c: Arc<Cluster>) {
    let (owner, reader) = (&c.nodes[0], &c.nodes[1]);
    let sid = new_session_id();
    let mut on_owner = owner.client().await;
    start(&mut on_owner, &sid).await;
    let mut watch = Watch::open(&mut reader.client().await, &sid, &reader.id).await;
    watch.turns(1).await;
    send(&mut on_owner, &sid).await;
    watch.turns(2).await;
    let logged = history(&mut on_owner, &sid).await;
    let upto = &logged[..watch.events.len()];
    assert_eq!(
        upto,
        &watch.events[..],
        "{} saw other events than the log",
        reader.id
    );
    println!(
        "  {} followed {} events appended on {}",
        reader.id,
        watch.events.len(),
        owner.id
    );
}

/// A Subscribe through each balancer, native and grpc-web over HTTP/1.1,
/// stays open well past the balancer's idle timeout (the nodes' heartbeats
/// keep it busy); the native one then still carries the next turn.
async fn stream_outlives_each_proxy_idle_timeout(c: Arc<Cluster>) {
    assert!(HEARTBEAT < PROXY_IDLE_TIMEOUT);
    let quiet = PROXY_IDLE_TIMEOUT * 2 + HEARTBEAT;
    let runs = c.fronts().map(|front| async move {
        let sid = new_session_id();
        let mut client = connect(front.h2).await;
        start(&mut client, &sid).await;
        let mut watch = Watch::open(&mut client, &sid, front.name).await;
        watch.turns(1).await;
        let since = Instant::now();
        let browser = grpc_web_subscribe_stays_open(front.web, &sid, quiet);
        let native = watch.until("a quiet stretch", |_| since.elapsed() > quiet);
        tokio::join!(browser, native);
        assert!(
            watch.heartbeats >= 2,
            "{}: {} heartbeats",
            front.name,
            watch.heartbeats
        );
        send(&mut client, &sid).await;
        watch.turns(2).await;
        println!(
            "  {}: stream open {:.1}s past a {PROXY_IDLE_TIMEOUT:?} idle timeout",
            front.name,
            since.elapsed().as_secs_f64()
        );
    });
    futures::future::join_all(runs).await;
}

/// ListSessions through each balancer (no session header: each page may go
/// to another node) pages through every session, each once.
async fn list_sessions_through_each_proxy_is_complete(c: Arc<Cluster>) {
    let mut sids = Vec::new();
    for (i, node) in c.nodes.iter().enumerate() {
        let mut client = node.client().await;
        for _ in 0..=i {
            let sid = new_session_id();
            start(&mut client, &sid).await;
            sids.push(sid);
        }
    }
    let everything = list(&mut c.nodes[0].client().await, 1000).await;
    for sid in &sids {
        assert!(
            everything.contains(sid),
            "{} does not list {sid}",
            c.nodes[0].id
        );
    }
    for front in c.fronts() {
        let paged = list(&mut connect(front.h2).await, 2).await;
        assert_eq!(paged, everything, "{}: paged ListSessions", front.name);
        println!("  {}: {} sessions in pages of 2", front.name, paged.len());
    }
}

/// Every session id ListSessions pages through; each at most once.
async fn list(client: &mut SessionServiceClient<Channel>, page_size: u32) -> Vec<String> {
    let mut ids: Vec<String> = Vec::new();
    let mut page_token = String::new();
    loop {
        let page = client
            .list_sessions(pb::ListSessionsRequest {
                page_size,
                page_token,
                ..Default::default()
            })
            .await
            .expect("ListSessions")
            .into_inner();
        for s in page.sessions {
            assert!(
                !ids.contains(&s.session_id),
                "{} listed twice",
                s.session_id
            );
            ids.push(s.session_id);
        }
        if page.next_page_token.is_empty() {
            return ids;
        }
        page_token = page.next_page_token;
    }
}

/// `kill -9` of a node: every stream it served ends, directly and through
/// each balancer; a stream on another node saw a gapless log that History
/// on a live node still has whole; through each balancer the session then
/// answers from a live node.
async fn killed_node_streams_end_and_log_is_intact(c: Arc<Cluster>) {
    let (victim, survivor) = (&c.nodes[2], &c.nodes[0]);
    // Through each balancer, a session the balancer sends to the victim.
    let mut cases = Vec::new();
    for front in c.fronts() {
        let mut client = connect(front.h2).await;
        let sid = loop {
            let sid = new_session_id();
            start(&mut client, &sid).await;
            if routed_to(&c, &front, &sid, 1).await[0] == victim.id {
                break sid;
            }
        };
        let via = Watch::open(
            &mut client,
            &sid,
            &format!("{} to {}", front.name, victim.id),
        )
        .await;
        let direct = Watch::open(&mut victim.client().await, &sid, &victim.id).await;
        let elsewhere = Watch::open(&mut survivor.client().await, &sid, &survivor.id).await;
        cases.push((front, sid, [via, direct], elsewhere));
    }
    for (_, _, watches, elsewhere) in &mut cases {
        for w in watches.iter_mut() {
            w.turns(1).await;
        }
        elsewhere.turns(1).await;
    }
    victim.kill();
    for (front, sid, watches, elsewhere) in &mut cases {
        for w in watches.iter_mut() {
            while let Some(Ok(())) = w.next().await {}
        }
        let logged = history(&mut survivor.client().await, sid).await;
        assert!(logged.len() >= elsewhere.events.len());
        assert_eq!(&logged[..elsewhere.events.len()], &elsewhere.events[..]);
        for (i, e) in logged.iter().enumerate() {
            assert_eq!(
                e.seq,
                i as u64 + 1,
                "History of {sid} after the kill has a gap"
            );
        }
        let head = logged.last().map_or(0, |e| e.seq);
        // The balancer notices the dead node on a failed connection or a
        // failed check; until then a call may fail (retried here, as
        // clients retry).
        let deadline = Instant::now() + PATIENCE;
        let mut errors: HashMap<String, usize> = HashMap::new();
        let (session, answerer) = loop {
            let mut client = connect(front.h2).await;
            let req = routed(
                sid,
                pb::GetSessionRequest {
                    session_id: sid.clone(),
                },
            );
            match client.get_session(req).await {
                Ok(r) => {
                    let node = answered_by(&r);
                    break (r.into_inner().session.expect("a session"), node);
                }
                Err(e) => *errors.entry(format!("{:?}", e.code())).or_default() += 1,
            }
            assert!(Instant::now() < deadline, "{}: {errors:?}", front.name);
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        assert!(session.head_seq >= head, "{}: head went back", front.name);
        // The answer names its node (the balancer's log line of this call
        // may be written a moment after the answer arrives).
        assert_ne!(
            answerer, victim.id,
            "{}: answered by the dead node",
            front.name
        );
        println!(
            "  {}: streams of {} ended, {head} events intact, answered by {answerer} (errors before: {errors:?})",
            front.name, victim.id,
        );
    }
}

/// The node that answered, from its `x-agent-harness-node` header.
fn answered_by<T>(answer: &tonic::Response<T>) -> String {
    answer
        .metadata()
        .get(NODE_HEADER)
        .expect("every answer names its node")
        .to_str()
        .expect("ascii node id")
        .to_owned()
}

/// A Send of `input` to `sid` through `addr`, as it came back.
async fn try_send(
    addr: SocketAddr,
    sid: &str,
    input: &str,
) -> Result<tonic::Response<pb::SendResponse>, tonic::Status> {
    connect(addr)
        .await
        .send(routed(
            sid,
            pb::SendRequest {
                session_id: sid.into(),
                input: input.into(),
                idempotency_key: format!("{input}-{sid}"),
                ..Default::default()
            },
        ))
        .await
}

/// A Send through `addr`, retried (same idempotency key, as clients
/// retry) until a node takes it; the node that did, and the failures seen
/// before, by code.
async fn send_until_answered(
    addr: SocketAddr,
    sid: &str,
    input: &str,
) -> (String, HashMap<String, usize>) {
    let deadline = Instant::now() + PATIENCE;
    let mut errors: HashMap<String, usize> = HashMap::new();
    loop {
        match try_send(addr, sid, input).await {
            Ok(answer) => return (answered_by(&answer), errors),
            Err(e) => {
                let owner = e.metadata().get(OWNER_HEADER).and_then(|v| v.to_str().ok());
                let key = match owner {
                    Some(owner) => format!("{:?} naming {owner}", e.code()),
                    None => format!("{:?}", e.code()),
                };
                *errors.entry(key).or_default() += 1;
            }
        }
        assert!(
            Instant::now() < deadline,
            "Send {sid} through {addr}: {errors:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Asserts `status` is the UNAVAILABLE a non-owner answers a write with,
/// naming `owner` in its message and its `x-agent-harness-owner` trailer.
fn assert_names_owner(status: &tonic::Status, owner: &str, what: &str) {
    assert_eq!(status.code(), tonic::Code::Unavailable, "{what}: {status}");
    assert!(
        status.message().contains(owner),
        "{what}: the message does not name {owner}: {status}"
    );
    let trailer = status
        .metadata()
        .get(OWNER_HEADER)
        .and_then(|v| v.to_str().ok());
    assert_eq!(trailer, Some(owner), "{what}: {status:?}");
}

/// The trailer naming a session's owner on an UNAVAILABLE answer.
const OWNER_HEADER: &str = "x-agent-harness-owner";

/// Waits until `node`'s log, past its first `from` bytes, has a line
/// containing one of `needles`; that line.
async fn log_line(node: &Node, from: usize, needles: &[&str]) -> String {
    log_line_where(node, from, &format!("none of {needles:?}"), |l| {
        needles.iter().any(|n| l.contains(n))
    })
    .await
}

/// Waits until `node`'s log, past its first `from` bytes, has a line
/// `wanted` says yes to (`what` names it); that line.
async fn log_line_where(
    node: &Node,
    from: usize,
    what: &str,
    wanted: impl Fn(&str) -> bool,
) -> String {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let log = std::fs::read(&node.log).unwrap_or_default();
        let text = String::from_utf8_lossy(&log[from.min(log.len())..]).into_owned();
        if let Some(line) = text.lines().find(|l| wanted(l)) {
            return line.to_owned();
        }
        assert!(Instant::now() < deadline, "{}: {what} in its log", node.id);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn log_len(node: &Node) -> usize {
    std::fs::metadata(&node.log).map_or(0, |m| m.len() as usize)
}

fn run_end(e: &pb::Event) -> Option<&pb::RunEnd> {
    match &e.payload {
        Some(pb::event::Payload::RunEnd(r)) => Some(r),
        _ => None,
    }
}

/// The log of a session after a takeover: seqs 1.. without a gap, at most
/// one run_end per run and nothing of a run after its run_end, and `run`
/// ended once, by `SERVER_RESTART`, inferred.
fn assert_one_honest_end(log: &[pb::Event], run: &str, what: &str) {
    let mut ended: BTreeSet<&str> = BTreeSet::new();
    for (i, e) in log.iter().enumerate() {
        assert_eq!(e.seq, i as u64 + 1, "{what}: the log has a gap");
        assert!(
            !ended.contains(e.run_id.as_str()),
            "{what}: seq {} of run {} after its run_end: {:?}",
            e.seq,
            e.run_id,
            e.payload
        );
        if run_end(e).is_some() {
            ended.insert(&e.run_id);
        }
    }
    let ends: Vec<&pb::RunEnd> = log
        .iter()
        .filter(|e| e.run_id == run)
        .filter_map(run_end)
        .collect();
    assert_eq!(ends.len(), 1, "{what}: run_ends of {run}: {ends:?}");
    assert_eq!(
        ends[0].reason,
        pb::RunEndReason::ServerRestart as i32,
        "{what}: {:?}",
        ends[0]
    );
    assert!(ends[0].inferred, "{what}: {:?}", ends[0]);
}

/// Every node killed by an earlier proof runs again.
async fn all_up(c: &Cluster) {
    for node in &c.nodes {
        node.restart().await;
    }
}

/// The milliseconds from `since` to when the store stamped `e`.
fn ms_after(since: std::time::SystemTime, e: &pb::Event) -> i64 {
    let t = e.time.as_ref().expect("an event time");
    let since = since
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    t.seconds * 1000 + i64::from(t.nanos) / 1_000_000 - since
}

/// Through HAProxy every write of a session (Start, Send) is answered by
/// one node, the one its balancer log names; writes (Send, Stop,
/// DeleteSession) sent straight to each other node answer UNAVAILABLE
/// naming the owner, in the message and the `x-agent-harness-owner`
/// trailer, and change nothing.
async fn writes_answered_by_the_owner_only(c: Arc<Cluster>) {
    let front = &c.haproxy;
    let sid = new_session_id();
    let mut client = connect(front.h2).await;
    let config = pb::StartConfig {
        prompt: "first".into(),
        ..Default::default()
    };
    let started = client
        .start(routed(
            &sid,
            pb::StartRequest {
                session_id: sid.clone(),
                config: Some(config),
                idempotency_key: format!("start-{sid}"),
            },
        ))
        .await
        .expect("Start");
    let owner = answered_by(&started);
    let mut watch = Watch::open(&mut client, &sid, "haproxy").await;
    watch.turns(1).await;
    let sent = try_send(front.h2, &sid, "second").await.expect("Send");
    assert_eq!(answered_by(&sent), owner, "Send answered by another node");
    watch.turns(2).await;
    let routed_nodes = routed_to(&c, front, &sid, 2).await;
    assert!(routed_nodes.iter().all(|n| *n == owner), "{routed_nodes:?}");
    let head = watch.events.len();
    for other in c.nodes.iter().filter(|n| n.id != owner) {
        assert_writes_refused(other, &sid, &owner).await;
    }
    let logged = history(&mut client, &sid).await;
    assert_eq!(logged.len(), head, "a refused write appended");
    println!(
        "  {sid}: Start and Send answered by {owner}; Send, Stop and DeleteSession on the others: \
         UNAVAILABLE naming it"
    );
}

/// Send, Stop and DeleteSession of `sid` on `node`, which does not own it:
/// each answered UNAVAILABLE naming `owner`.
async fn assert_writes_refused(node: &Node, sid: &str, owner: &str) {
    let mut client = node.client().await;
    let stop = pb::StopRequest {
        session_id: sid.into(),
        ..Default::default()
    };
    let delete = pb::DeleteSessionRequest {
        session_id: sid.into(),
        ..Default::default()
    };
    let answers = [
        ("Send", try_send(node.addr, sid, "refused").await.map(drop)),
        ("Stop", client.stop(routed(sid, stop)).await.map(drop)),
        (
            "DeleteSession",
            client.delete_session(routed(sid, delete)).await.map(drop),
        ),
    ];
    for (rpc, answer) in answers {
        let what = format!("{rpc} on {}", node.id);
        let status = answer
            .err()
            .unwrap_or_else(|| panic!("{what}, which does not own {sid}: answered"));
        assert_names_owner(&status, owner, &what);
    }
}

/// The counter of writes a node's store refused because the node no
/// longer owned their session.
const FENCED_WRITES: &str = "agent_harness_fenced_writes_total";

/// SIGSTOP of a session's owner while its run is live, past its lease,
/// while another node takes the session over (one
/// `run_end{SERVER_RESTART, inferred}`, a new run); then SIGCONT: the
/// paused node finds itself fenced, and the commit its run makes next (the
/// rest of its turn, or the run_end of the stop that fencing orders) is
/// refused by the store, counted and logged naming the session; the node
/// appends nothing, refuses writes (Send, Stop, DeleteSession) naming
/// the new owner; the log stays contiguous, one run_end per run.
async fn paused_owner_is_fenced_on_sigcont(c: Arc<Cluster>) {
    all_up(&c).await;
    let (paused, taker) = (&c.nodes[0], &c.nodes[1]);
    let sid = new_session_id();
    start(&mut paused.client().await, &sid).await;
    let mut watch = Watch::open(&mut taker.client().await, &sid, &taker.id).await;
    watch
        .until("the run's start", |w| !w.runs().is_empty())
        .await;
    let first_run = watch.runs()[0].clone();
    let mid_turn = watch.count(|p| matches!(p, pb::event::Payload::TurnEnd(_))) == 0;
    // The cassette's process waits for a second message after its first
    // turn: the run is live whenever it is paused, so it commits again
    // after SIGCONT, by then as a stale owner.
    let fenced_before = paused.metric(FENCED_WRITES).await;
    paused.signal(nix::sys::signal::Signal::SIGSTOP);
    let paused_at = Instant::now();
    let from = log_len(paused);
    assert!(
        !watch
            .events
            .iter()
            .any(|e| e.run_id == first_run && run_end(e).is_some()),
        "the run ended before its node was paused"
    );
    // Refused while the paused node's lease lives, then claimed.
    let (by, errors) = send_until_answered(taker.addr, &sid, "second").await;
    assert_eq!(by, taker.id);
    assert!(
        paused_at.elapsed() + Duration::from_millis(100) >= NODE_LEASE / 2,
        "claimed {:?} into a {NODE_LEASE:?} lease",
        paused_at.elapsed()
    );
    watch
        .until("the takeover's new run", |w| w.runs().len() >= 2)
        .await;
    let head = watch.events.len();
    paused.signal(nix::sys::signal::Signal::SIGCONT);
    // The lease task finds the lease lost and stops every run; the run's
    // late commit reaches the store and is refused whole.
    log_line(paused, from, &["node lease lost: fencing"]).await;
    log_line(paused, from, &["rejoined"]).await;
    // The node's other sessions (other proofs') may be refused in other
    // lines: the one naming this session.
    log_line_where(paused, from, &format!("no refusal naming {sid}"), |l| {
        l.contains("fenced: this node no longer owns") && l.contains(&sid)
    })
    .await;
    let deadline = Instant::now() + PATIENCE;
    let fenced_after = loop {
        let n = paused.metric(FENCED_WRITES).await;
        if n > fenced_before {
            break n;
        }
        assert!(
            Instant::now() < deadline,
            "{}: {FENCED_WRITES} stayed at {n}",
            paused.id
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_writes_refused(paused, &sid, &taker.id).await;
    // Whatever the paused node had not committed stays out of the log.
    watch.turns(1).await;
    let logged = history(&mut taker.client().await, &sid).await;
    assert_one_honest_end(&logged, &first_run, &sid);
    let late: Vec<_> = logged[head.min(logged.len())..]
        .iter()
        .filter(|e| e.run_id == first_run)
        .collect();
    assert!(late.is_empty(), "late events of the paused run: {late:?}");
    println!(
        "  {} paused {} past its lease; {} took over after {errors:?}; on SIGCONT it fenced itself \
         (every run stopped, writes refused) and rejoined; the store refused {} late write(s) of it",
        paused.id,
        if mid_turn {
            "mid-turn"
        } else {
            "after the turn"
        },
        taker.id,
        fenced_after - fenced_before,
    );
}

/// `kill -9` of a session's owner mid-turn (cassette adapter): a client
/// subscribed through HAProxy sees its stream end, subscribes again from
/// its last seq and misses nothing, sees nothing twice; the killed run gets
/// exactly one `run_end{SERVER_RESTART, inferred}`; the next Send through
/// HAProxy is answered by another node, which starts a new run. Prints the
/// takeover time.
async fn kill_owner_mid_turn_takeover(c: Arc<Cluster>) {
    all_up(&c).await;
    let front = &c.haproxy;
    let sid = new_session_id();
    let mut client = connect(front.h2).await;
    start(&mut client, &sid).await;
    let mut watch = Watch::open(&mut client, &sid, "haproxy").await;
    watch
        .until("the run's start", |w| !w.runs().is_empty())
        .await;
    let owner = routed_to(&c, front, &sid, 1).await[0].clone();
    let victim = c.nodes.iter().find(|n| n.id == owner).unwrap();
    let mid_turn = watch.count(|p| matches!(p, pb::event::Payload::TurnEnd(_))) == 0;
    let killed_at = std::time::SystemTime::now();
    victim.kill();
    let first_run = watch.runs()[0].clone();
    watch.drain().await;
    let seen = watch.events.len();
    let (by, errors) = send_until_answered(front.h2, &sid, "second").await;
    assert_ne!(by, victim.id, "the Send answered by the dead node");
    let resubscribe_failures = watch.resume(front.h2, &sid).await;
    watch
        .until("the killed run's end and a new run", |w| {
            w.runs().len() >= 2
                && w.events
                    .iter()
                    .any(|e| e.run_id == w.runs()[0] && run_end(e).is_some())
        })
        .await;
    let logged = history(&mut client, &sid).await;
    assert_eq!(&logged[..watch.events.len()], &watch.events[..]);
    assert_one_honest_end(&logged, &first_run, &sid);
    let end = logged
        .iter()
        .find(|e| e.run_id == first_run && run_end(e).is_some())
        .unwrap();
    let new_run = logged
        .iter()
        .find(|e| e.run_id != first_run && !e.run_id.is_empty())
        .unwrap();
    println!(
        "  takeover: kill -9 of {} ({}) -> run_end {} ms, -> first event of the new run on {by} {} ms; \
         the client saw its stream end after {seen} events, {resubscribe_failures} failed re-Subscribes, Send failures {errors:?}",
        victim.id,
        if mid_turn {
            "mid-turn"
        } else {
            "after the turn"
        },
        ms_after(killed_at, end),
        ms_after(killed_at, new_run),
    );
    assert!(mid_turn, "the kill came after the turn ended");
}

/// A node killed while it owned a session and then started again does not
/// take the session back. The session starts through nginx, so nginx's
/// hash names the node that dies; once the node is back, through HAProxy
/// the session's writes reach its new owner (the stick table remembers
/// where it went after the death, over the hash), and through nginx, whose
/// hash sends them to the returned node again (nginx open source has no
/// stick table), they answer UNAVAILABLE naming the new owner.
async fn returning_node_does_not_pull_sessions_back(c: Arc<Cluster>) {
    all_up(&c).await;
    let sid = new_session_id();
    let (owner, _) = start_until_answered(c.nginx.h2, &sid).await;
    let mut watch = Watch::open(&mut connect(c.nginx.h2).await, &sid, "nginx").await;
    watch.turns(1).await;
    let returning = c.nodes.iter().find(|n| n.id == owner).unwrap();
    returning.kill();
    watch.drain().await;
    let (new_owner, _) = send_until_answered(c.haproxy.h2, &sid, "second").await;
    assert_ne!(new_owner, returning.id);
    returning.restart().await;
    // HAProxy routes to the returned node again once its checks pass: a
    // fresh session lands on it.
    let deadline = Instant::now() + PATIENCE;
    loop {
        let (by, _) = start_until_answered(c.haproxy.h2, &new_session_id()).await;
        if by == returning.id {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "HAProxy never routes to {} again",
            returning.id
        );
    }
    let (by, errors) = send_until_answered(c.haproxy.h2, &sid, "third").await;
    assert_eq!(by, new_owner, "through HAProxy: {errors:?}");
    // nginx goes back to the returned node once its fail_timeout is over;
    // until then its hash falls through to another node. Every answer
    // either comes from the new owner or names it.
    let deadline = Instant::now() + PATIENCE;
    let mut answers: Vec<String> = Vec::new();
    loop {
        let before = nginx_requests(&c, &sid).len();
        let answer = match try_send(c.nginx.h2, &sid, "fourth").await {
            Ok(answer) => {
                assert_eq!(answered_by(&answer), new_owner, "through nginx");
                format!("answered by {new_owner}")
            }
            Err(status) => {
                assert_names_owner(&status, &new_owner, "through nginx");
                format!("UNAVAILABLE naming {new_owner}")
            }
        };
        let went_to = routed_to(&c, &c.nginx, &sid, before + 1).await;
        let went_to = went_to.last().unwrap().clone();
        answers.push(format!("{went_to}: {answer}"));
        if went_to == returning.id {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "nginx never routes {sid} to {} again: {answers:?}",
            returning.id
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let refused = try_send(returning.addr, &sid, "fifth")
        .await
        .expect_err("a write on the returned node");
    assert_names_owner(&refused, &new_owner, &format!("Send to {}", returning.id));
    println!(
        "  {} returned; {sid} stays on {new_owner}: through HAProxy answered by it; through nginx {answers:?}",
        returning.id
    );
}

/// The nodes nginx has logged requests of `sid` going to, so far.
fn nginx_requests(c: &Cluster, sid: &str) -> Vec<String> {
    let needle = format!("session=\"{sid}\"");
    std::fs::read_to_string(&c.nginx.log)
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains(&needle))
        .map(|l| node_of_line(c, l))
        .collect()
}

/// A Start of `sid` through `addr`, retried until a node takes it; the
/// node that did, and how many tries failed first.
async fn start_until_answered(addr: SocketAddr, sid: &str) -> (String, usize) {
    let deadline = Instant::now() + PATIENCE;
    let mut failures = 0;
    loop {
        let config = pb::StartConfig {
            prompt: "first".into(),
            ..Default::default()
        };
        let answer = connect(addr)
            .await
            .start(routed(
                sid,
                pb::StartRequest {
                    session_id: sid.into(),
                    config: Some(config),
                    idempotency_key: format!("start-{sid}"),
                },
            ))
            .await;
        match answer {
            Ok(answer) => return (answered_by(&answer), failures),
            Err(e) => {
                failures += 1;
                assert!(Instant::now() < deadline, "Start {sid}: {e}");
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
