// A Codex session through the TypeScript client: SessionHandle.start with
// agent "codex" runs the real codex app-server against the fake's Responses
// API; the snapshot, GetSession and this port's derive name the agent.

import { describe, it } from "node:test";
import { harnessForSuite, oneAgentTurn } from "./agent-turn.ts";

const suite = harnessForSuite();

describe("a Codex session", () => {
  it("runs one turn: the answer, the agent on run_start, run_ready and Session, idle after turn_end", async () => {
    await oneAgentTurn(suite, { agent: "codex", answer: "ts codex turn", stays: "the codex app-server stays between turns" });
  });
});
