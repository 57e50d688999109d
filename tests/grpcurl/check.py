"""Assertions on grpcurl's JSON output for tests/grpcurl/run.sh (stdlib only).

grpcurl prints each response message as one JSON object in proto3 canonical JSON (camelCase
names, 64-bit integers as strings); a stream's messages follow one another. Usage:

    check.py start FILE                 -> prints the run id
    check.py status FILE                -> prints "STATUS HEAD_SEQ"
    check.py subscribe FILE AFTER HEAD  -> asserts the replay/event/caughtUp stream
    check.py history FILE LIMIT HEAD    -> asserts one History page from the tail
    check.py deltas FILE                -> asserts the deltas of a Subscribe with include_deltas
    check.py context FILE               -> asserts GetContextUsage's figures add up
    check.py applied FILE APPLIED       -> asserts a Set* answer, prints the seq of its event
    check.py setting FILE SEQ SETTING VALUE APPLIED
                                        -> asserts a one-event History page: that setting_changed
    check.py settings FILE MODEL MODE THINKING
                                        -> asserts GetSession's model, permission mode, budget
    check.py turn FILE TEXT MODEL       -> asserts a History page holding one turn: its input_sent
                                           has TEXT, every answer came from MODEL; prints the
                                           input_sent's seq and the last content event's seq
    check.py codex FILE TEXT GET_FILE   -> asserts a History page of one Codex turn answering
                                           TEXT, and GetSession (GET_FILE) naming agent codex
    check.py agent FILE AGENT TEXT GET_FILE
                                        -> the same for a turn of AGENT (e.g. gemini over ACP)
    check.py agents FILE NAME:KIND[:default] ...
                                        -> asserts ListAgents lists exactly these agents, in order
    check.py rewind FILE PATH [SEQ]     -> asserts a RewindFiles answer restoring PATH (one line
                                           each way), recorded at SEQ (none: a dry run, seq 0)
"""

import json
import sys


def messages(path):
    text = open(path, encoding="utf-8").read()
    dec = json.JSONDecoder()
    out, i = [], 0
    while True:
        while i < len(text) and text[i].isspace():
            i += 1
        if i >= len(text) or text[i] != "{":
            break  # grpcurl's trailing "ERROR: ... DeadlineExceeded" for -max-time
        obj, i = dec.raw_decode(text, i)
        out.append(obj)
    return out


def fail(msg):
    print(f"FAIL: {msg}", file=sys.stderr)
    sys.exit(1)


def payload(ev):
    keys = [k for k in ev if k not in ("seq", "sessionId", "runId", "time", "cliLine")]
    return keys[0] if len(keys) == 1 else f"<{keys}>"


def check_deltas(msgs):
    """A Subscribe with include_deltas, open before a one-message answer started: several
    deltas of that message's text block 0, after caughtUp and before its content event, each
    with afterSeq = the last event seq printed before it, whose fragments join to the content's
    text exactly (the server sends a block's last fragments before its content event)."""
    last_seq, caught_up, deltas, content = 0, False, [], None
    for m in msgs:
        if "event" in m:
            last_seq = int(m["event"]["seq"])
            if "content" in m["event"] and any(b.get("text") for b in m["event"]["content"].get("blocks", [])):
                if content is not None:
                    fail(f"two content events with text: {content} and {m['event']}")
                content = m["event"]["content"]
        elif "caughtUp" in m:
            caught_up = True
        elif "delta" in m:
            d = m["delta"]
            if not caught_up:
                fail(f"a delta before caughtUp: {d}")
            if content is not None:
                fail(f"a delta after its content event: {d}")
            if int(d.get("afterSeq", "0")) != last_seq:
                fail(f"delta afterSeq {d.get('afterSeq')}, the last event printed before it is {last_seq}: {d}")
            deltas.append(d)
    if content is None:
        fail("no content event with text")
    text = "".join(b.get("text", "") for b in content["blocks"])
    if len(deltas) < 3:
        fail(f"{len(deltas)} deltas: the answer should arrive in several pieces")
    for d in deltas:
        if (d.get("messageId"), d.get("index", 0), d.get("blockType"), d.get("snapshot", False)) != (
            content.get("messageId"), 0, "DELTA_BLOCK_TYPE_TEXT", False,
        ):
            fail(f"delta {d}: want a fragment of block 0 (TEXT) of message {content.get('messageId')}")
    joined = "".join(d.get("fragment", "") for d in deltas)
    if joined != text:
        fail(f"fragments join to {joined!r}; the content text is {text!r}")
    print(json.dumps({"delta": deltas[0]}, indent=2))
    print(f"deltas ok: {len(deltas)} fragments join to {joined!r} (content {text!r})")


def check_context(msgs):
    """One GetContextUsage answer of a live session after a turn: tokens in use within the
    window, a "Messages" category, the categories of kind "used" adding up to
    totalTokens, and the CLI's own answer in raw (without its display grid)."""
    if len(msgs) != 1:
        fail(f"GetContextUsage output: {msgs}")
    u = msgs[0]
    total, window, raw_window = (int(u.get(k, 0)) for k in ("totalTokens", "maxTokens", "rawMaxTokens"))
    if not 0 < total < window <= raw_window:
        fail(f"figures: totalTokens {total}, maxTokens {window}, rawMaxTokens {raw_window}")
    cats = u.get("categories", [])
    if "Messages" not in [c.get("name") for c in cats]:
        fail(f"no Messages category: {cats}")
    used = sum(int(c.get("tokens", 0)) for c in cats if c.get("kind") == "used")
    if used != total:
        fail(f"the categories add up to {used}, totalTokens is {total}: {cats}")
    raw = u.get("raw", {})
    if raw.get("totalTokens") != total or "gridRows" in raw:
        fail(f"raw: totalTokens {raw.get('totalTokens')}, keys {sorted(raw)}")
    print(f"context ok: {total} of {window} tokens ({u.get('percentage', 0)}%) in {len(cats)} categories")


def check_turn(msgs, text, model):
    events = msgs[0].get("events", [])
    sent = [e for e in events if e.get("inputSent", {}).get("text") == text]
    if len(sent) != 1:
        fail(f"want one inputSent {text!r} in the page: {[payload(e) for e in events]}")
    if not sent[0]["inputSent"].get("messageUuid"):
        fail(f"inputSent without messageUuid: {sent[0]}")
    answers = [e for e in events if "content" in e]
    if not answers or any(e["content"].get("model") != model for e in answers):
        fail(f"answers from {[e['content'].get('model') for e in answers]}, want all from {model}")
    print(sent[0]["seq"], answers[-1]["seq"])


def check_rewind(msgs, path, seq):
    if len(msgs) != 1:
        fail(f"RewindFiles output: {msgs}")
    r = msgs[0]
    got = (r.get("filesChanged"), r.get("insertions"), r.get("deletions"), r.get("seq", "0"))
    if got != ([path], "1", "1", seq):
        fail(f"RewindFiles answered {r}, want filesChanged [{path}], insertions 1, deletions 1, seq {seq}")
    print(f"rewind ok: {r}")


def check_agent_turn(msgs, agent, text, get_path):
    """A History page of one turn of agent and the GetSession answer after it: runStart and
    runReady name the agent, the content is text, the turn ended without error, and the
    session (idle, process alive) names the agent too."""
    events = msgs[0].get("events", [])
    kinds = [payload(e) for e in events]
    by = {k: e[k] for e, k in zip(events, kinds)}
    for k in ("runStart", "runReady", "content", "turnEnd"):
        if k not in by:
            fail(f"no {k} in the {agent} log: {kinds}")
    if by["runStart"].get("agent") != agent or by["runReady"].get("agent") != agent:
        fail(f"runStart {by['runStart']}, runReady {by['runReady']}: want agent {agent} on both")
    got = "".join(b.get("text", "") for b in by["content"].get("blocks", []))
    if got != text:
        fail(f"{agent} answered {got!r}, want {text!r}")
    if by["turnEnd"].get("isError"):
        fail(f"the {agent} turn failed: {by['turnEnd']}")
    s = messages(get_path)[0]["session"]
    if s.get("agent") != agent or s.get("status") != "SESSION_STATUS_IDLE" or not s.get("processAlive"):
        fail(f"GetSession after the {agent} turn: {s}")
    print(f"{agent} ok:", " ".join(kinds))


def check_agents(msgs, wanted):
    """A ListAgents answer: exactly the agents NAME:KIND[:default], in that order."""
    got = [
        ":".join([a.get("name", ""), a.get("kind", "")] + (["default"] if a.get("isDefault") else []))
        for a in msgs[0].get("agents", [])
    ]
    if got != wanted:
        fail(f"ListAgents lists {got}, want {wanted}")
    print("agents ok:", " ".join(got))


def main():
    cmd, path = sys.argv[1], sys.argv[2]
    msgs = messages(path)
    if cmd == "start":
        if len(msgs) != 1 or not msgs[0].get("runId"):
            fail(f"Start output: {msgs}")
        print(msgs[0]["runId"])
    elif cmd == "status":
        s = msgs[0]["session"]
        print(s.get("status", "SESSION_STATUS_UNSPECIFIED"), int(s.get("headSeq", "0")))
    elif cmd == "subscribe":
        after, head = int(sys.argv[3]), int(sys.argv[4])
        if not msgs or "replay" not in msgs[0]:
            fail(f"first Subscribe message is not replay: {msgs[:1]}")
        replay = msgs[0]["replay"]
        if int(replay.get("fromSeq", "0")) != after or int(replay.get("headSeq", "0")) != head:
            fail(f"replay header {replay}, want fromSeq {after} headSeq {head}")
        events = [m["event"] for m in msgs if "event" in m]
        seqs = [int(e["seq"]) for e in events]
        if seqs != list(range(after + 1, head + 1)):
            fail(f"event seqs {seqs}, want {after + 1}..{head} without gap or duplicate")
        caught = [i for i, m in enumerate(msgs) if "caughtUp" in m]
        if len(caught) != 1 or int(msgs[caught[0]]["caughtUp"].get("headSeq", "0")) != head:
            fail(f"caughtUp messages at {caught}: want exactly one with headSeq {head}")
        if caught[0] != len(events) + 1:
            fail("caughtUp is not right after the replayed events")
        kinds = [payload(e) for e in events]
        if after == 0 and (kinds[:1] != ["runStart"] or "content" not in kinds or "turnEnd" not in kinds):
            fail(f"a finished turn's log should start with runStart and hold content and turnEnd: {kinds}")
        print("subscribe ok:", " ".join(f"{s}:{k}" for s, k in zip(seqs, kinds)))
    elif cmd == "history":
        limit, head = int(sys.argv[3]), int(sys.argv[4])
        page = msgs[0]
        seqs = [int(e["seq"]) for e in page.get("events", [])]
        if seqs != list(range(head - limit + 1, head + 1)):
            fail(f"History page seqs {seqs}, want the newest {limit} up to {head}, oldest first")
        if page.get("hasMore") is not True:
            fail(f"History hasMore {page.get('hasMore')}, want true")
        print("history ok:", seqs)
    elif cmd == "deltas":
        check_deltas(msgs)
    elif cmd == "context":
        check_context(msgs)
    elif cmd == "applied":
        if len(msgs) != 1 or msgs[0].get("applied") != sys.argv[3] or int(msgs[0].get("seq", "0")) <= 0:
            fail(f"answer {msgs}, want applied {sys.argv[3]} with the seq of its event")
        print(msgs[0]["seq"])
    elif cmd == "setting":
        seq, setting, value, applied = sys.argv[3:7]
        events = msgs[0].get("events", [])
        want = {"setting": setting, "value": value, "applied": applied}
        if len(events) != 1 or events[0]["seq"] != seq or events[0].get("settingChanged") != want:
            fail(f"History page {events}, want event {seq} settingChanged {want}")
        print(f"setting ok: {seq} {want}")
    elif cmd == "settings":
        s = msgs[0]["session"]
        got = (s.get("model"), s.get("permissionMode"), str(s.get("maxThinkingTokens")))
        if got != tuple(sys.argv[3:6]):
            fail(f"GetSession model, permissionMode, maxThinkingTokens {got}, want {tuple(sys.argv[3:6])}")
        print(f"settings ok: {got}")
    elif cmd == "turn":
        check_turn(msgs, sys.argv[3], sys.argv[4])
    elif cmd == "codex":
        check_agent_turn(msgs, "codex", sys.argv[3], sys.argv[4])
    elif cmd == "agent":
        check_agent_turn(msgs, sys.argv[3], sys.argv[4], sys.argv[5])
    elif cmd == "agents":
        check_agents(msgs, sys.argv[3:])
    elif cmd == "rewind":
        check_rewind(msgs, sys.argv[3], sys.argv[4] if len(sys.argv) > 4 else "0")
    else:
        fail(f"unknown command {cmd}")


if __name__ == "__main__":
    main()
