"""Starts an agent-harness session and prints its first answer, following the session's log
from the start. The Python example of docs/clients.md; test_example.py runs it against a real
server.

    python example.py [ADDR] [SESSION_ID] [PROMPT]
"""

import sys
import time
import uuid

import grpc
from agentharness.v1 import events_pb2, session_service_pb2 as pb, session_service_pb2_grpc


def retry(call, request, metadata, tries=4):
    """Calls again while the call fails with UNAVAILABLE. The request, and so its
    idempotency_key, stays the same: a call that did land is answered with its first response."""
    for attempt in range(tries):
        try:
            return call(request, timeout=30, metadata=metadata)
        except grpc.RpcError as e:
            if e.code() != grpc.StatusCode.UNAVAILABLE or attempt == tries - 1:
                raise
            time.sleep(0.2 * 2**attempt)


defaults = ["127.0.0.1:50051", "demo", "Hello"]
addr, session, prompt = sys.argv[1:4] + defaults[len(sys.argv[1:4]) :]

# Every call names its session in x-session-id, so a balancer in front of several nodes sends
# all of the session's calls alike (the server refuses a header that disagrees with session_id).
routed = [("x-session-id", session)]

with grpc.insecure_channel(addr) as channel:
    client = session_service_pb2_grpc.SessionServiceStub(channel)
    # One fresh key per logical call, reused on its retries.
    start = pb.StartRequest(
        session_id=session, config=events_pb2.StartConfig(prompt=prompt), idempotency_key=uuid.uuid4().hex
    )
    retry(client.Start, start, routed)
    # after_seq=0: the whole log, then live. Keep the last seq you saw to resume later.
    for msg in client.Subscribe(pb.SubscribeRequest(session_id=session, after_seq=0), metadata=routed):
        if msg.WhichOneof("kind") != "event":
            continue  # the replay header, caught_up and heartbeats
        event = msg.event
        if event.HasField("truncated"):
            # Too large to stream whole (over the server's --max-event-bytes): it came cut
            # down, and the server keeps the whole event. Fetch it in chunks.
            chunks = client.ReadFullEvent(
                pb.ReadFullEventRequest(session_id=session, seq=event.seq, part=pb.FULL_EVENT_PART_EVENT),
                metadata=routed,
            )
            event = events_pb2.Event.FromString(b"".join(c.chunk for c in chunks))
        if event.WhichOneof("payload") == "content":
            print("".join(block.text for block in event.content.blocks), end="")
        elif event.WhichOneof("payload") == "turn_end":
            print()
            break
