// What the suites of agents other than claude share: a harness for the
// suite, and one turn through the TypeScript client (SessionHandle.start with
// the agent's name, then the answer, the agent named on run_start,
// run_ready, Session, ListSessions and this port's derive, and the session
// idle after turn_end with its process kept for the next turn).

import assert from "node:assert/strict";
import { after, before } from "node:test";
import { createClient, type Client } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { SessionService, deriveSession, type Event } from "@agent-harness/client/protocol";
import { SessionHandle } from "@agent-harness/client/client";
import { eventually, startHarness, type Harness } from "./support.ts";

/** The suite's harness: started before its tests, closed after them with every handle opened. */
export interface Suite {
  client(): Client<typeof SessionService>;
  opened: SessionHandle[];
}

export function harnessForSuite(): Suite {
  let h: Harness | undefined;
  const opened: SessionHandle[] = [];
  before(async () => {
    h = await startHarness();
  });
  after(async () => {
    for (const handle of opened) handle.close();
    await h?.close();
  });
  return {
    client: () => createClient(SessionService, createGrpcTransport({ baseUrl: h!.url })),
    opened,
  };
}

export interface AgentTurn {
  /** The agent's name on the server (--acp-agent for an ACP agent). */
  agent: string;
  /** The text the fake answers (the prompt is `TEXT <answer>`). */
  answer: string;
  /** Why the process stays between turns, as the assertion's message. */
  stays: string;
  /** Whether run_ready carries the agent's own session id. */
  resumeId?: boolean;
}

/** Runs one turn on session `ts-<agent>`. */
export async function oneAgentTurn(suite: Suite, t: AgentTurn): Promise<void> {
  const sid = `ts-${t.agent}`;
  const client = suite.client();
  const handle = new SessionHandle(client, sid, { backoff: { initialMs: 100, maxMs: 1000 } });
  suite.opened.push(handle);
  await eventually("caught up", handle.getSnapshot, (s) => s.hydrationPhase === "ready" && s.connected);
  await handle.start({ prompt: `TEXT ${t.answer}`, agent: t.agent });
  const done = await eventually(
    "turn end",
    handle.getSnapshot,
    (s) => s.events.some((e) => e.payload.case === "turnEnd") && s.status === "idle",
    60_000,
  );
  const of = <K extends Event["payload"]["case"]>(k: K) => done.events.find((e) => e.payload.case === k);
  const runStart = of("runStart");
  assert.ok(
    runStart?.payload.case === "runStart" && runStart.payload.value.agent === t.agent,
    `run_start names ${t.agent}`,
  );
  const ready = of("runReady");
  assert.ok(ready?.payload.case === "runReady" && ready.payload.value.agent === t.agent, `run_ready names ${t.agent}`);
  if (t.resumeId) {
    assert.notEqual(ready.payload.value.resumeId, "", `run_ready names ${t.agent}'s session`);
  }
  const content = of("content");
  assert.ok(content?.payload.case === "content");
  assert.equal(content.payload.value.blocks.map((b) => b.text).join(""), t.answer);
  const end = of("turnEnd");
  assert.ok(end?.payload.case === "turnEnd" && !end.payload.value.isError, "the turn ended without error");
  assert.equal(done.processAlive, true, t.stays);

  const server = (await client.getSession({ sessionId: sid })).session!;
  assert.equal(server.agent, t.agent);
  assert.equal(deriveSession(sid, done.events).agent, t.agent, "this port's derive names the agent");
  const listed = (await client.listSessions({})).sessions.find((s) => s.sessionId === sid);
  assert.equal(listed?.agent, t.agent);
  handle.close();
}
