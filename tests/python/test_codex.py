"""A Codex session through the generated Python client: Start with agent "codex" runs the real
codex app-server against the fake's Responses API, and the log reads as for claude."""

from __future__ import annotations

from agentharness.v1 import events_pb2
from agentharness.v1 import session_service_pb2 as pb
from test_session import (  # noqa: F401
    IDLE,
    content_text,
    get_session,
    is_kind,
    new_id,
    streams,
    subscribe,
    wait_status,
)


def test_codex_turn(harness, streams):  # noqa: F811
    sid = new_id("codex")
    s = subscribe(harness, streams, sid, 0)
    s.until_caught_up()
    st = harness.stub.Start(
        pb.StartRequest(
            session_id=sid,
            config=events_pb2.StartConfig(prompt="TEXT python codex turn", cwd=harness.work_dir, agent="codex"),
        ),
        timeout=30,
    )

    end, _ = s.wait_event(is_kind("turn_end"), "turn_end")
    assert not end.turn_end.is_error, f"the Codex turn failed: {end.turn_end} ({s.summary()})"
    run_start, _ = s.wait_event(is_kind("run_start"), "run_start")
    assert run_start.run_start.agent == "codex" and run_start.run_id == st.run_id, run_start
    ready, _ = s.wait_event(is_kind("run_ready"), "run_ready")
    assert ready.run_ready.agent == "codex" and ready.run_ready.resume_id, ready.run_ready
    answer, _ = s.wait_event(is_kind("content"), "content")
    assert content_text(answer) == "python codex turn"

    idle = wait_status(harness, sid, IDLE)
    assert idle.agent == "codex" and idle.process_alive, idle
    # ListSessions names it too (paged: the shared server holds every test's sessions).
    token = ""
    while True:
        page = harness.stub.ListSessions(pb.ListSessionsRequest(page_token=token), timeout=10)
        found = [x for x in page.sessions if x.session_id == sid]
        if found:
            assert found[0].agent == "codex", found[0]
            break
        token = page.next_page_token
        assert token, f"ListSessions has no session {sid}"
    assert get_session(harness, sid).agent == "codex"
