"""Live typing through the generated Python client: a Subscribe stream that sets
include_deltas gets the assistant message being written as `delta` messages, with the fake
model streaming `SLOW n ms` as n ticks ("tick 0 tick 1 ...") ms apart."""

from __future__ import annotations

import time

import pytest

from agentharness.v1 import session_service_pb2 as pb
from test_session import TURN_TIMEOUT, content_text, is_kind, kind, new_id, start, streams, subscribe  # noqa: F401


def ticks(n: int) -> str:
    return "".join(f"tick {i} " for i in range(n))


def joined(deltas) -> str:
    """What a client holds for one block after these deltas: a snapshot replaces the text so
    far, a fragment appends to it."""
    text = ""
    for d, _, _ in deltas:
        text = d.fragment if d.snapshot else text + d.fragment
    return text


def wait_deltas(s, pred, what: str, timeout: float = TURN_TIMEOUT):
    """Reads until pred holds for the deltas received so far; fails when the turn ends first."""
    deadline = time.monotonic() + timeout
    while not pred(s.deltas):
        if s.events and kind(s.events[-1]) in ("turn_end", "run_end"):
            lines = "\n".join(f"{e.seq} {kind(e)}: {e.cli_line[:400]}" for e in s.events)
            pytest.fail(f"the turn ended before {what}; deltas joined: {joined(s.deltas)!r}\n{lines}")
        s.recv(deadline - time.monotonic())


def text_content(s):
    """The one content event with text on s, and its index in s.events."""
    found = [(i, e) for i, e in enumerate(s.events) if kind(e) == "content" and content_text(e)]
    assert len(found) == 1, f"content events with text: {[e.seq for _, e in found]}; events: {s.summary()}"
    i, e = found[0]
    return e, i


def check_join(what: str, got: str, final: str):
    """got, the deltas of a block joined, is exactly the block's final text: the server sends a
    block's last fragments before its content event, also when the CLI wrote them in the same
    instant."""
    assert got == final, f"{what}: deltas join to {got!r}, not the content text {final!r}"


def check_deltas_of(what: str, s, content, at: int, run_id: str):
    """Every delta on s writes text block 0 of content, before content; they join to its text."""
    for i, (d, events_before, _) in enumerate(s.deltas):
        assert (d.message_id, d.index, d.block_type, d.run_id, d.parent_tool_use_id) == (
            content.content.message_id, 0, pb.DELTA_BLOCK_TYPE_TEXT, run_id, "",
        ), f"{what}: delta {i}: {d}"
        assert events_before <= at, f"{what}: delta {i} after {events_before} events, content is event {at}: {d}"
    check_join(what, joined(s.deltas), content_text(content))


def test_text_arrives_in_pieces_that_join_to_the_content(harness, streams):
    """A stream with include_deltas sees the answer in pieces before its content event (each
    after every event before it); a stream without include_deltas gets no delta."""
    h = harness
    sid = new_id("typing")
    live = subscribe(h, streams, sid, 0, include_deltas=True)
    live.until_caught_up()
    plain = subscribe(h, streams, sid, 0)
    plain.until_caught_up()

    run_id = start(h, sid, "SLOW 12 150").run_id
    _, end_at = live.wait_event(is_kind("turn_end"), "turn_end")
    assert not live.events[end_at].turn_end.is_error, live.events[end_at]
    content, at = text_content(live)
    assert content_text(content) == ticks(12)
    assert len(live.deltas) >= 3, f"the text should come in several pieces: {[d.fragment for d, _, _ in live.deltas]}"
    assert not any(d.snapshot for d, _, _ in live.deltas), "a snapshot on a stream that was there before the message"
    assert joined(live.deltas).count("tick") >= 5, f"deltas join to {joined(live.deltas)!r}"
    check_deltas_of("live stream", live, content, at, run_id)

    # The plain stream reads the same turn; its check fails on any delta.
    plain.wait_event(is_kind("turn_end"), "turn_end")
    assert [e.seq for e in plain.events] == [e.seq for e in live.events]


def test_a_stream_opened_mid_message_gets_the_text_so_far_then_the_rest(harness, streams):
    """Opened after five ticks: right after caught_up, a snapshot of the text so far (a proper
    prefix of the answer), then fragments."""
    h = harness
    sid = new_id("rejoin")
    first = subscribe(h, streams, sid, 0, include_deltas=True)
    first.until_caught_up()
    run_id = start(h, sid, "SLOW 12 150").run_id
    wait_deltas(first, lambda ds: joined(ds).count("tick") >= 5, "five ticks")

    late = subscribe(h, streams, sid, 0, include_deltas=True)
    late.until_caught_up()
    late.wait_event(is_kind("turn_end"), "turn_end")
    content, at = text_content(late)
    final = content_text(content)
    assert final == ticks(12)

    assert len(late.deltas) >= 2, f"want a snapshot then fragments: {[d for d, _, _ in late.deltas]}"
    snap, _, since_caught_up = late.deltas[0]
    assert snap.snapshot and since_caught_up == 0, (
        f"first delta ({since_caught_up} messages after caught_up) is not a snapshot right after caught_up: {snap}"
    )
    assert snap.fragment and len(snap.fragment) < len(final) and final.startswith(snap.fragment), (
        f"snapshot {snap.fragment!r}: want a non-empty proper prefix of {final!r}"
    )
    assert snap.fragment.count("tick") >= 5, f"the first stream had seen five ticks; snapshot {snap.fragment!r}"
    assert not any(d.snapshot for d, _, _ in late.deltas[1:]), "a second snapshot"
    check_deltas_of("late stream", late, content, at, run_id)

    first.wait_event(is_kind("turn_end"), "turn_end")
    check_deltas_of("first stream", first, *text_content(first), run_id)
