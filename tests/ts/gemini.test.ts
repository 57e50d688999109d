// A Gemini session through the TypeScript client: SessionHandle.start with
// agent "gemini" runs the real Gemini CLI over the Agent Client Protocol
// (the server's --acp-agent) against the fake's Gemini API; the snapshot,
// GetSession and this port's derive name the agent; ListAgents lists it.

import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { SessionService, deriveSession, vocab, type Event } from "@agent-harness/client/protocol";
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

describe("a Gemini session", () => {
  it("ListAgents lists claude (the default), codex and gemini with their kinds", async () => {
    const client = createClient(SessionService, createGrpcTransport({ baseUrl: h.url }));
    const { agents } = await client.listAgents({});
    assert.deepEqual(
      agents.map((a) => [a.name, a.kind, a.isDefault]),
      [
        [vocab.agent.CLAUDE, vocab.agentKind.CLAUDE, true],
        [vocab.agent.CODEX, vocab.agentKind.CODEX, false],
        ["gemini", vocab.agentKind.ACP, false],
      ],
    );
  });

  it("runs one turn: the answer, the agent on run_start, run_ready and Session, idle after turn_end", async () => {
    const sid = "ts-gemini";
    const client = createClient(SessionService, createGrpcTransport({ baseUrl: h.url }));
    const handle = new SessionHandle(client, sid, { backoff: { initialMs: 100, maxMs: 1000 } });
    opened.push(handle);
    await eventually("caught up", handle.getSnapshot, (s) => s.hydrationPhase === "ready" && s.connected);
    await handle.start({ prompt: "TEXT ts gemini turn", agent: "gemini" });
    const done = await eventually(
      "turn end",
      handle.getSnapshot,
      (s) => s.events.some((e) => e.payload.case === "turnEnd") && s.status === "idle",
      60_000,
    );
    const of = <K extends Event["payload"]["case"]>(k: K) => done.events.find((e) => e.payload.case === k);
    const runStart = of("runStart");
    assert.ok(runStart?.payload.case === "runStart" && runStart.payload.value.agent === "gemini", "run_start names gemini");
    const ready = of("runReady");
    assert.ok(
      ready?.payload.case === "runReady" && ready.payload.value.agent === "gemini" && ready.payload.value.resumeId !== "",
      "run_ready names gemini and its ACP session",
    );
    const content = of("content");
    assert.ok(content?.payload.case === "content");
    assert.equal(content.payload.value.blocks.map((b) => b.text).join(""), "ts gemini turn");
    const end = of("turnEnd");
    assert.ok(end?.payload.case === "turnEnd" && !end.payload.value.isError, "the turn ended without error");
    assert.equal(done.processAlive, true, "the ACP agent stays between turns");

    const server = (await client.getSession({ sessionId: sid })).session!;
    assert.equal(server.agent, "gemini");
    assert.equal(deriveSession(sid, done.events).agent, "gemini", "this port's derive names the agent");
    const listed = (await client.listSessions({})).sessions.find((s) => s.sessionId === sid);
    assert.equal(listed?.agent, "gemini");
    handle.close();
  });
});
