"""Naming a session through the generated Python client: SetTitle against the real server,
read back through GetSession; an empty title goes back to the one derived from the first
prompt; a title of two lines and an unknown session are refused."""

from __future__ import annotations

import uuid

import grpc

from agentharness.v1 import session_service_pb2 as pb
from test_session import IDLE, TURN_TIMEOUT, get_session, new_id, start, wait_status
from test_settings import fails


def test_set_title_is_read_back_from_get_session(harness):
    h = harness
    sid = new_id("title")
    start(h, sid, "TEXT name me\nsecond line")
    s = wait_status(h, sid, IDLE, timeout=TURN_TIMEOUT)
    assert (s.title, s.cwd) == ("TEXT name me", h.work_dir), s
    assert s.HasField("created_at") and s.HasField("updated_at"), s

    req = pb.SetTitleRequest(session_id=sid, title="  Python title  ", idempotency_key=uuid.uuid4().hex)
    r = h.stub.SetTitle(req, timeout=20)
    assert r.seq > 0, r
    assert get_session(h, sid).title == "Python title"
    assert h.stub.SetTitle(req, timeout=20) == r, "a keyed repeat answers the same seq"

    h.stub.SetTitle(pb.SetTitleRequest(session_id=sid, title=""), timeout=20)
    assert get_session(h, sid).title == "TEXT name me", "an empty title: back to the derived one"

    two_lines = pb.SetTitleRequest(session_id=sid, title="two\nlines")
    fails(h.stub.SetTitle, two_lines, grpc.StatusCode.INVALID_ARGUMENT, "title")
    unknown = pb.SetTitleRequest(session_id=new_id("nobody"), title="x")
    fails(h.stub.SetTitle, unknown, grpc.StatusCode.NOT_FOUND)
