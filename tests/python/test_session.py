"""SessionService end to end through the generated Python client: Start, Subscribe from 0 and
from a cursor, Send, Stop, History paging and GetSession, against the real server binary and
the real claude CLI (scripted by the fake Messages API)."""

from __future__ import annotations

import queue
import threading
import time
import uuid

import grpc
import pytest

from agentharness.v1 import events_pb2
from agentharness.v1 import session_service_pb2 as pb

TURN_TIMEOUT = 60.0  # CLI boot plus a few fake API round trips
IDLE = pb.SESSION_STATUS_IDLE
STARTING = pb.SESSION_STATUS_STARTING
STREAMING = pb.SESSION_STATUS_STREAMING
STOPPING = pb.SESSION_STATUS_STOPPING


def new_id(prefix: str) -> str:
    return f"py-{prefix}-{uuid.uuid4().hex[:12]}"


def kind(ev: events_pb2.Event) -> str:
    return ev.WhichOneof("payload") or "<none>"


def content_text(ev: events_pb2.Event) -> str:
    return "".join(b.text for b in ev.content.blocks)


class Stream:
    """One Subscribe call read by a thread. Every message is checked as it is read: replay
    first, events in strictly increasing seq without gap or duplicate from replay.from_seq+1,
    caught_up exactly once with head_seq = the last seq replayed; deltas only when asked for
    (include_deltas), only after caught_up, each with after_seq = the last event seq received
    before it."""

    def __init__(self, stub, session_id: str, after_seq: int, include_deltas: bool = False):
        self._call = stub.Subscribe(
            pb.SubscribeRequest(session_id=session_id, after_seq=after_seq, include_deltas=include_deltas)
        )
        self._q: queue.Queue = queue.Queue()
        self.replay = None
        self.caught_up = None
        self.events: list[events_pb2.Event] = []
        self.include_deltas = include_deltas
        # Each delta received, as (delta, events received before it, messages other than
        # heartbeats between caught_up and it).
        self.deltas: list[tuple[pb.Delta, int, int]] = []
        self._since_caught_up = 0
        threading.Thread(target=self._pump, daemon=True).start()
        first = self.recv(20)
        assert first.WhichOneof("kind") == "replay", f"first Subscribe message: {first}"
        self.replay = first.replay
        self.last_seq = first.replay.from_seq

    def _pump(self):
        try:
            for msg in self._call:
                self._q.put(msg)
        except grpc.RpcError as e:
            self._q.put(e)

    def close(self):
        self._call.cancel()

    def recv(self, timeout: float):
        try:
            msg = self._q.get(timeout=max(timeout, 0.01))
        except queue.Empty:
            pytest.fail(f"no Subscribe message within {timeout:.1f} s (last seq {getattr(self, 'last_seq', None)})")
        if isinstance(msg, grpc.RpcError):
            pytest.fail(f"Subscribe stream ended: {msg.code()} {msg.details()}")
        self._check(msg)
        return msg

    def _check(self, msg):
        k = msg.WhichOneof("kind")
        if self.caught_up is not None and k != "heartbeat":
            self._since_caught_up += 1
        if k == "replay":
            assert self.replay is None, f"second replay header: {msg.replay}"
        elif k == "event":
            ev = msg.event
            assert ev.seq == self.last_seq + 1, f"event seq {ev.seq} after {self.last_seq}: gap or duplicate ({kind(ev)})"
            self.last_seq = ev.seq
            self.events.append(ev)
        elif k == "caught_up":
            assert self.caught_up is None, "second caught_up"
            assert msg.caught_up.head_seq == self.last_seq, (
                f"caught_up.head_seq {msg.caught_up.head_seq}, last replayed seq {self.last_seq}"
            )
            self.caught_up = msg.caught_up
        elif k == "delta":
            d = msg.delta
            assert self.include_deltas, f"delta on a stream without include_deltas: {d}"
            assert self.caught_up is not None, f"delta before caught_up: {d}"
            assert d.after_seq == self.last_seq, (
                f"delta after_seq {d.after_seq}, last event received {self.last_seq}: {d}"
            )
            self.deltas.append((d, len(self.events), self._since_caught_up - 1))
        elif k != "heartbeat":
            pytest.fail(f"Subscribe message with no kind: {msg}")

    def expect_no_event(self, seconds: float, after: str):
        """Fails if an event arrives within `seconds` (heartbeats are allowed): proves that a
        call appended nothing, whatever GetSession says."""
        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0:
            try:
                msg = self._q.get(timeout=left)
            except queue.Empty:
                return
            if isinstance(msg, grpc.RpcError):
                pytest.fail(f"Subscribe stream ended: {msg.code()} {msg.details()}")
            self._check(msg)
            if msg.WhichOneof("kind") == "event":
                pytest.fail(f"event {msg.event.seq}:{kind(msg.event)} appended after {after}; want none")

    def until_caught_up(self, timeout: float = 10):
        deadline = time.monotonic() + timeout
        while self.caught_up is None:
            self.recv(deadline - time.monotonic())

    def wait_event(self, pred, what: str, start: int = 0, timeout: float = TURN_TIMEOUT):
        """Reads until an event at index >= start matches pred; returns (event, index)."""
        deadline = time.monotonic() + timeout
        i = start
        while True:
            while i >= len(self.events):
                if time.monotonic() > deadline:
                    pytest.fail(f"no {what} event within {timeout} s; events: {self.summary()}")
                self.recv(deadline - time.monotonic())
            if pred(self.events[i]):
                return self.events[i], i
            i += 1

    def summary(self) -> str:
        return " ".join(f"{e.seq}:{kind(e)}" for e in self.events)


def is_kind(*names: str):
    return lambda ev: kind(ev) in names


@pytest.fixture
def streams():
    opened: list[Stream] = []
    yield opened
    for s in opened:
        s.close()


def subscribe(h, streams, session_id: str, after_seq: int, include_deltas: bool = False) -> Stream:
    s = Stream(h.stub, session_id, after_seq, include_deltas)
    streams.append(s)
    return s


def get_session(h, session_id: str) -> pb.Session:
    return h.stub.GetSession(pb.GetSessionRequest(session_id=session_id), timeout=10).session


def wait_status(h, session_id: str, want: int, timeout: float = 10) -> pb.Session:
    deadline = time.monotonic() + timeout
    while True:
        s = get_session(h, session_id)
        if s.status == want:
            return s
        if time.monotonic() > deadline:
            pytest.fail(
                f"{session_id} status {pb.SessionStatus.Name(s.status)}, "
                f"want {pb.SessionStatus.Name(want)} after {timeout} s"
            )
        time.sleep(0.05)


def start(h, session_id: str, prompt: str) -> pb.StartResponse:
    resp = h.stub.Start(
        pb.StartRequest(session_id=session_id, config=events_pb2.StartConfig(prompt=prompt, cwd=h.work_dir)),
        timeout=30,
    )
    assert resp.run_id, "Start returned an empty run_id"
    return resp


def send(h, session_id: str, text: str) -> pb.SendResponse:
    return h.stub.Send(pb.SendRequest(session_id=session_id, input=text), timeout=30)


def idle_stop(h, s: Stream, session_id: str, what: str) -> pb.Session:
    """Calls Stop when no turn is in progress (after s has read the whole log) and checks that
    it does nothing: stopping=false, no event appended (head_seq unchanged, nothing on the
    stream), process_alive unchanged. Returns the session afterwards."""
    before = get_session(h, session_id)
    while s.last_seq < before.head_seq:
        s.recv(5)
    assert before.status == IDLE, f"{what}: session not idle before Stop: {before}"
    assert not h.stub.Stop(pb.StopRequest(session_id=session_id), timeout=10).stopping, (
        f"{what}: Stop with no turn in progress answered stopping=true"
    )
    # Anything Stop appended would be durable before it answered; the wait also gives a
    # wrongly stopped process the time to end and show up as run_end.
    s.expect_no_event(1.0, what)
    after = get_session(h, session_id)
    assert (after.head_seq, after.status, after.process_alive, after.run_id) == (
        before.head_seq, IDLE, before.process_alive, before.run_id,
    ), f"{what} changed the session:\nbefore {before}\nafter {after}"
    return after


def test_session_lifecycle(harness, streams):
    h = harness
    sid = new_id("life")

    # Subscribing before the session exists is valid: an empty replay, then live.
    s = subscribe(h, streams, sid, 0)
    assert (s.replay.from_seq, s.replay.head_seq, s.replay.reset) == (0, 0, False)
    s.until_caught_up()

    st = start(h, sid, "TEXT py turn one")
    # run_start is durable before Start returns; the CLI has not announced itself yet.
    assert get_session(h, sid).status in (STARTING, STREAMING)

    end1, i1 = s.wait_event(is_kind("turn_end"), "first turn_end")
    assert (s.events[0].seq, kind(s.events[0])) == (1, "run_start")
    assert s.events[0].run_start.config.prompt == "TEXT py turn one"
    ready, _ = s.wait_event(is_kind("run_ready"), "run_ready", timeout=0)
    assert ready.run_ready.resume_id
    in1, _ = s.wait_event(is_kind("input_sent"), "input_sent", timeout=0)
    assert in1.input_sent.text == "TEXT py turn one"
    assert in1.input_sent.source == events_pb2.INPUT_SOURCE_INITIAL
    c1, _ = s.wait_event(is_kind("content"), "content", timeout=0)
    assert content_text(c1) == "py turn one"
    assert not end1.turn_end.is_error, end1.turn_end
    for ev in s.events:
        assert (ev.run_id, ev.session_id) == (st.run_id, sid), f"{ev.seq}:{kind(ev)}"
        assert ev.HasField("time") and ev.time.seconds > 0
    idle = wait_status(h, sid, IDLE)
    assert idle.process_alive, "interactive process not alive between turns"
    assert idle.resume_id == ready.run_ready.resume_id
    assert idle.run_id == st.run_id

    # A follow-up goes to the live process: same run.
    assert send(h, sid, "TEXT py turn two").run_id == st.run_id
    in2, j = s.wait_event(is_kind("input_sent"), "second input_sent", start=i1 + 1)
    assert in2.input_sent.source == events_pb2.INPUT_SOURCE_USER
    c2, _ = s.wait_event(is_kind("content"), "second content", start=j)
    assert content_text(c2) == "py turn two"
    _, i2 = s.wait_event(is_kind("turn_end"), "second turn_end", start=j)
    wait_status(h, sid, IDLE)

    # A slow turn (40 chunks 250 ms apart) is STREAMING until Stop ends it.
    send(h, sid, "SLOW 40 250")
    _, j = s.wait_event(is_kind("input_sent"), "slow input_sent", start=i2 + 1)
    wait_status(h, sid, STREAMING)
    assert h.stub.Stop(pb.StopRequest(session_id=sid), timeout=10).stopping
    assert get_session(h, sid).status in (STOPPING, IDLE)
    sreq, j = s.wait_event(is_kind("stop_requested"), "stop_requested", start=j, timeout=10)
    assert sreq.stop_requested.source == "user", sreq
    _, j = s.wait_event(is_kind("turn_end"), "turn_end after Stop", start=j, timeout=30)
    # The interrupt ends the turn, not the process.
    assert wait_status(h, sid, IDLE, timeout=30).process_alive, "process did not survive the interrupt"

    # Stop with no turn in progress does nothing: the keep-alive process is left alive (it ends
    # only at --idle-timeout or shutdown), and a second Stop equals the first.
    assert idle_stop(h, s, sid, "Stop of an idle live process").process_alive
    idle_stop(h, s, sid, "a repeated Stop of an idle live process")

    # The process still takes the next turn: same run.
    assert send(h, sid, "TEXT py after idle stop").run_id == st.run_id
    c3, j = s.wait_event(is_kind("content"), "content after the idle Stop", start=j + 1)
    assert content_text(c3) == "py after idle stop"
    s.wait_event(is_kind("turn_end"), "turn_end after the idle Stop", start=j)
    assert wait_status(h, sid, IDLE).run_id == st.run_id
    assert not [e.seq for e in s.events if kind(e) == "run_end"], "run_end although the process was never ended"

    # The log the stream saw is the log GetSession describes.
    time.sleep(0.3)
    final = get_session(h, sid)
    while s.last_seq < final.head_seq:
        s.recv(5)
    assert final.head_seq == s.last_seq
    assert final.usage.turns >= 4 and final.usage.output_tokens > 0, final.usage  # one interrupted
    seqs = [e.seq for e in s.events]
    assert seqs == list(range(1, len(seqs) + 1)), "seqs not 1..N without gap or duplicate"


def test_send_respawns_after_idle_timeout(idle_harness, streams):
    """On a server with a short --idle-timeout the idle keep-alive process ends by itself
    (run_end IDLE_TIMEOUT); then Stop does nothing, and Send spawns a new run that resumes the
    CLI session."""
    h = idle_harness
    sid = new_id("respawn")
    s = subscribe(h, streams, sid, 0)
    st = start(h, sid, "TEXT py before idle")
    ready, _ = s.wait_event(is_kind("run_ready"), "run_ready")
    assert ready.run_ready.resume_id
    c1, j = s.wait_event(is_kind("content"), "content")
    assert content_text(c1) == "py before idle"
    turn_end, j = s.wait_event(is_kind("turn_end"), "turn_end", start=j)
    # The keep-alive process outlives the turn until the idle timeout.
    assert wait_status(h, sid, IDLE, timeout=h.idle_timeout_s / 2).process_alive

    # With no turn in progress for --idle-timeout, the process is ended: stop_requested (source
    # idle), then exactly one run_end IDLE_TIMEOUT of the run.
    sreq, j = s.wait_event(is_kind("stop_requested"), "idle stop_requested", start=j + 1, timeout=30)
    assert (sreq.stop_requested.source, sreq.run_id) == ("idle", st.run_id), sreq
    # Event times are the server's append times: the timeout counts from the last activity.
    waited = (sreq.time.ToNanoseconds() - turn_end.time.ToNanoseconds()) / 1e9
    assert waited >= h.idle_timeout_s - 0.1, f"idle timeout fired {waited:.2f} s after the turn ended"
    end, j = s.wait_event(is_kind("run_end"), "run_end", start=j, timeout=30)
    assert end.run_end.reason == events_pb2.RUN_END_REASON_IDLE_TIMEOUT and end.run_id == st.run_id, end
    assert not wait_status(h, sid, IDLE).process_alive
    # Stop is idempotent and accepted in any state: nothing runs now.
    idle_stop(h, s, sid, "Stop with no process")
    idle_stop(h, s, sid, "a repeated Stop with no process")

    # Send with no live process spawns a new run that resumes the CLI session.
    respawn = send(h, sid, "TEXT py after respawn")
    assert respawn.run_id and respawn.run_id != st.run_id
    rs, j = s.wait_event(is_kind("run_start"), "respawn run_start", start=j + 1)
    assert rs.run_id == respawn.run_id
    assert rs.run_start.trigger == "send"
    assert rs.run_start.config.resume == ready.run_ready.resume_id
    c2, j = s.wait_event(is_kind("content"), "respawned content", start=j)
    assert content_text(c2) == "py after respawn"
    s.wait_event(is_kind("turn_end"), "respawned turn_end", start=j)
    assert wait_status(h, sid, IDLE).run_id == respawn.run_id

    # The log the stream saw is the log GetSession describes.
    final = get_session(h, sid)
    while s.last_seq < final.head_seq:
        s.recv(5)
    assert final.head_seq == s.last_seq
    assert final.usage.turns >= 2 and final.usage.output_tokens > 0, final.usage


def test_subscribe_from_cursor_and_history(harness, streams):
    h = harness
    sid = new_id("cursor")
    live = subscribe(h, streams, sid, 0)
    start(h, sid, "TEXT cursor one")
    _, i = live.wait_event(is_kind("turn_end"), "first turn_end")
    wait_status(h, sid, IDLE)
    send(h, sid, "TEXT cursor two")
    live.wait_event(is_kind("turn_end"), "second turn_end", start=i + 1)
    wait_status(h, sid, IDLE)
    head = get_session(h, sid).head_seq
    while live.last_seq < head:
        live.recv(10)
    full = list(live.events)
    assert len(full) == head >= 6

    # From the middle: replay header, exactly seq mid+1..head, caught_up at head.
    mid = head // 2
    s = subscribe(h, streams, sid, mid)
    assert (s.replay.reset, s.replay.from_seq, s.replay.head_seq) == (False, mid, head)
    s.until_caught_up()
    assert s.caught_up.head_seq == head
    assert [e.seq for e in s.events] == list(range(mid + 1, head + 1))
    assert s.events == full[mid:], "replayed events differ from the live ones"

    # From the head: nothing to replay.
    t = subscribe(h, streams, sid, head)
    t.until_caught_up()
    assert t.events == [] and not t.replay.reset

    # History, 3 at a time from the tail back to seq 1: each page the newest events below the
    # cursor, oldest first.
    pages = []
    before = 0
    while True:
        resp = h.stub.History(pb.HistoryRequest(session_id=sid, before_seq=before, limit=3), timeout=10)
        got = [e.seq for e in resp.events]
        want_last = head if before == 0 else before - 1
        assert got == list(range(want_last - len(got) + 1, want_last + 1)) and 0 < len(got) <= 3, (
            f"History(before {before}, limit 3) -> {got}"
        )
        pages.insert(0, list(resp.events))
        before = got[0]
        assert resp.has_more == (before > 1), f"has_more {resp.has_more} with oldest seq {before}"
        if not resp.has_more:
            break
    assert [e for p in pages for e in p] == full


def test_errors(harness, streams):
    h = harness
    with pytest.raises(grpc.RpcError) as e:
        h.stub.GetSession(pb.GetSessionRequest(session_id=new_id("unknown")), timeout=10)
    assert e.value.code() == grpc.StatusCode.NOT_FOUND

    with pytest.raises(grpc.RpcError) as e:
        h.stub.Start(pb.StartRequest(session_id="not a valid id!", config=events_pb2.StartConfig()), timeout=10)
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT

    sid = new_id("twice")
    s = subscribe(h, streams, sid, 0)
    start(h, sid, "TEXT started once")
    s.wait_event(is_kind("turn_end"), "turn_end")
    with pytest.raises(grpc.RpcError) as e:
        h.stub.Start(
            pb.StartRequest(session_id=sid, config=events_pb2.StartConfig(prompt="TEXT again", cwd=h.work_dir)),
            timeout=10,
        )
    assert e.value.code() == grpc.StatusCode.FAILED_PRECONDITION


def test_a_6mb_answer_is_streamed_cut_down_and_read_back_whole(harness, streams):
    """A 6 MB answer: with gRPC's default 4 MiB receive limit, Subscribe and History of the
    session work (the event is streamed cut down, marked truncated with its sizes), and
    ReadFullEvent returns the whole CLI line in chunks of at most 1 MiB."""
    stub = harness.stub
    sid = new_id("big")
    s = Stream(stub, sid, 0)
    streams.append(s)
    stub.Start(pb.StartRequest(session_id=sid, config=events_pb2.StartConfig(prompt="BIG 6000000", cwd=harness.work_dir)))
    big, _ = s.wait_event(lambda e: kind(e) == "content" and e.HasField("truncated"), "truncated content")
    s.wait_event(is_kind("turn_end"), "turn_end")
    assert big.cli_line == ""
    assert big.truncated.original_size > 12_000_000
    assert big.truncated.cli_line_size > 6_000_000
    assert "cli_line" in big.truncated.fields
    assert content_text(big).startswith("big 0 big 1 ")
    assert len(content_text(big)) < 1_100_000
    for ev in s.events:
        assert ev.ByteSize() <= 1024 * 1024, f"event {ev.seq} is {ev.ByteSize()} bytes"

    # History of the session with the default receive limit (4 MiB): every page fits.
    events, before = [], 0
    while True:
        page = stub.History(pb.HistoryRequest(session_id=sid, before_seq=before, limit=1000))
        assert page.ByteSize() <= 4 * 1024 * 1024
        events = list(page.events) + events
        if not page.has_more:
            break
        before = page.events[0].seq
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert any(e.HasField("truncated") for e in events)

    # The whole line, reassembled from chunks.
    line, total = b"", None
    for chunk in stub.ReadFullEvent(pb.ReadFullEventRequest(session_id=sid, seq=big.seq)):
        assert chunk.offset == len(line)
        assert len(chunk.chunk) <= 1024 * 1024
        total = chunk.total_size
        line += chunk.chunk
    assert len(line) == total == big.truncated.cli_line_size
    import json

    whole = json.loads(line)
    assert whole["type"] == "assistant"
    assert len(whole["message"]["content"][0]["text"]) == 6_000_000

    with pytest.raises(grpc.RpcError) as err:
        list(stub.ReadFullEvent(pb.ReadFullEventRequest(session_id=sid, seq=10_000)))
    assert err.value.code() == grpc.StatusCode.NOT_FOUND
def wait_turns(h, session_id: str, turns: int, timeout: float = TURN_TIMEOUT) -> pb.Session:
    deadline = time.monotonic() + timeout
    while True:
        s = get_session(h, session_id)
        if s.status == IDLE and s.usage.turns >= turns:
            return s
        if time.monotonic() > deadline:
            pytest.fail(f"{session_id}: {s.usage.turns} turns, want {turns} and idle")
        time.sleep(0.05)


def test_send_retried_with_its_key_runs_once(harness):
    """One logical Send sent twice with its idempotency_key (a client whose answer was lost):
    the retry answers the first run_id and the log holds one input_sent; the same key with
    another input is INVALID_ARGUMENT naming the field."""
    h = harness
    sid = new_id("idem")
    start(h, sid, "TEXT first")
    wait_turns(h, sid, 1)
    req = pb.SendRequest(session_id=sid, input="TEXT only once", idempotency_key=uuid.uuid4().hex)
    first = h.stub.Send(req, timeout=30)
    head = wait_turns(h, sid, 2).head_seq
    again = h.stub.Send(req, timeout=30)
    assert again.run_id == first.run_id
    assert get_session(h, sid).head_seq == head, "the retry appended"
    page = h.stub.History(pb.HistoryRequest(session_id=sid, limit=1000), timeout=10)
    inputs = [e for e in page.events if kind(e) == "input_sent" and e.input_sent.text == "TEXT only once"]
    assert len(inputs) == 1, [kind(e) for e in page.events]
    with pytest.raises(grpc.RpcError) as err:
        h.stub.Send(
            pb.SendRequest(session_id=sid, input="TEXT other", idempotency_key=req.idempotency_key), timeout=30
        )
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "idempotency_key" in err.value.details()
