// Starts an agent-harness session and prints its first answer, following the session's log
// from the start, over grpc-web (what a browser uses; there, take createGrpcWebTransport from
// @connectrpc/connect-web). The TypeScript example of docs/clients.md; full-event.test.ts
// runs it against a real server.
//
//   node --import tsx example.ts [BASE_URL] [SESSION_ID] [PROMPT]

import { createClient } from "@connectrpc/connect";
import { createGrpcWebTransport } from "@connectrpc/connect-node";
import { FullEventPart, SessionService } from "@agent-harness/client/protocol";
import { SESSION_HEADER, readFullEvent } from "@agent-harness/client/client";

const [baseUrl = "http://127.0.0.1:50051", sessionId = "demo", prompt = "Hello"] = process.argv.slice(2);
const client = createClient(SessionService, createGrpcWebTransport({ baseUrl, httpVersion: "1.1" }));

// Every call names its session in x-session-id too: a balancer in front of several nodes routes
// by it (readFullEvent adds it itself; a SessionHandle does for all its calls).
const routed = { headers: { [SESSION_HEADER]: sessionId } };

await client.start({ sessionId, config: { prompt } }, routed);
// afterSeq 0: the whole log, then live. Keep the last seq you saw to resume later.
for await (const msg of client.subscribe({ sessionId, afterSeq: 0n }, routed)) {
  if (msg.kind.case !== "event") continue; // the replay header, caughtUp and heartbeats
  let event = msg.kind.value;
  if (event.truncated) {
    // Too large to stream whole (over the server's --max-event-bytes): it came cut
    // down, and the server keeps the whole event. Fetch it in chunks.
    event = await readFullEvent(client, sessionId, event.seq, FullEventPart.EVENT);
  }
  if (event.payload.case === "content") {
    process.stdout.write(event.payload.value.blocks.map((b) => b.text).join(""));
  } else if (event.payload.case === "turnEnd") {
    process.stdout.write("\n");
    break;
  }
}
