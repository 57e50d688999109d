// A Codex session through the TypeScript client: SessionHandle.start with
// agent "codex" runs the real codex app-server against the fake's Responses
// API; the snapshot, GetSession and this port's derive name the agent.

import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { SessionService, deriveSession, type Event } from "@agent-harness/client/protocol";
import { SessionHandle } from "@agent-harness/client/client";
import { eventually, startHarness, type Harness } from "./support.ts";

let h: Harness;
const opened: SessionHandle[] = [];

before(async () => {
  h = await startHarness();
});
after(async () => {
  for (const handle of opened) handle.close();
  await h?.close();
});

describe("a Codex session", () => {
  it("runs one turn: the answer, the agent on run_start, run_ready and Session, idle after turn_end", async () => {
    const sid = "ts-codex";
    const client = createClient(SessionService, createGrpcTransport({ baseUrl: h.url }));
    const handle = new SessionHandle(client, sid, { backoff: { initialMs: 100, maxMs: 1000 } });
    opened.push(handle);
    await eventually("caught up", handle.getSnapshot, (s) => s.hydrationPhase === "ready" && s.connected);
    await handle.start({ prompt: "TEXT ts codex turn", agent: "codex" });
    const done = await eventually(
      "turn end",
      handle.getSnapshot,
      (s) => s.events.some((e) => e.payload.case === "turnEnd") && s.status === "idle",
      60_000,
    );
    const of = <K extends Event["payload"]["case"]>(k: K) => done.events.find((e) => e.payload.case === k);
    const runStart = of("runStart");
    assert.ok(runStart?.payload.case === "runStart" && runStart.payload.value.agent === "codex", "run_start names codex");
    const ready = of("runReady");
    assert.ok(ready?.payload.case === "runReady" && ready.payload.value.agent === "codex", "run_ready names codex");
    const content = of("content");
    assert.ok(content?.payload.case === "content");
    assert.equal(content.payload.value.blocks.map((b) => b.text).join(""), "ts codex turn");
    const end = of("turnEnd");
    assert.ok(end?.payload.case === "turnEnd" && !end.payload.value.isError, "the turn ended without error");
    assert.equal(done.processAlive, true, "the codex app-server stays between turns");

    const server = (await client.getSession({ sessionId: sid })).session!;
    assert.equal(server.agent, "codex");
    assert.equal(deriveSession(sid, done.events).agent, "codex", "this port's derive names the agent");
    const listed = (await client.listSessions({})).sessions.find((s) => s.sessionId === sid);
    assert.equal(listed?.agent, "codex");
    handle.close();
  });
});
