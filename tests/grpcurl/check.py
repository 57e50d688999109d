"""Assertions on grpcurl's JSON output for tests/grpcurl/run.sh (stdlib only).

grpcurl prints each response message as one JSON object in proto3 canonical JSON (camelCase
names, 64-bit integers as strings); a stream's messages follow one another. Usage:

    check.py start FILE                 -> prints the run id
    check.py status FILE                -> prints "STATUS HEAD_SEQ"
    check.py subscribe FILE AFTER HEAD  -> asserts the replay/event/caughtUp stream
    check.py history FILE LIMIT HEAD    -> asserts one History page from the tail
    check.py deltas FILE                -> asserts the deltas of a Subscribe with include_deltas
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
    else:
        fail(f"unknown command {cmd}")


if __name__ == "__main__":
    main()
