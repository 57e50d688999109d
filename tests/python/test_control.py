"""Control of the live CLI process through the generated Python client: GetContextUsage
answers the CLI's figures, StopTask ends one background task while the process stays, and
both fail clearly without a live process. Against the real server and claude CLI."""

from __future__ import annotations

import uuid

import grpc
import pytest

from agentharness.v1 import events_pb2
from agentharness.v1 import session_service_pb2 as pb
from test_session import (  # noqa: F401
    IDLE,
    TURN_TIMEOUT,
    content_text,
    is_kind,
    new_id,
    start,
    send,
    streams,
    subscribe,
    wait_status,
)


def _task_ended(task_id: str):
    def pred(ev: events_pb2.Event) -> bool:
        if ev.HasField("task_updated"):
            return ev.task_updated.task_id == task_id and ev.task_updated.status == "killed"
        if ev.HasField("task_notification"):
            return ev.task_notification.task_id == task_id and ev.task_notification.status == "stopped"
        return False

    return pred


def test_context_usage_adds_up_and_stop_task_ends_a_background_bash(harness, streams):
    h = harness
    sid = new_id("control")
    s = subscribe(h, streams, sid, 0)
    st = start(h, sid, "BGBASH sleep 300")

    # Relayed permissions (the server's default): allow the Bash if the CLI asks.
    ev, j = s.wait_event(is_kind("task_started", "permission_requested"), "task_started (or its permission)")
    if ev.HasField("permission_requested"):
        h.stub.RespondPermission(
            pb.RespondPermissionRequest(session_id=sid, request_id=ev.permission_requested.request_id, allow=True),
            timeout=10,
        )
        ev, j = s.wait_event(is_kind("task_started"), "task_started", start=j + 1)
    task_id = ev.task_started.task_id
    assert task_id, ev
    _, j = s.wait_event(is_kind("turn_end"), "turn_end", start=j)
    wait_status(h, sid, IDLE)

    usage = h.stub.GetContextUsage(pb.GetContextUsageRequest(session_id=sid), timeout=20)
    assert usage.total_tokens > 0 and usage.max_tokens > usage.total_tokens, usage
    assert usage.raw_max_tokens >= usage.max_tokens, usage
    assert "Messages" in [c.name for c in usage.categories], usage
    used = sum(c.tokens for c in usage.categories if c.kind == "used")
    assert used == usage.total_tokens, f"the categories add up to {used}: {usage}"
    assert usage.raw.fields["totalTokens"].number_value == usage.total_tokens

    assert not any(_task_ended(task_id)(e) for e in s.events), f"ended before StopTask: {s.summary()}"
    h.stub.StopTask(
        pb.StopTaskRequest(session_id=sid, task_id=task_id, idempotency_key=uuid.uuid4().hex), timeout=20
    )
    s.wait_event(_task_ended(task_id), "the task killed or stopped", start=j)

    idle = wait_status(h, sid, IDLE, timeout=TURN_TIMEOUT)
    assert idle.process_alive and idle.run_id == st.run_id, idle
    assert send(h, sid, "TEXT still here").run_id == st.run_id, "the same process took the next message"
    answer, _ = s.wait_event(lambda e: content_text(e) == "still here", "the next answer", start=j)
    assert answer.run_id == st.run_id


def test_control_without_a_live_process_fails_clearly(idle_harness, streams):
    h = idle_harness
    sid = new_id("control-gone")
    s = subscribe(h, streams, sid, 0)
    start(h, sid, "TEXT hi")
    end, _ = s.wait_event(is_kind("run_end"), "run_end of the idle timeout", timeout=TURN_TIMEOUT + 30)
    assert end.run_end.reason == events_pb2.RUN_END_REASON_IDLE_TIMEOUT, end

    def fails(call, request, code, text=""):
        with pytest.raises(grpc.RpcError) as err:
            call(request, timeout=20)
        assert err.value.code() == code and text in err.value.details(), err.value

    fails(h.stub.GetContextUsage, pb.GetContextUsageRequest(session_id=sid),
          grpc.StatusCode.FAILED_PRECONDITION, "no live process")
    fails(h.stub.StopTask, pb.StopTaskRequest(session_id=sid, task_id="b123"),
          grpc.StatusCode.FAILED_PRECONDITION, "no live process")
    fails(h.stub.GetContextUsage, pb.GetContextUsageRequest(session_id=new_id("nobody")), grpc.StatusCode.NOT_FOUND)
    fails(h.stub.StopTask, pb.StopTaskRequest(session_id=sid), grpc.StatusCode.INVALID_ARGUMENT, "task_id")
