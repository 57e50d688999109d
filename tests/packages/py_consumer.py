"""The program tests/packages/run.sh runs in a fresh venv holding only the agent-harness-client-gen
wheel (and what pip installed for it): Starts a session on a real server, Subscribes from the
start of its log until turn_end, and checks that the answer is the expected text. Exits
non-zero on any mismatch.

    python py_consumer.py ADDR SESSION_ID PROMPT WANT
"""

import pathlib
import sys
import uuid

import agentharness
import grpc
from agentharness.v1 import events_pb2, session_service_pb2 as pb, session_service_pb2_grpc

addr, session, prompt, want = sys.argv[1:5]
routed = [("x-session-id", session)]

with grpc.insecure_channel(addr) as channel:
    client = session_service_pb2_grpc.SessionServiceStub(channel)
    client.Start(
        pb.StartRequest(session_id=session, config=events_pb2.StartConfig(prompt=prompt), idempotency_key=uuid.uuid4().hex),
        timeout=30,
        metadata=routed,
    )
    text = []
    for msg in client.Subscribe(pb.SubscribeRequest(session_id=session, after_seq=0), timeout=90, metadata=routed):
        if msg.WhichOneof("kind") != "event":
            continue
        if msg.event.WhichOneof("payload") == "content":
            text.extend(block.text for block in msg.event.content.blocks)
        elif msg.event.WhichOneof("payload") == "turn_end":
            if msg.event.turn_end.is_error:
                sys.exit(f"py_consumer: the turn ended in an error (answer {''.join(text)!r})")
            break
    else:
        sys.exit(f"py_consumer: the stream ended before turn_end (answer {''.join(text)!r})")

answer = "".join(text).strip()
if answer != want:
    sys.exit(f"py_consumer: answer {answer!r}, want {want!r}")
print(f"agentharness from {pathlib.Path(agentharness.__file__).parent}")
print(f"answer: {answer}")
