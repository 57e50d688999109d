"""Routing by session: example.py names its session in x-session-id on every call (checked by a
stand-in server that records the headers it gets); the real server refuses a header that
disagrees with session_id (INVALID_ARGUMENT naming both) and names the node that served every
answer in x-agent-harness-node."""

import os
import pathlib
import subprocess
import sys
import uuid
from concurrent import futures

import grpc
import pytest

from agentharness.v1 import events_pb2
from agentharness.v1 import session_service_pb2 as pb
from agentharness.v1 import session_service_pb2_grpc as pb_grpc

ROOT = pathlib.Path(__file__).resolve().parents[2]


class Recorder(pb_grpc.SessionServiceServicer):
    """Answers Start, and a Subscribe with one content event and a turn_end; records the
    x-session-id header of each call."""

    def __init__(self):
        self.seen: list[tuple[str, str | None]] = []

    def _record(self, name, context):
        headers = dict(context.invocation_metadata())
        self.seen.append((name, headers.get("x-session-id")))

    def Start(self, request, context):
        self._record("Start", context)
        return pb.StartResponse(run_id="r1", process_id="pid:1")

    def Subscribe(self, request, context):
        self._record("Subscribe", context)
        content = events_pb2.Event(seq=1, session_id=request.session_id)
        content.content.blocks.add(text="routed")
        end = events_pb2.Event(seq=2, session_id=request.session_id)
        end.turn_end.SetInParent()
        yield pb.SubscribeResponse(event=content)
        yield pb.SubscribeResponse(event=end)


def test_the_example_names_its_session_on_every_call():
    recorder = Recorder()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    pb_grpc.add_SessionServiceServicer_to_server(recorder, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        env = dict(os.environ, PYTHONPATH=str(ROOT / "gen" / "python"))
        out = subprocess.run(
            [sys.executable, str(ROOT / "tests" / "python" / "example.py"), f"127.0.0.1:{port}", "py-routed", "hi"],
            env=env, capture_output=True, text=True, timeout=60,
        )
    finally:
        server.stop(None)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "routed"
    assert recorder.seen == [("Start", "py-routed"), ("Subscribe", "py-routed")]


def test_a_disagreeing_header_is_refused_and_answers_name_the_node(harness):
    sid = f"py-routing-{uuid.uuid4().hex[:8]}"
    with pytest.raises(grpc.RpcError) as err:
        harness.stub.GetSession(pb.GetSessionRequest(session_id=sid), metadata=[("x-session-id", "other")], timeout=10)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert sid in err.value.details() and "other" in err.value.details()
    _, call = harness.stub.ListSessions.with_call(pb.ListSessionsRequest(page_size=1), timeout=10)
    nodes = [v for k, v in call.initial_metadata() if k == "x-agent-harness-node"]
    assert len(nodes) == 1 and nodes[0], call.initial_metadata()
