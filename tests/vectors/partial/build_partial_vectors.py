#!/usr/bin/env python3
"""Writes the partial-message conformance vectors (tests/vectors/partial/*.json).

Each scenario is a Subscribe stream (replay headers, events, caught_up,
heartbeats and deltas) and, after every message, the partial blocks a client
holds. The expected blocks are written by hand from the rules in
client-rs/protocol/src/partial.rs (summary in tests/vectors/README.md, "Partial
message vectors"); none was produced by running an implementation.

Event and delta shapes follow what the server streams for the real CLI: one
assistant line (`content`) per content block, all with the message's id, so a
later block of a message is only written after the earlier block's content.
Run: python3 tests/vectors/partial/build_partial_vectors.py
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))  # the vectors' directory, for what both builders share
from vector_files import write_vectors  # noqa: E402

MODEL = "claude-sonnet-4-5"


def clean(v):
    """Drops proto3 default scalars (what pbjson omits); keeps messages."""
    if isinstance(v, dict):
        return {k: (x if k == "input" else clean(x)) for k, x in v.items()
                if x not in ("", 0, False, "0", None, [])}
    if isinstance(v, list):
        return [clean(x) for x in v]
    return v


# ---- payloads ---------------------------------------------------------------

def run_start(prompt):
    return ("runStart", {"config": {"prompt": prompt, "cwd": "/srv/demo/work"},
                         "adapter": "interactive", "trigger": "start"})


def input_sent(text, source="INITIAL"):
    return ("inputSent", {"text": text, "source": "INPUT_SOURCE_" + source})


def run_ready():
    return ("runReady", {"resumeId": "cli-sess-1", "model": MODEL, "cwd": "/srv/demo/work",
                         "permissionMode": "default", "cliVersion": "2.1.197", "pid": 4242})


def content(msg, block, parent=""):
    return ("content", {"messageId": msg, "model": MODEL, "blocks": [block],
                        "usage": {"inputTokens": "12", "outputTokens": "1"},
                        "parentToolUseId": parent})


def text(t):
    return {"type": "text", "text": t}


def thinking(t):
    return {"type": "thinking", "thinking": t}


def tool_use(tid, name, inp):
    return {"type": "tool_use", "toolUseId": tid, "toolName": name, "input": inp}


def result(tool_use_id="", text_="", parent="", out=""):
    trs = [{"toolUseId": tool_use_id, "text": out}] if tool_use_id else []
    return ("result", {"toolResults": trs, "parentToolUseId": parent, "text": text_})


def turn_end(interrupted=False):
    p = {"usage": {"inputTokens": "12", "outputTokens": "7"}, "costUsd": 0.000141,
         "durationMs": "55", "durationApiMs": "17", "numTurns": 1}
    if interrupted:
        p.update(isError=True, terminalReason="aborted_streaming", subtype="error_during_execution")
    else:
        p.update(terminalReason="completed", subtype="success")
    return ("turnEnd", p)


def run_end(reason, signal=""):
    return ("runEnd", {"reason": "RUN_END_REASON_" + reason, "signal": signal, "source": "process"})


def stop_requested():
    return ("stopRequested", {"source": "user"})


# ---- the builder ------------------------------------------------------------

TYPES = {"text": "DELTA_BLOCK_TYPE_TEXT", "thinking": "DELTA_BLOCK_TYPE_THINKING",
         "tool": "DELTA_BLOCK_TYPE_TOOL_INPUT", "output": "DELTA_BLOCK_TYPE_TOOL_OUTPUT"}


def B(msg, index, kind, text_, tool="", tool_use_id="", parent="", run="run-1"):
    """An expected block: the keys of the README's block format."""
    return clean({"runId": run, "messageId": msg, "index": index, "blockType": TYPES[kind],
                  "text": text_, "toolName": tool, "toolUseId": tool_use_id,
                  "parentToolUseId": parent}) | {"index": index, "text": text_}


class V:
    def __init__(self, name, description):
        self.name, self.description = name, description
        self.steps, self.expect = [], [{"after": 0, "blocks": []}]
        self.seq = 0

    def _push(self, msg, blocks):
        self.steps.append(msg)
        self.expect.append({"after": len(self.steps), "blocks": list(blocks)})

    def same(self):
        return self.expect[-1]["blocks"]

    def replay(self, from_seq, head, *blocks, reset=False):
        """A stream's header; the events that follow start at from_seq + 1."""
        self.seq = from_seq
        self._push({"replay": clean({"reset": reset, "fromSeq": str(from_seq),
                                     "headSeq": str(head)})}, blocks)

    def caught_up(self):
        self._push({"caughtUp": clean({"headSeq": str(self.seq)})}, self.same())

    def heartbeat(self):
        self._push({"heartbeat": clean({"headSeq": str(self.seq)})}, self.same())

    def ev(self, payload, *blocks):
        self.seq += 1
        seq = self.seq
        kind, body = payload
        e = {"seq": str(seq), "sessionId": "sess-1", "runId": "run-1",
             "time": "2026-11-29T21:%02d:%02d+00:00" % (seq // 60 % 60, seq % 60),
             kind: clean(body)}
        self._push({"event": e}, blocks)

    def delta(self, msg, index, kind, fragment, *blocks, snapshot=False, tool="",
              tool_use_id="", parent=""):
        d = {"runId": "run-1", "afterSeq": str(self.seq), "messageId": msg, "index": index,
             "blockType": TYPES[kind], "toolName": tool, "toolUseId": tool_use_id,
             "parentToolUseId": parent, "fragment": fragment, "snapshot": snapshot}
        self._push({"delta": clean(d)}, blocks)

    def boot(self, prompt):
        """A cold subscribe, then a run starts and its CLI boots."""
        self.replay(0, 0)
        self.caught_up()
        self.ev(run_start(prompt))
        self.ev(input_sent(prompt))
        self.ev(run_ready())

    def doc(self):
        return {"name": self.name, "description": self.description, "steps": self.steps,
                "expect": self.expect}


ALL = []


def vector(name, description):
    v = V(name, description)
    ALL.append(v)
    return v


# ---- scenarios --------------------------------------------------------------

v = vector("text_grows_then_content",
           "Answer text arrives in three deltas (a heartbeat in between changes nothing); the "
           "content event with the same message id supersedes it; turn_end on an empty partial "
           "changes nothing.")
v.boot("say hello")
v.delta("msg_01", 0, "text", "Hel", B("msg_01", 0, "text", "Hel"))
v.delta("msg_01", 0, "text", "lo, wor", B("msg_01", 0, "text", "Hello, wor"))
v.heartbeat()
v.delta("msg_01", 0, "text", "ld.", B("msg_01", 0, "text", "Hello, world."))
v.ev(content("msg_01", text("Hello, world.")))
v.ev(turn_end())

v = vector("reconnect_snapshot_restores",
           "The stream breaks mid-answer. The new stream's replay header drops the partial text; "
           "after caught_up a snapshot delta restores the whole text so far (including what was "
           "written while disconnected), then live deltas append: no character twice.")
v.boot("what is the answer?")
v.delta("msg_01", 0, "text", "The ans", B("msg_01", 0, "text", "The ans"))
v.delta("msg_01", 0, "text", "wer", B("msg_01", 0, "text", "The answer"))
v.replay(3, 3)
v.caught_up()
v.delta("msg_01", 0, "text", "The answer is", B("msg_01", 0, "text", "The answer is"),
        snapshot=True)
v.delta("msg_01", 0, "text", " 42.", B("msg_01", 0, "text", "The answer is 42."))
v.ev(content("msg_01", text("The answer is 42.")))
v.ev(turn_end())

v = vector("reconnect_replays_missed_content",
           "The stream breaks mid-answer and the content lands while disconnected. The new "
           "stream's replay header drops the stale partial text, the replayed content and "
           "turn_end find nothing to drop, and with nothing being written no snapshot follows.")
v.boot("say hi")
v.delta("msg_01", 0, "text", "H", B("msg_01", 0, "text", "H"))
v.replay(3, 5)
v.ev(content("msg_01", text("Hi there.")))
v.ev(turn_end())
v.caught_up()

v = vector("thinking_then_text",
           "Thinking (block 0) grows, its content drops it; then the answer (block 1 of the same "
           "message) grows from nothing and its content drops it.")
v.boot("2+2?")
v.delta("msg_01", 0, "thinking", "The user", B("msg_01", 0, "thinking", "The user"))
v.delta("msg_01", 0, "thinking", " wants a sum.", B("msg_01", 0, "thinking", "The user wants a sum."))
v.ev(content("msg_01", thinking("The user wants a sum.")))
v.delta("msg_01", 1, "text", "It is", B("msg_01", 1, "text", "It is"))
v.delta("msg_01", 1, "text", " 4.", B("msg_01", 1, "text", "It is 4."))
v.ev(content("msg_01", text("It is 4.")))
v.ev(turn_end())

v = vector("tool_input",
           "A text block, then a tool call's input streamed as JSON text with the tool's name and "
           "tool_use id; the tool_use content supersedes it; the tool result changes nothing; the "
           "next message's text starts a new block.")
v.boot("list the files")
v.delta("msg_01", 0, "text", "Listing.", B("msg_01", 0, "text", "Listing."))
v.ev(content("msg_01", text("Listing.")))
BASH = dict(tool="Bash", tool_use_id="toolu_01")
v.delta("msg_01", 1, "tool", "{\"command\"", B("msg_01", 1, "tool", "{\"command\"", **BASH), **BASH)
v.delta("msg_01", 1, "tool", ": \"ls\"}", B("msg_01", 1, "tool", "{\"command\": \"ls\"}", **BASH),
        **BASH)
v.ev(content("msg_01", tool_use("toolu_01", "Bash", {"command": "ls"})))
v.ev(result("toolu_01", out="a.txt\nb.txt"))
v.delta("msg_02", 0, "text", "Two files", B("msg_02", 0, "text", "Two files"))
v.delta("msg_02", 0, "text", ".", B("msg_02", 0, "text", "Two files."))
v.ev(content("msg_02", text("Two files.")))
v.ev(turn_end())

v = vector("tool_output",
           "Two commands run at once (a Codex turn: their tool_use contents carry no message id) "
           "and print: each output is a block keyed by its tool_use id (as its message id); the "
           "first tool's result drops its output and only that; a content event drops no output; "
           "the turn's end drops the rest.")
v.boot("run two")
v.ev(content("", tool_use("call_a", "Bash", {"command": "a"})))
v.ev(content("", tool_use("call_b", "Bash", {"command": "b"})))
A = dict(tool="Bash", tool_use_id="call_a")
BB = dict(tool="Bash", tool_use_id="call_b")
v.delta("call_a", 0, "output", "line2\n", B("call_a", 0, "output", "line2\n", **A), **A)
v.delta("call_b", 0, "output", "b1\n", B("call_a", 0, "output", "line2\n", **A),
        B("call_b", 0, "output", "b1\n", **BB), **BB)
v.delta("call_a", 0, "output", "line3\n", B("call_a", 0, "output", "line2\nline3\n", **A),
        B("call_b", 0, "output", "b1\n", **BB), **A)
v.ev(result("call_a", out="line1\nline2\nline3\n"), B("call_b", 0, "output", "b1\n", **BB))
v.ev(content("", tool_use("call_c", "Bash", {"command": "c"})),
     B("call_b", 0, "output", "b1\n", **BB))
v.ev(turn_end(interrupted=True))

v = vector("subagent",
           "A foreground subagent's message carries the Agent tool_use id as parent_tool_use_id; "
           "its content (with the same parent) supersedes it; the main thread's final answer is "
           "a block without a parent.")
v.boot("inspect the repo")
v.ev(content("msg_01", tool_use("toolu_ag", "Agent", {"description": "Inspect", "prompt": "look"})))
v.ev(result(text_="look", parent="toolu_ag"))
SUB = dict(parent="toolu_ag")
v.delta("msg_02", 0, "text", "Found", B("msg_02", 0, "text", "Found", **SUB), **SUB)
v.delta("msg_02", 0, "text", " a.txt", B("msg_02", 0, "text", "Found a.txt", **SUB), **SUB)
v.ev(content("msg_02", text("Found a.txt"), parent="toolu_ag"))
v.ev(result("toolu_ag", out="Found a.txt"))
v.delta("msg_03", 0, "text", "It found a.txt", B("msg_03", 0, "text", "It found a.txt"))
v.ev(content("msg_03", text("It found a.txt")))
v.ev(turn_end())

v = vector("content_of_other_message_keeps_blocks",
           "A background subagent and the main thread write at once: blocks show in order of "
           "first appearance, and a content event drops only the blocks of its own message.")
v.boot("start a background scan, then chat")
v.ev(content("msg_01", tool_use("toolu_bg", "Agent", {"description": "Scan", "prompt": "scan",
                                                      "run_in_background": True})))
v.ev(result("toolu_bg", out="Async agent launched"))
BG = dict(parent="toolu_bg")
v.delta("msg_02", 0, "text", "While it runs", B("msg_02", 0, "text", "While it runs"))
v.delta("msg_03", 0, "text", "Scanning", B("msg_02", 0, "text", "While it runs"),
        B("msg_03", 0, "text", "Scanning", **BG), **BG)
v.delta("msg_02", 0, "text", ",", B("msg_02", 0, "text", "While it runs,"),
        B("msg_03", 0, "text", "Scanning", **BG))
v.ev(content("msg_03", text("Scanning src/"), parent="toolu_bg"),
     B("msg_02", 0, "text", "While it runs,"))
v.delta("msg_02", 0, "text", " ask away.", B("msg_02", 0, "text", "While it runs, ask away."))
v.ev(content("msg_02", text("While it runs, ask away.")))
v.ev(turn_end())

v = vector("interrupted_turn",
           "The user stops a turn mid-answer: stop_requested and the interrupt marker change "
           "nothing, no content comes for the message, and turn_end drops its partial text.")
v.boot("count to ten")
v.delta("msg_01", 0, "text", "1, 2,", B("msg_01", 0, "text", "1, 2,"))
v.ev(stop_requested(), B("msg_01", 0, "text", "1, 2,"))
v.delta("msg_01", 0, "text", " 3,", B("msg_01", 0, "text", "1, 2, 3,"))
v.ev(result(text_="[Request interrupted by user]"), B("msg_01", 0, "text", "1, 2, 3,"))
v.ev(turn_end(interrupted=True))

v = vector("run_end_drops_all",
           "The CLI dies while a background subagent and the main thread are both thinking: "
           "run_end drops every block.")
v.boot("think hard")
v.ev(content("msg_01", tool_use("toolu_ag", "Agent", {"description": "Help", "prompt": "help",
                                                      "run_in_background": True})))
v.ev(result("toolu_ag", out="Async agent launched"))
v.delta("msg_02", 0, "thinking", "Hmm", B("msg_02", 0, "thinking", "Hmm", parent="toolu_ag"),
        parent="toolu_ag")
v.delta("msg_03", 0, "thinking", "Let me see", B("msg_02", 0, "thinking", "Hmm", parent="toolu_ag"),
        B("msg_03", 0, "thinking", "Let me see"))
v.ev(run_end("PROCESS_EXIT", signal="SIGKILL"))

v = vector("snapshot_replaces_stale_block",
           "The stream fell behind: a snapshot delta replaces the text the client holds for its "
           "block (not appended), a snapshot for a block not held creates it, and live deltas "
           "append to both.")
v.boot("go")
v.ev(content("msg_01", tool_use("toolu_ag", "Agent", {"description": "Help", "prompt": "help",
                                                      "run_in_background": True})))
v.ev(result("toolu_ag", out="Async agent launched"))
v.delta("msg_02", 0, "text", "Ste", B("msg_02", 0, "text", "Ste"))
v.delta("msg_02", 0, "text", "Steady as she", B("msg_02", 0, "text", "Steady as she"),
        snapshot=True)
v.delta("msg_03", 0, "text", "Reading", B("msg_02", 0, "text", "Steady as she"),
        B("msg_03", 0, "text", "Reading", parent="toolu_ag"), snapshot=True, parent="toolu_ag")
v.delta("msg_02", 0, "text", " goes.", B("msg_02", 0, "text", "Steady as she goes."),
        B("msg_03", 0, "text", "Reading", parent="toolu_ag"))
v.delta("msg_03", 0, "text", " files", B("msg_02", 0, "text", "Steady as she goes."),
        B("msg_03", 0, "text", "Reading files", parent="toolu_ag"), parent="toolu_ag")
v.ev(content("msg_02", text("Steady as she goes.")),
     B("msg_03", 0, "text", "Reading files", parent="toolu_ag"))
v.ev(turn_end())

v = vector("replay_reset_drops_all",
           "The server restarted and lost the tail (seqs 2 and 3), then recorded its run_end: "
           "the client's cursor is past the head, so the new stream's replay is a reset. Its "
           "header drops the partial text, the rebuilt log changes nothing, and nothing is being "
           "written.")
v.boot("hello")
v.delta("msg_01", 0, "text", "Hi", B("msg_01", 0, "text", "Hi"))
v.replay(0, 2, reset=True)
v.ev(run_start("hello"))
v.ev(run_end("SERVER_RESTART"))
v.caught_up()


def main():
    write_vectors(HERE, ALL)


if __name__ == "__main__":
    main()
