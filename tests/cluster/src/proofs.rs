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

use crate::cluster::{Cluster, Front, HEARTBEAT, PATIENCE, PROXY_IDLE_TIMEOUT, connect};

pub type Proof = fn(Arc<Cluster>) -> BoxFuture<'static, ()>;

/// Every proof, by name (`agent-harness-cluster NAME…` runs those whose
/// name contains one of the arguments).
pub const ALL: &[(&str, Proof)] = &[
    ("one_session_one_node_through_each_proxy", |c| {
        Box::pin(one_session_one_node_through_each_proxy(c))
    }),
    ("subscribe_on_another_node_is_gapless", |c| {
        Box::pin(subscribe_on_another_node_is_gapless(c))
    }),
    ("stream_outlives_each_proxy_idle_timeout", |c| {
        Box::pin(stream_outlives_each_proxy_idle_timeout(c))
    }),
    ("list_sessions_through_each_proxy_is_complete", |c| {
        Box::pin(list_sessions_through_each_proxy_is_complete(c))
    }),
    ("killed_node_streams_end_and_log_is_intact", |c| {
        Box::pin(killed_node_streams_end_and_log_is_intact(c))
    }),
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
        let stream = client
            .subscribe(routed(
                sid,
                pb::SubscribeRequest {
                    session_id: sid.into(),
                    after_seq: 0,
                    include_deltas: false,
                },
            ))
            .await
            .unwrap_or_else(|e| panic!("{what}: Subscribe {sid}: {e}"))
            .into_inner();
        Self {
            what: what.into(),
            stream,
            events: Vec::new(),
            caught_up: false,
            heartbeats: 0,
        }
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

/// A unary GetSession in grpc-web over HTTP/1.1, as a browser sends it,
/// answered 200 with `grpc-status: 0`.
async fn grpc_web_get_session(addr: SocketAddr, sid: &str) {
    let msg = pb::GetSessionRequest {
        session_id: sid.into(),
    }
    .encode_to_vec();
    let mut body = vec![0u8];
    body.extend_from_slice(&(msg.len() as u32).to_be_bytes());
    body.extend_from_slice(&msg);
    let head = format!(
        "POST /agentharness.v1.SessionService/GetSession HTTP/1.1\r\nHost: {addr}\r\n\
         Content-Type: application/grpc-web+proto\r\nX-Grpc-Web: 1\r\n{SESSION_HEADER}: {sid}\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    let mut conn = tokio::net::TcpStream::connect(addr).await.expect("connect");
    conn.write_all(head.as_bytes()).await.unwrap();
    conn.write_all(&body).await.unwrap();
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
    }
    .encode_to_vec();
    let mut body = vec![0u8];
    body.extend_from_slice(&(msg.len() as u32).to_be_bytes());
    body.extend_from_slice(&msg);
    let head = format!(
        "POST /agentharness.v1.SessionService/Subscribe HTTP/1.1\r\nHost: {addr}\r\n\
         Content-Type: application/grpc-web+proto\r\nX-Grpc-Web: 1\r\n{SESSION_HEADER}: {sid}\r\n\
         Content-Length: {}\r\n\r\n",
        body.len()
    );
    let mut conn = tokio::net::TcpStream::connect(addr).await.expect("connect");
    conn.write_all(head.as_bytes()).await.unwrap();
    conn.write_all(&body).await.unwrap();
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
        let session = loop {
            let mut client = connect(front.h2).await;
            let req = routed(
                sid,
                pb::GetSessionRequest {
                    session_id: sid.clone(),
                },
            );
            match client.get_session(req).await {
                Ok(r) => break r.into_inner().session.expect("a session"),
                Err(e) => *errors.entry(format!("{:?}", e.code())).or_default() += 1,
            }
            assert!(Instant::now() < deadline, "{}: {errors:?}", front.name);
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        assert!(session.head_seq >= head, "{}: head went back", front.name);
        let after = routed_to(&c, front, sid, 2).await;
        assert_ne!(
            after.last(),
            Some(&victim.id),
            "{}: answered by the dead node",
            front.name
        );
        println!(
            "  {}: streams of {} ended, {head} events intact, answered by {} (errors before: {errors:?})",
            front.name,
            victim.id,
            after.last().unwrap()
        );
    }
}
