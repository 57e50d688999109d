// Honest status from the TypeScript client's pure parts: the live activity
// (live.ts: the derived activity refined by live typing), the typing a
// broken stream left behind (unrecorded.ts), and the connection facts
// (connection.ts) a UI reads to say a status is unknown.

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import { create, fromJson, type JsonValue, type MessageInitShape } from "@bufbuild/protobuf";
import {
  DeltaBlockType,
  EMPTY_PARTIAL,
  EventSchema,
  NO_UNRECORDED,
  RunEndReason,
  SubscribeResponseSchema,
  activityOf,
  applyPartial,
  applyUnrecorded,
  liveActivity,
  unrecordedNote,
  unrecordedText,
  type PartialMessage,
  type SubscribeResponse,
  type ActivityKind,
  type Unrecorded,
} from "@agent-harness/client/protocol";
import { connectionHeard, connectionTo, initialConnection, statusKnown } from "@agent-harness/client/client";
import { ROOT } from "./support.ts";

const delta = (messageId: string, blockType: DeltaBlockType, fragment: string, more: { toolName?: string; parentToolUseId?: string; index?: number; snapshot?: boolean } = {}): SubscribeResponse =>
  create(SubscribeResponseSchema, {
    kind: {
      case: "delta",
      value: { messageId, index: more.index ?? 0, blockType, fragment, toolName: more.toolName ?? "", parentToolUseId: more.parentToolUseId ?? "", snapshot: more.snapshot ?? false },
    },
  });

type Payload = MessageInitShape<typeof EventSchema>["payload"];
const event = (seq: number, payload: Payload): SubscribeResponse =>
  create(SubscribeResponseSchema, { kind: { case: "event", value: create(EventSchema, { seq: BigInt(seq), payload }) } });
const replay = (): SubscribeResponse => create(SubscribeResponseSchema, { kind: { case: "replay", value: {} } });

const fold = (msgs: SubscribeResponse[]): PartialMessage => msgs.reduce(applyPartial, EMPTY_PARTIAL);

describe("live activity vectors (tests/vectors/live/activity.json, shared with the Rust client)", () => {
  interface Case {
    name: string;
    derived: { kind: ActivityKind; toolName: string | null };
    steps: JsonValue[];
    expect: { kind: string; toolName: string | null; label: string };
  }
  const doc = JSON.parse(readFileSync(join(ROOT, "tests/vectors/live/activity.json"), "utf8")) as { cases: Case[] };
  it("has its cases", () => assert.ok(doc.cases.length >= 10));
  for (const c of doc.cases) {
    it(c.name, () => {
      const partial = c.steps.map((j) => fromJson(SubscribeResponseSchema, j)).reduce(applyPartial, EMPTY_PARTIAL);
      const got = liveActivity(activityOf(c.derived.kind, c.derived.toolName ?? undefined), partial);
      assert.deepEqual({ kind: got.kind, toolName: got.toolName ?? null, label: got.label }, c.expect);
    });
  }
});

describe("liveActivity", () => {
  const thinking = activityOf("thinking");

  it("is the derived activity when nothing is being written", () => {
    assert.equal(liveActivity(thinking, EMPTY_PARTIAL), thinking);
  });

  it("says Writing while answer text streams, Thinking while thinking streams", () => {
    const writing = liveActivity(thinking, fold([delta("m1", DeltaBlockType.TEXT, "Hel")]));
    assert.equal(writing.kind, "writing");
    assert.equal(writing.label, "Writing");
    const think = liveActivity(activityOf("writing"), fold([delta("m1", DeltaBlockType.THINKING, "hmm")]));
    assert.equal(think.label, "Thinking");
  });

  it("says Running <tool> while a tool's input streams, and while its output does", () => {
    const input = liveActivity(thinking, fold([delta("m1", DeltaBlockType.TOOL_INPUT, '{"comm', { toolName: "Bash" })]));
    assert.deepEqual([input.kind, input.label], ["running_tool", "Running Bash"]);
    // An output block may not name its tool: the log's tool_use does.
    const running = activityOf("running_tool", "Bash");
    assert.equal(liveActivity(running, fold([delta("toolu_1", DeltaBlockType.TOOL_OUTPUT, "line\n")])), running);
  });

  it("follows the newest main-thread block, never a subagent's", () => {
    const p = fold([
      delta("m1", DeltaBlockType.TEXT, "Let me check."),
      delta("m2", DeltaBlockType.THINKING, "sub thinks", { parentToolUseId: "toolu_agent" }),
    ]);
    assert.equal(liveActivity(thinking, p).label, "Writing");
    const q = fold([delta("m1", DeltaBlockType.THINKING, "first"), delta("m2", DeltaBlockType.TEXT, "then")]);
    assert.equal(liveActivity(thinking, q).label, "Writing");
  });

  it("leaves the log's facts alone: idle, starting, stopping, a permission prompt", () => {
    const p = fold([delta("m1", DeltaBlockType.TEXT, "x")]);
    for (const a of [activityOf("idle"), activityOf("starting"), activityOf("stopping"), activityOf("waiting_for_permission", "Write")]) {
      assert.equal(liveActivity(a, p), a);
    }
  });

  it("returns the derived object when it already agrees", () => {
    const writing = activityOf("writing");
    assert.equal(liveActivity(writing, fold([delta("m1", DeltaBlockType.TEXT, "x")])), writing);
  });
});

describe("unrecorded typing", () => {
  /** Feeds both folds the way the session handle does. */
  function run(msgs: SubscribeResponse[]): { partial: PartialMessage; u: Unrecorded; seen: Unrecorded[] } {
    let partial: PartialMessage = EMPTY_PARTIAL;
    let u: Unrecorded = NO_UNRECORDED;
    const seen: Unrecorded[] = [];
    for (const m of msgs) {
      u = applyUnrecorded(u, partial, m);
      partial = applyPartial(partial, m);
      seen.push(u);
    }
    return { partial, u, seen };
  }
  const typed = [delta("m1", DeltaBlockType.TEXT, "tick 0 "), delta("m1", DeltaBlockType.TEXT, "tick 1 ")];
  const restartEnd = event(9, { case: "runEnd", value: { reason: RunEndReason.SERVER_RESTART, inferred: true } });

  it("a server restart mid-answer: the text seen is kept as not recorded (server restarted)", () => {
    const { u, partial } = run([...typed, replay(), restartEnd]);
    assert.equal(partial.blocks.length, 0);
    assert.equal(unrecordedText(u), "tick 0 tick 1 ");
    assert.equal(unrecordedNote(u), "not recorded (server restarted)");
    assert.equal(u.pending.length, 0);
  });

  it("is replaced by the next input, or a new run", () => {
    for (const next of [event(10, { case: "inputSent", value: {} }), event(10, { case: "runStart", value: {} })]) {
      const { u } = run([...typed, replay(), restartEnd, next]);
      assert.equal(u, NO_UNRECORDED);
    }
  });

  it("a reconnect while the run lives: the server's snapshot restores it, nothing is lost", () => {
    const { u, partial } = run([...typed, replay(), delta("m1", DeltaBlockType.TEXT, "tick 0 tick 1 tick 2 ", { snapshot: true })]);
    assert.equal(u, NO_UNRECORDED);
    assert.equal(partial.blocks[0]!.text, "tick 0 tick 1 tick 2 ");
  });

  it("recorded while the stream was down: the replayed content drops it", () => {
    const content = event(8, { case: "content", value: { messageId: "m1" } });
    const { u } = run([...typed, replay(), content, event(9, { case: "turnEnd", value: {} })]);
    assert.equal(u, NO_UNRECORDED);
  });

  it("a turn that ended without it (a stop) leaves it not recorded", () => {
    const { u } = run([...typed, replay(), event(9, { case: "turnEnd", value: {} })]);
    assert.equal(unrecordedText(u), "tick 0 tick 1 ");
    assert.equal(unrecordedNote(u), "not recorded");
  });

  it("changes nothing without a broken stream, and keeps its identity when nothing changes", () => {
    const { seen } = run([...typed, event(8, { case: "content", value: { messageId: "m1" } }), event(9, { case: "turnEnd", value: {} })]);
    assert.ok(seen.every((u) => u === NO_UNRECORDED));
    const lost = run([...typed, replay(), restartEnd]).u;
    assert.equal(applyUnrecorded(lost, EMPTY_PARTIAL, event(11, { case: "turnEnd", value: {} })), lost);
  });
});

describe("connection", () => {
  it("is live only once caught up, and remembers when it stopped being live", () => {
    let c = initialConnection(1000);
    assert.equal(statusKnown(c), false);
    assert.equal(c.lastLiveAt, undefined, "never live: nothing known");
    c = connectionTo(c, "replaying", 1100);
    assert.equal(statusKnown(c), false);
    c = connectionTo(c, "live", 1200);
    assert.ok(statusKnown(c));
    assert.equal(c.since, 1200);
    c = connectionHeard(c, 1300);
    assert.equal(c.lastEventAt, 1300);
    c = connectionTo(c, "down", 5000);
    assert.deepEqual([c.state, c.since, c.lastLiveAt, c.lastEventAt], ["down", 5000, 5000, 1300]);
    assert.equal(connectionTo(c, "down", 6000), c, "the same state: the same object, `since` kept");
    c = connectionTo(connectionTo(c, "replaying", 7000), "down", 8000);
    assert.equal(c.lastLiveAt, 5000, "a failed replay does not make the old state newer");
    c = connectionTo(c, "live", 9000);
    assert.equal(c.lastLiveAt, undefined);
  });
});
