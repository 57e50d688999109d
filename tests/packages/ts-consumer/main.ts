// The program tests/packages/run.sh type-checks (strict, nodenext) and runs in a fresh npm
// project that installed the packed @agent-harness/client tarball, importing it the way the
// README shows: Starts a session on a real server through a SessionHandle, waits until the
// handle's derived status says the turn is over, and checks the answer text. Exits non-zero
// on any mismatch or after 90 s.
//
//   node dist/main.js BASE_URL SESSION_ID PROMPT WANT

import { createGrpcTransport } from "@connectrpc/connect-node";
import { createSessionHandle, type SessionSnapshot } from "@agent-harness/client/client";
import { deriveStatus, type Event } from "@agent-harness/client/protocol";

const [baseUrl, sessionId, prompt, want] = process.argv.slice(2);
if (!baseUrl || !sessionId || !prompt || want === undefined) {
  throw new Error("usage: main.js BASE_URL SESSION_ID PROMPT WANT");
}

/** The answer: the text of every content event's blocks, in log order. */
function answerOf(events: readonly Event[]): string {
  return events
    .flatMap((e) => (e.payload.case === "content" ? e.payload.value.blocks.map((b) => b.text) : []))
    .join("")
    .trim();
}

const h = createSessionHandle(createGrpcTransport({ baseUrl }), sessionId);
try {
  // Resolves with the first snapshot holding a turn_end whose derived status is idle.
  const ended = new Promise<SessionSnapshot>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no idle turn end within 90 s: ${describe(h.getSnapshot())}`)), 90_000);
    const check = (s: SessionSnapshot) => {
      if (s.status === "idle" && s.events.some((e) => e.payload.case === "turnEnd")) {
        clearTimeout(timer);
        resolve(s);
      }
    };
    h.subscribe(check);
    check(h.getSnapshot());
  });
  await h.start({ prompt });
  const s = await ended;
  const answer = answerOf(s.events);
  // The package's own derive function over the same events agrees with the handle.
  const derived = deriveStatus(s.events);
  if (answer !== want || derived !== "idle") {
    throw new Error(`answer ${JSON.stringify(answer)} (want ${JSON.stringify(want)}), deriveStatus ${derived}: ${describe(s)}`);
  }
  console.log(`status: ${s.status}`);
  console.log(`answer: ${answer}`);
} finally {
  h.close();
}

function describe(s: SessionSnapshot): string {
  return `status ${s.status}, lastSeq ${s.lastSeq}, events ${s.events.map((e) => e.payload.case).join(",")}, error ${s.error?.message ?? "none"}`;
}
