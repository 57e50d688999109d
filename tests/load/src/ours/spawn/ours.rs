//! One round through our server: Start (or Send) to the event on a
//! Subscribe stream opened and caught up before it.

use super::*;

/// One round through the server.
pub(super) struct OursSample {
    pub(super) start_ready: Duration,
    pub(super) send_content: Duration,
    pub(super) start_to_run_start: f64,
    pub(super) run_start_to_run_ready: f64,
    pub(super) run_ready_to_client: f64,
    pub(super) send_to_input_sent: f64,
    pub(super) content_to_client: f64,
    pub(super) boot: Sched,
    pub(super) turn: Sched,
}

/// Subscribe (caught up), Start `TEXT ready <tag>` and time its run_ready;
/// finish the turn, Send `TEXT again <tag>` and time its first content;
/// finish that turn, then end the process (SIGTERM) and see its run_end.
pub(super) async fn ours_round(
    client: &SessionServiceClient<Channel>,
    session: &str,
    work: &Path,
    tag: &str,
    pause: Duration,
) -> OursSample {
    let mut sub = Sub::open(client.clone(), session).await;
    let mut rpc = client.clone();

    // Start → run_ready.
    let request = pb::StartRequest {
        idempotency_key: String::new(),
        session_id: session.into(),
        config: Some(pb::StartConfig {
            prompt: format!("TEXT ready {tag}"),
            cwd: work.display().to_string(),
            ..Default::default()
        }),
    };
    let (t0, w0) = (Instant::now(), wall_ms());
    let (started, (ready, ready_at, ready_wall)) = tokio::join!(
        tokio::time::timeout(WAIT, rpc.start(request)),
        sub.until("run_ready", |p| matches!(p, Payload::RunReady(_))),
    );
    let started = match started {
        Ok(Ok(r)) => r.into_inner(),
        Ok(Err(status)) => panic!("{session}: Start failed: {status:?}"),
        Err(_) => panic!("{session}: no Start response within {WAIT:?}"),
    };
    let run = started.run_id.clone();
    let Some(Payload::RunReady(r)) = &ready.payload else {
        unreachable!()
    };
    assert!(
        ready.run_id == run && started.process_id == format!("pid:{}", r.pid),
        "{session}: run_ready of run {} pid {} but Start answered run {run} process {}",
        ready.run_id,
        r.pid,
        started.process_id
    );
    let pid = r.pid;
    let boot = Sched::of(pid);
    let run_start =
        sub.find(|e| e.run_id == run && matches!(e.payload, Some(Payload::RunStart(_))));
    let start_ready = ready_at - t0;

    let turn1 = sub.turn_end(&run, ready.seq).await;
    sub.expect_text(ready.seq, turn1, &format!("ready {tag}"));

    // Send → first content.
    tokio::time::sleep(pause).await;
    let before = Sched::of(pid);
    let request = pb::SendRequest {
        idempotency_key: String::new(),
        session_id: session.into(),
        input: format!("TEXT again {tag}"),
        content_blocks: vec![],
    };
    let (t1, w1) = (Instant::now(), wall_ms());
    let (sent, (content, content_at, content_wall)) = tokio::join!(
        tokio::time::timeout(WAIT, rpc.send(request)),
        sub.until("content", |p| matches!(p, Payload::Content(_))),
    );
    expect_sent_to(sent, &run, session);
    assert_eq!(
        content.run_id, run,
        "{session}: the content after Send is not the live run's"
    );
    let send_content = content_at - t1;
    let turn = Sched::of(pid).since(before);
    let input_sent = sub.find(|e| {
        e.seq > turn1
            && matches!(&e.payload, Some(Payload::InputSent(i)) if i.source() == pb::InputSource::User)
    });
    let turn2 = sub.turn_end(&run, turn1).await;
    sub.expect_text(turn1, turn2, &format!("again {tag}"));

    // End the keep-alive process (Stop leaves an idle one alive).
    end_pid(pid);
    sub.until("run_end", |p| matches!(p, Payload::RunEnd(_)))
        .await;

    OursSample {
        start_ready,
        send_content,
        start_to_run_start: event_ms(&run_start) - w0,
        run_start_to_run_ready: event_ms(&ready) - event_ms(&run_start),
        run_ready_to_client: ready_wall - event_ms(&ready),
        send_to_input_sent: event_ms(&input_sent) - w1,
        content_to_client: content_wall - event_ms(&content),
        boot,
        turn,
    }
}

pub(super) fn end_pid(pid: u32) {
    use nix::sys::signal::{Signal, kill};
    use nix::unistd::Pid;
    kill(Pid::from_raw(pid as i32), Signal::SIGTERM)
        .unwrap_or_else(|e| panic!("SIGTERM the CLI (pid {pid}): {e}"));
}

/// One Subscribe stream and what it delivered.
pub(super) struct Sub {
    pub(super) session: String,
    pub(super) stream: tonic::Streaming<pb::SubscribeResponse>,
    pub(super) events: Vec<pb::Event>,
}

impl Sub {
    /// Subscribes from seq 0 and reads up to `caught_up`.
    pub(super) async fn open(mut client: SessionServiceClient<Channel>, session: &str) -> Self {
        let request = pb::SubscribeRequest {
            session_id: session.into(),
            after_seq: 0,
            include_deltas: false,
        };
        let stream = match tokio::time::timeout(WAIT, client.subscribe(request)).await {
            Ok(Ok(r)) => r.into_inner(),
            Ok(Err(status)) => panic!("{session}: Subscribe failed: {status:?}"),
            Err(_) => panic!("{session}: no Subscribe response within {WAIT:?}"),
        };
        let mut sub = Self {
            session: session.into(),
            stream,
            events: Vec::new(),
        };
        loop {
            match sub.message("caught_up").await {
                Kind::CaughtUp(_) => return sub,
                Kind::Event(e) => panic!("{session} should be new; its replay holds {e:?}"),
                Kind::Replay(_) | Kind::Heartbeat(_) | Kind::Delta(_) => {}
            }
        }
    }

    pub(super) async fn message(&mut self, what: &str) -> Kind {
        let session = &self.session;
        match tokio::time::timeout(WAIT, self.stream.message()).await {
            Ok(Ok(Some(m))) => m
                .kind
                .unwrap_or_else(|| panic!("{session}: a SubscribeResponse without a kind")),
            Ok(Ok(None)) => panic!(
                "{session}: the stream ended before {what}; events: {}",
                self.describe()
            ),
            Ok(Err(status)) => panic!("{session}: the stream failed before {what}: {status:?}"),
            Err(_) => panic!(
                "{session}: no {what} within {WAIT:?}; events: {}",
                self.describe()
            ),
        }
    }

    /// Reads to the first event matching `pred`: it, when it arrived, and
    /// the wall clock then (ms). Panics on a run_end or run_error first.
    pub(super) async fn until(
        &mut self,
        what: &str,
        pred: impl Fn(&Payload) -> bool,
    ) -> (pb::Event, Instant, f64) {
        loop {
            let kind = self.message(what).await;
            let (at, wall) = (Instant::now(), wall_ms());
            let Kind::Event(e) = kind else { continue };
            assert_eq!(
                e.session_id, self.session,
                "an event of another session on {}'s stream",
                self.session
            );
            self.events.push(e.clone());
            let payload = e
                .payload
                .as_ref()
                .unwrap_or_else(|| panic!("event {} without a payload", e.seq));
            if pred(payload) {
                return (e, at, wall);
            }
            if matches!(payload, Payload::RunEnd(_) | Payload::RunError(_)) {
                panic!(
                    "{}: {} before {what}; events: {}",
                    self.session,
                    kind_name(payload),
                    self.describe()
                );
            }
        }
    }

    /// The seq of the run's next non-compact turn_end after `after`, which
    /// must not be an error.
    pub(super) async fn turn_end(&mut self, run: &str, after: u64) -> u64 {
        loop {
            let (e, _, _) = self
                .until(
                    "turn_end",
                    |p| matches!(p, Payload::TurnEnd(t) if !t.compact),
                )
                .await;
            if e.seq <= after {
                continue;
            }
            let Some(Payload::TurnEnd(t)) = &e.payload else {
                unreachable!()
            };
            assert!(
                e.run_id == run && !t.is_error,
                "{}: turn_end of run {} (expected {run}), is_error {}; events: {}",
                self.session,
                e.run_id,
                t.is_error,
                self.describe()
            );
            return e.seq;
        }
    }

    /// The text of the content events in `(after, to)` is `expected`.
    pub(super) fn expect_text(&self, after: u64, to: u64, expected: &str) {
        let text: String = self
            .events
            .iter()
            .filter(|e| e.seq > after && e.seq < to)
            .filter_map(|e| match &e.payload {
                Some(Payload::Content(c)) => Some(c),
                _ => None,
            })
            .flat_map(|c| c.blocks.iter())
            .filter(|b| b.r#type == "text")
            .map(|b| b.text.as_str())
            .collect();
        assert_eq!(
            text,
            expected,
            "{}: the fake model's reply in seq {after}..{to}; events: {}",
            self.session,
            self.describe()
        );
    }

    /// The first event seen matching `pred`.
    pub(super) fn find(&self, pred: impl Fn(&pb::Event) -> bool) -> pb::Event {
        self.events
            .iter()
            .find(|e| pred(e))
            .cloned()
            .unwrap_or_else(|| {
                panic!(
                    "{}: an expected event is missing: {}",
                    self.session,
                    self.describe()
                )
            })
    }

    pub(super) fn describe(&self) -> String {
        self.events
            .iter()
            .map(|e| {
                let kind = e.payload.as_ref().map(kind_name).unwrap_or("none");
                format!("{}:{kind}", e.seq)
            })
            .collect::<Vec<_>>()
            .join(" ")
    }
}

pub(super) fn kind_name(p: &Payload) -> &'static str {
    match p {
        Payload::RunStart(_) => "run_start",
        Payload::RunReady(_) => "run_ready",
        Payload::RunEnd(_) => "run_end",
        Payload::RunError(_) => "run_error",
        Payload::StopRequested(_) => "stop_requested",
        Payload::Content(_) => "content",
        Payload::Result(_) => "result",
        Payload::TurnEnd(_) => "turn_end",
        Payload::InputSent(_) => "input_sent",
        _ => "other",
    }
}

/// Panics unless a Send answered within [`WAIT`] and went to the live run
/// `run`.
pub(super) fn expect_sent_to(
    sent: Result<
        Result<tonic::Response<pb::SendResponse>, tonic::Status>,
        tokio::time::error::Elapsed,
    >,
    run: &str,
    session: &str,
) {
    match sent {
        Ok(Ok(r)) if r.get_ref().run_id == run => {}
        Ok(Ok(r)) => panic!(
            "{session}: Send went to run {} instead of the live run {run}",
            r.get_ref().run_id
        ),
        Ok(Err(status)) => panic!("{session}: Send failed: {status:?}"),
        Err(_) => panic!("{session}: no Send response within {WAIT:?}"),
    }
}
