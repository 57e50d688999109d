"""A Gemini session through the generated Python client: Start with agent "gemini" runs the
real Gemini CLI over the Agent Client Protocol (the server's --acp-agent) against the fake's
Gemini API, and the log reads as for claude. ListAgents lists it."""

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


def test_list_agents(harness):
    agents = harness.stub.ListAgents(pb.ListAgentsRequest(), timeout=10).agents
    assert [(a.name, a.kind, a.is_default) for a in agents] == [
        ("claude", "claude", True),
        ("codex", "codex", False),
        ("gemini", "acp", False),
    ]


def test_gemini_turn(harness, streams):  # noqa: F811
    sid = new_id("gemini")
    s = subscribe(harness, streams, sid, 0)
    s.until_caught_up()
    st = harness.stub.Start(
        pb.StartRequest(
            session_id=sid,
            config=events_pb2.StartConfig(prompt="TEXT python gemini turn", cwd=harness.work_dir, agent="gemini"),
        ),
        timeout=30,
    )

    end, _ = s.wait_event(is_kind("turn_end"), "turn_end")
    assert not end.turn_end.is_error, f"the Gemini turn failed: {end.turn_end} ({s.summary()})"
    run_start, _ = s.wait_event(is_kind("run_start"), "run_start")
    assert run_start.run_start.agent == "gemini" and run_start.run_id == st.run_id, run_start
    ready, _ = s.wait_event(is_kind("run_ready"), "run_ready")
    assert ready.run_ready.agent == "gemini" and ready.run_ready.resume_id, ready.run_ready
    answer, _ = s.wait_event(is_kind("content"), "content")
    assert content_text(answer) == "python gemini turn"

    idle = wait_status(harness, sid, IDLE)
    assert idle.agent == "gemini" and idle.process_alive, idle
    assert get_session(harness, sid).agent == "gemini"
