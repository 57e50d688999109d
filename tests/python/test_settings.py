"""Control of a live session through the generated Python client: SetModel, SetPermissionMode
(within the operator's policy) and SetMaxThinkingTokens, applied to the live process or
recorded for the next spawn; RewindFiles restores a file the agent wrote; a fork at an
earlier message continues from there while the source goes on. Against the real server and
claude CLI, with the fake Messages API recording what each API request carried."""

from __future__ import annotations

import json
import pathlib
import uuid

import grpc
import pytest

from agentharness.v1 import events_pb2
from agentharness.v1 import session_service_pb2 as pb
from test_session import (  # noqa: F401
    IDLE,
    TURN_TIMEOUT,
    content_text,
    get_session,
    is_kind,
    kind,
    new_id,
    send,
    start,
    streams,
    subscribe,
    wait_status,
)

# Not the CLI's default model (claude-opus-4-8); the fake API echoes the request's model in
# its reply, so content.model shows what the request named.
OTHER_MODEL = "claude-haiku-4-5"
LIVE = events_pb2.SETTING_APPLIED_LIVE
NEXT_SPAWN = events_pb2.SETTING_APPLIED_NEXT_SPAWN


def fails(call, request, code, text=""):
    """The call fails with `code`, its message containing `text`."""
    with pytest.raises(grpc.RpcError) as err:
        call(request, timeout=20)
    assert err.value.code() == code and text in err.value.details(), err.value


def setting_changed(s, start_at: int, seq: int, setting, value: str, applied) -> int:
    """The first setting_changed at index start_at or later is the one a Set* call answered
    with (at its seq); returns the index after it."""
    ev, i = s.wait_event(is_kind("setting_changed"), "setting_changed", start=start_at, timeout=10)
    c = ev.setting_changed
    assert (ev.seq, c.setting, c.value, c.applied) == (seq, setting, value, applied), (
        f"event {ev.seq}: {c}, want {setting} {value!r} {applied} at seq {seq}"
    )
    return i + 1


def test_set_model_on_the_live_process(harness, streams):
    """LIVE, recorded as setting_changed at the seq it answers; a keyed repeat answers the same
    and records nothing; GetSession.model; the next turn, in the same process, runs on it (the
    CLI's init, run_ready, and the model the API request named, content.model)."""
    h = harness
    sid = new_id("model")
    s = subscribe(h, streams, sid, 0)
    st = start(h, sid, "TEXT one")
    first, j = s.wait_event(is_kind("content"), "content")
    assert first.content.model and first.content.model != OTHER_MODEL, first.content
    _, j = s.wait_event(is_kind("turn_end"), "turn_end", start=j)
    wait_status(h, sid, IDLE)

    req = pb.SetModelRequest(session_id=sid, model=OTHER_MODEL, idempotency_key=uuid.uuid4().hex)
    r = h.stub.SetModel(req, timeout=20)
    assert r.applied == LIVE and r.seq > 0, r
    j = setting_changed(s, j, r.seq, events_pb2.SETTING_MODEL, OTHER_MODEL, LIVE)
    assert h.stub.SetModel(req, timeout=20) == r, "a keyed repeat answers the same"
    assert get_session(h, sid).model == OTHER_MODEL

    assert send(h, sid, "TEXT two").run_id == st.run_id, "the live process took the next message"
    ready, k = s.wait_event(is_kind("run_ready"), "run_ready of the next turn", start=j)
    assert (ready.run_id, ready.run_ready.model) == (st.run_id, OTHER_MODEL), ready.run_ready
    answer, k = s.wait_event(is_kind("content"), "content of the next turn", start=k)
    assert (content_text(answer), answer.content.model) == ("two", OTHER_MODEL), answer.content
    s.wait_event(is_kind("turn_end"), "turn_end of the next turn", start=k)
    assert [kind(e) for e in s.events].count("setting_changed") == 1, f"the repeat recorded something: {s.summary()}"
    assert get_session(h, sid).model == OTHER_MODEL


def test_set_permission_mode_within_the_policy(harness, streams):
    """Relay mode (the default): plan is LIVE and shows in GetSession and the CLI's next init;
    bypassPermissions and acceptEdits are PERMISSION_DENIED, an unknown mode INVALID_ARGUMENT,
    and refusals record nothing. SetMaxThinkingTokens takes a budget within its bound."""
    h = harness
    sid = new_id("mode")
    s = subscribe(h, streams, sid, 0)
    st = start(h, sid, "TEXT one")
    _, j = s.wait_event(is_kind("turn_end"), "turn_end")
    head = wait_status(h, sid, IDLE).head_seq

    def mode(m: str) -> pb.SetPermissionModeRequest:
        return pb.SetPermissionModeRequest(session_id=sid, mode=m)

    fails(h.stub.SetPermissionMode, mode("bypassPermissions"), grpc.StatusCode.PERMISSION_DENIED, "--allow-permission-mode")
    fails(h.stub.SetPermissionMode, mode("acceptEdits"), grpc.StatusCode.PERMISSION_DENIED, "not allowed")
    fails(h.stub.SetPermissionMode, mode("yolo"), grpc.StatusCode.INVALID_ARGUMENT, "mode")
    r = h.stub.SetPermissionMode(mode("plan"), timeout=20)
    assert (r.applied, r.seq) == (LIVE, head + 1), f"{r}: the refusals recorded nothing"
    j = setting_changed(s, j, r.seq, events_pb2.SETTING_PERMISSION_MODE, "plan", LIVE)
    assert get_session(h, sid).permission_mode == "plan"

    def budget(n: int) -> pb.SetMaxThinkingTokensRequest:
        return pb.SetMaxThinkingTokensRequest(session_id=sid, max_thinking_tokens=n)

    fails(h.stub.SetMaxThinkingTokens, budget(5_000_000), grpc.StatusCode.INVALID_ARGUMENT, "max_thinking_tokens")
    r = h.stub.SetMaxThinkingTokens(budget(2048), timeout=20)
    assert r.applied == LIVE, r
    j = setting_changed(s, j, r.seq, events_pb2.SETTING_MAX_THINKING_TOKENS, "2048", LIVE)
    got = get_session(h, sid)
    assert got.HasField("max_thinking_tokens") and got.max_thinking_tokens == 2048, got

    send(h, sid, "TEXT two")
    ready, k = s.wait_event(is_kind("run_ready"), "run_ready of the next turn", start=j)
    assert (ready.run_id, ready.run_ready.permission_mode) == (st.run_id, "plan"), ready.run_ready
    answer, _ = s.wait_event(is_kind("content"), "content of the next turn", start=k)
    assert content_text(answer) == "two"
    assert wait_status(h, sid, IDLE, timeout=TURN_TIMEOUT).permission_mode == "plan"


def test_settings_with_no_live_process_apply_at_the_next_spawn(idle_harness, streams):
    """After the idle timeout, SetModel and SetPermissionMode are NEXT_SPAWN; the respawn
    starts with them (run_start config, the CLI's init, the answering model)."""
    h = idle_harness
    sid = new_id("next-spawn")
    s = subscribe(h, streams, sid, 0)
    st = start(h, sid, "TEXT one")
    end, j = s.wait_event(is_kind("run_end"), "run_end of the idle timeout", timeout=TURN_TIMEOUT + 30)
    assert end.run_end.reason == events_pb2.RUN_END_REASON_IDLE_TIMEOUT, end

    r = h.stub.SetModel(pb.SetModelRequest(session_id=sid, model=OTHER_MODEL), timeout=20)
    assert (r.applied, r.seq) == (NEXT_SPAWN, end.seq + 1), r
    j = setting_changed(s, j, r.seq, events_pb2.SETTING_MODEL, OTHER_MODEL, NEXT_SPAWN)
    r = h.stub.SetPermissionMode(pb.SetPermissionModeRequest(session_id=sid, mode="plan"), timeout=20)
    assert r.applied == NEXT_SPAWN, r
    j = setting_changed(s, j, r.seq, events_pb2.SETTING_PERMISSION_MODE, "plan", NEXT_SPAWN)
    got = get_session(h, sid)
    assert (got.model, got.permission_mode, got.process_alive) == (OTHER_MODEL, "plan", False), got

    sent = send(h, sid, "TEXT two")
    assert sent.run_id != st.run_id, "a new process"
    rs, j = s.wait_event(is_kind("run_start"), "the respawn's run_start", start=j)
    assert (rs.run_start.config.model, rs.run_start.config.permission_mode) == (OTHER_MODEL, "plan"), rs.run_start
    ready, j = s.wait_event(is_kind("run_ready"), "the respawn's run_ready", start=j)
    assert (ready.run_ready.model, ready.run_ready.permission_mode) == (OTHER_MODEL, "plan"), ready.run_ready
    answer, _ = s.wait_event(is_kind("content"), "the answer", start=j)
    assert (content_text(answer), answer.content.model, answer.run_id) == ("two", OTHER_MODEL, sent.run_id)


def test_rewind_files_restores_a_written_file(skip_harness, streams):
    """--permissions skip: the agent writes a.txt unasked, "first" then "second". A dry run
    back to turn 2's input_sent lists a.txt and changes nothing; the real one restores
    "first\\n" on disk, recorded as files_rewound at the seq it answers."""
    h = skip_harness
    sid = new_id("rewind")
    path = pathlib.Path(h.work_dir) / "a.txt"
    s = subscribe(h, streams, sid, 0)
    st = start(h, sid, "WRITE a.txt first")
    _, j = s.wait_event(is_kind("turn_end"), "turn_end of turn 1")
    assert path.read_text() == "first\n"
    send(h, sid, "WRITE a.txt second")
    in2, j = s.wait_event(is_kind("input_sent"), "input_sent of turn 2", start=j)
    assert in2.input_sent.text == "WRITE a.txt second" and in2.input_sent.message_uuid, in2
    _, j = s.wait_event(is_kind("turn_end"), "turn_end of turn 2", start=j)
    assert path.read_text() == "second\n"
    head = wait_status(h, sid, IDLE).head_seq

    fails(h.stub.RewindFiles, pb.RewindFilesRequest(session_id=sid, to_seq=head, dry_run=True),
          grpc.StatusCode.INVALID_ARGUMENT, "to_seq")
    dry = h.stub.RewindFiles(pb.RewindFilesRequest(session_id=sid, to_seq=in2.seq, dry_run=True), timeout=20)
    assert (list(dry.files_changed), dry.insertions, dry.deletions, dry.seq) == ([str(path)], 1, 1, 0), dry
    assert path.read_text() == "second\n", "the dry run changed the file"
    assert get_session(h, sid).head_seq == head, "the dry run appended an event"

    req = pb.RewindFilesRequest(session_id=sid, to_seq=in2.seq, idempotency_key=uuid.uuid4().hex)
    done = h.stub.RewindFiles(req, timeout=20)
    assert (list(done.files_changed), done.seq) == ([str(path)], head + 1), done
    assert path.read_text() == "first\n"
    ev, _ = s.wait_event(is_kind("files_rewound"), "files_rewound", start=j, timeout=10)
    fr = ev.files_rewound
    assert (ev.seq, fr.to_seq, fr.message_uuid, list(fr.files_changed), fr.insertions, fr.deletions) == (
        done.seq, in2.seq, in2.input_sent.message_uuid, [str(path)], 1, 1,
    ), ev
    assert h.stub.RewindFiles(req, timeout=20) == done, "a keyed repeat answers the same"
    after = get_session(h, sid)
    assert (after.head_seq, after.process_alive, after.run_id) == (done.seq, True, st.run_id), after


def api_messages(fake_api, needle: str) -> str:
    """The conversation (JSON of "messages") of the latest Messages API call whose messages
    mention needle, as the fake API recorded it."""
    for f in sorted(fake_api.dump_dir.glob("*.json"), reverse=True):  # <port>-<n>.json
        body = json.loads(f.read_text()).get("body")
        msgs = json.dumps(body.get("messages")) if isinstance(body, dict) else ""
        if needle in msgs:
            return msgs
    pytest.fail(f"no Messages API call mentions {needle!r}")


def test_fork_at_an_earlier_message(harness, fake_api, streams):
    """A source says alpha, then beta; a new session started with fork{from_session_id, at_seq:
    the content event alpha} answers gamma in a conversation of its own (another resume id)
    that holds alpha but not beta; the source goes on in its own process (beta, no gamma)."""
    h = harness
    src = new_id("fork-src")
    alpha, beta, gamma, delta = (f"{w}-{src}" for w in ("alpha", "beta", "gamma", "delta"))
    s = subscribe(h, streams, src, 0)
    st = start(h, src, f"TEXT {alpha}")
    src_ready, _ = s.wait_event(is_kind("run_ready"), "run_ready")
    at, j = s.wait_event(lambda e: content_text(e) == alpha, "content alpha")
    end1, j = s.wait_event(is_kind("turn_end"), "turn_end", start=j)
    send(h, src, f"TEXT {beta}")
    _, j = s.wait_event(lambda e: content_text(e) == beta, "content beta", start=j)
    _, j = s.wait_event(is_kind("turn_end"), "turn_end", start=j)
    wait_status(h, src, IDLE)
    src_resume = src_ready.run_ready.resume_id

    def fork_request(sid: str, fork: events_pb2.Fork) -> pb.StartRequest:
        config = events_pb2.StartConfig(prompt=f"TEXT {gamma}", cwd=h.work_dir, fork=fork)
        return pb.StartRequest(session_id=sid, config=config)

    fails(h.stub.Start, fork_request(new_id("fork-bad"), events_pb2.Fork(from_session_id=src, at_seq=end1.seq)),
          grpc.StatusCode.INVALID_ARGUMENT, "config.fork.at_seq")
    fails(h.stub.Start, fork_request(new_id("fork-bad"), events_pb2.Fork(from_session_id=new_id("nobody"))),
          grpc.StatusCode.INVALID_ARGUMENT, "config.fork.from_session_id")

    sid = new_id("fork")
    f = subscribe(h, streams, sid, 0)
    h.stub.Start(fork_request(sid, events_pb2.Fork(from_session_id=src, at_seq=at.seq)), timeout=30)
    rs, i = f.wait_event(is_kind("run_start"), "the fork's run_start")
    cfg = rs.run_start.config
    assert (cfg.fork.from_session_id, cfg.fork.at_seq, cfg.resume) == (src, at.seq, src_resume), cfg
    assert cfg.fork.message_uuid, "the server fills in the message's uuid"
    ready, i = f.wait_event(is_kind("run_ready"), "the fork's run_ready", start=i)
    assert ready.run_ready.resume_id and ready.run_ready.resume_id != src_resume, ready.run_ready
    answer, i = f.wait_event(is_kind("content"), "the fork's answer", start=i)
    assert content_text(answer) == gamma
    f.wait_event(is_kind("turn_end"), "the fork's turn_end", start=i)
    msgs = api_messages(fake_api, f"TEXT {gamma}")
    assert f"TEXT {alpha}" in msgs and f'"{alpha}"' in msgs and beta not in msgs, msgs

    assert send(h, src, f"TEXT {delta}").run_id == st.run_id, "the source's live process takes it"
    s.wait_event(lambda e: content_text(e) == delta, "the source's next answer", start=j)
    msgs = api_messages(fake_api, f"TEXT {delta}")
    assert beta in msgs and gamma not in msgs, msgs
    assert get_session(h, src).resume_id == src_resume
