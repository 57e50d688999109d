// Runs every derive conformance vector (tests/vectors/*.json) against the
// TypeScript port. Each vector's events are proto3 canonical JSON, parsed
// with the generated EventSchema; each checkpoint names the number of events
// applied ("after") and the expected derived values.
//
// Matching (tests/vectors/README.md): inside objects and list items only
// the keys a vector gives are compared, list lengths always; costUsd within
// 1e-9 relative; pendingPermissions and pendingMessages as request ids and
// texts; turns as [startSeq, endSeq, eventCount].

import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { fromJson, type JsonValue } from "@bufbuild/protobuf";
import {
  EventSchema,
  deriveAll,
  groupEvents,
  subagentChildren,
  type Derived,
  type Event,
} from "@agent-harness/client/protocol";
import { ROOT } from "./support.ts";

const DIR = join(ROOT, "tests/vectors");
const files = readdirSync(DIR)
  .filter((f) => f.endsWith(".json"))
  .sort();

interface Checkpoint {
  after: number;
  [field: string]: JsonValue;
}
interface Vector {
  name: string;
  description: string;
  events: JsonValue[];
  expect: Checkpoint[];
}

/** Fields this port derives, as the vectors spell them, to comparable JSON. */
const FIELDS: Record<string, (d: Derived, events: Event[]) => JsonValue> = {
  status: (d) => d.status,
  processAlive: (d) => d.processAlive,
  turnInProgress: (d) => d.turnInProgress,
  headSeq: (d) => Number(d.headSeq),
  runId: (d) => d.runId ?? null,
  resumeId: (d) => d.resumeId ?? null,
  usage: (d) => ({ ...d.usage }),
  activity: (d) => ({ kind: d.activity.kind, toolName: d.activity.toolName ?? null, label: d.activity.label }),
  hasRunningBackgroundTasks: (d) => d.hasRunningBackgroundTasks,
  backgroundTasks: (d) =>
    d.backgroundTasks.map((t) => ({
      ...t,
      startedSeq: Number(t.startedSeq),
      endedSeq: t.endedSeq === undefined ? null : Number(t.endedSeq),
    })),
  pendingPermissions: (d) => d.pendingPermissions.map((p) => p.requestId),
  pendingMessages: (d) => d.pendingMessages.map((m) => m.text),
  planOutcomes: (d) =>
    d.planOutcomes.map((p) => ({
      ...p,
      seq: Number(p.seq),
      decidedSeq: p.decidedSeq === undefined ? null : Number(p.decidedSeq),
    })),
  scheduledWakeup: (d) => {
    const w = d.scheduledWakeup;
    if (!w) return null;
    const out: Record<string, JsonValue> = {};
    for (const [k, v] of Object.entries(w)) out[k] = v === undefined ? null : typeof v === "bigint" ? Number(v) : v;
    return out;
  },
  turns: (_d, events) =>
    groupEvents(events).map((t) => [
      t.start ? Number(t.start.seq) : null,
      t.end ? Number(t.end.seq) : null,
      t.events.length,
    ]),
  subagentChildren: (_d, events) =>
    Object.fromEntries([...subagentChildren(events)].map(([k, v]) => [k, v.map((e) => Number(e.seq))])),
};

/** Checkpoint fields seen in the vectors that this port does not derive. */
const skipped = new Map<string, number>();
let checkpoints = 0;
let comparisons = 0;
let vectorsChecked = 0;

const isObject = (v: JsonValue): v is Record<string, JsonValue> =>
  typeof v === "object" && v !== null && !Array.isArray(v);

/**
 * The vectors' rule: inside objects and list items only the keys given are
 * compared (list lengths always are). Keeps just those keys of `actual`
 * (missing ones as undefined, so they fail), recursively.
 */
function pick(actual: JsonValue, expected: JsonValue): JsonValue {
  if (Array.isArray(expected) && Array.isArray(actual)) {
    return actual.map((a, i) => (i < expected.length ? pick(a, expected[i]!) : a));
  }
  if (isObject(expected) && isObject(actual)) {
    return Object.fromEntries(Object.keys(expected).map((k) => [k, k in actual ? pick(actual[k]!, expected[k]!) : undefined])) as JsonValue;
  }
  return actual;
}

/**
 * Cost is a sum of f64s: the port may differ from the vector in the last
 * bits (0.000423 vs 0.00042300000000000004). Equal within 1e-9 relative
 * counts as equal; anything else is compared (and fails) as is.
 */
function withCostWithinTolerance(got: JsonValue, want: JsonValue): JsonValue {
  const g = got as Record<string, JsonValue>;
  const w = want as Record<string, JsonValue> | null;
  if (w && typeof g.costUsd === "number" && typeof w.costUsd === "number") {
    if (Math.abs(g.costUsd - w.costUsd) <= 1e-9 * Math.max(1, Math.abs(w.costUsd))) return { ...g, costUsd: w.costUsd };
  }
  return got;
}

describe("derive conformance vectors", () => {
  it("finds the vectors", () => {
    assert.ok(files.length > 0, `no vectors in ${DIR}`);
  });

  for (const file of files) {
    it(file, () => {
      const v = JSON.parse(readFileSync(join(DIR, file), "utf8")) as Vector;
      const events: Event[] = v.events.map((j) => fromJson(EventSchema, j));
      assert.ok(v.expect.length > 0, "a vector without checkpoints proves nothing");
      for (const cp of v.expect) {
        checkpoints++;
        const prefix = events.slice(0, cp.after);
        const d = deriveAll(prefix);
        for (const [field, want] of Object.entries(cp)) {
          if (field === "after") continue;
          const get = FIELDS[field];
          if (!get) {
            skipped.set(field, (skipped.get(field) ?? 0) + 1);
            continue;
          }
          let got = pick(get(d, prefix), want);
          if (field === "usage") got = withCostWithinTolerance(got, want);
          comparisons++;
          assert.deepEqual(got, want, `${v.name} after ${cp.after} event(s): ${field}\n  ${v.description}`);
        }
      }
      vectorsChecked++;
    });
  }

  it("checked every vector file", () => {
    assert.equal(vectorsChecked, files.length, `${vectorsChecked} of ${files.length} vector files agree`);
  });

  after(() => {
    const skip = [...skipped].map(([f, n]) => `${f} (${n})`).join(", ") || "none";
    console.log(
      `vectors: ${vectorsChecked}/${files.length} files agree; ${checkpoints} checkpoints, ` +
        `${comparisons} field comparisons; fields not derived by this port: ${skip}`,
    );
  });
});
