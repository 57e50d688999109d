// A Gemini session through the TypeScript client: SessionHandle.start with
// agent "gemini" runs the real Gemini CLI over the Agent Client Protocol
// (the server's --acp-agent) against the fake's Gemini API; the snapshot,
// GetSession and this port's derive name the agent; ListAgents lists it.

import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { vocab } from "@agent-harness/client/protocol";
import { harnessForSuite, oneAgentTurn } from "./agent-turn.ts";

const suite = harnessForSuite();

describe("a Gemini session", () => {
  it("ListAgents lists claude (the default), codex and gemini with their kinds", async () => {
    const { agents } = await suite.client().listAgents({});
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
    await oneAgentTurn(suite, {
      agent: "gemini",
      answer: "ts gemini turn",
      stays: "the ACP agent stays between turns",
      resumeId: true,
    });
  });
});
