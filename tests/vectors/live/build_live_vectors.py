#!/usr/bin/env python3
"""Writes activity.json: the live activity conformance cases (rules in
client-rs/protocol/src/live.rs). Each case is a derived activity, a Subscribe
stream folded into the partial message, and the activity expected of both;
the expected values are written by hand from the rules."""

import json
from pathlib import Path


def delta(message_id, block_type, fragment="x", index=0, tool_name="", tool_use_id="", parent=""):
    d = {"runId": "run-1", "messageId": message_id, "blockType": f"DELTA_BLOCK_TYPE_{block_type}", "fragment": fragment}
    if index:
        d["index"] = index
    if tool_name:
        d["toolName"] = tool_name
    if tool_use_id:
        d["toolUseId"] = tool_use_id
    if parent:
        d["parentToolUseId"] = parent
    return {"delta": d}


def event(seq, payload):
    return {"event": {"seq": str(seq), "sessionId": "sess-1", "runId": "run-1", **payload}}


def act(kind, tool=None, label=None):
    out = {"kind": kind, "toolName": tool}
    if label is not None:
        out["label"] = label
    return out


THINKING = act("thinking")
CASES = [
    ("nothing_streaming", "No block held: the derived activity.", THINKING, [], act("thinking", None, "Thinking")),
    ("text_streams", "Answer text streams while the log still says thinking.", THINKING,
     [delta("msg_01", "TEXT", "Hel")], act("writing", None, "Writing")),
    ("thinking_streams", "Thinking streams after a written block.", act("writing"),
     [delta("msg_01", "THINKING", "hmm")], act("thinking", None, "Thinking")),
    ("thinking_then_text", "The message's later block (by index) is the newest.", THINKING,
     [delta("msg_01", "THINKING", "hmm"), delta("msg_01", "TEXT", "So", index=1)], act("writing", None, "Writing")),
    ("tool_input_streams", "A tool call's input streams: running that tool.", THINKING,
     [delta("msg_01", "TOOL_INPUT", '{"comm', tool_name="Bash", tool_use_id="toolu_01")],
     act("running_tool", "Bash", "Running Bash")),
    ("tool_output_keeps_the_logs_tool", "A running tool's output that does not name it: the log's tool.",
     act("running_tool", "Bash"), [delta("toolu_01", "TOOL_OUTPUT", "line\n", tool_use_id="toolu_01")],
     act("running_tool", "Bash", "Running Bash")),
    ("newest_message_decides", "Text of one message, then the next message's tool input.", THINKING,
     [delta("msg_01", "TEXT", "Let me look."), delta("msg_02", "TOOL_INPUT", '{"file', tool_name="Read", tool_use_id="toolu_02")],
     act("running_tool", "Read", "Running Read")),
    ("subagent_blocks_ignored", "Only a subagent writes: the derived activity.", act("running_tool", "Agent"),
     [delta("msg_09", "TEXT", "sub", parent="toolu_agent")], act("running_tool", "Agent", "Running Agent")),
    ("content_supersedes", "The content event drops the block: the derived activity again.", THINKING,
     [delta("msg_01", "TEXT", "Hi"), event(4, {"content": {"messageId": "msg_01", "blocks": [{"type": "text", "text": "Hi"}]}})],
     act("thinking", None, "Thinking")),
    ("permission_prompt_wins", "A waiting permission prompt is the log's fact.", act("waiting_for_permission", "Write"),
     [delta("msg_01", "TEXT", "Hi")], act("waiting_for_permission", "Write", "Waiting for permission to run Write")),
    ("idle_wins", "Idle is the log's fact.", act("idle"), [delta("msg_01", "TEXT", "Hi")], act("idle", None, "Idle")),
    ("starting_wins", "Starting is the log's fact.", act("starting"), [delta("msg_01", "TEXT", "Hi")], act("starting", None, "Starting")),
    ("stopping_wins", "Stopping is the log's fact.", act("stopping"), [delta("msg_01", "TEXT", "Hi")], act("stopping", None, "Stopping")),
]

doc = {
    "description": "Live activity: the derived activity refined by the partial message folded from `steps`.",
    "cases": [
        {"name": n, "description": d, "derived": derived, "steps": steps, "expect": expect}
        for n, d, derived, steps, expect in CASES
    ],
}
Path(__file__).with_name("activity.json").write_text(json.dumps(doc, indent=1) + "\n")
