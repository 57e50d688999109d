// Runs every derive conformance vector (tests/vectors/*.json) against the
// TypeScript port. Each vector's events are proto3 canonical JSON, parsed
// with the generated EventSchema; each checkpoint names the number of events
// applied ("after") and the expected derived values.
//
// Twice: the O(n) functions over each prefix, and the incremental Fold fed
// one event at a time. The Fold must equal the O(n) functions after every
// event (every getter, the snapshot, the GetSession summary), match the
// expected values at every checkpoint, hand out a new object whenever a
// value changes, and never mutate a value it handed out.
//
// Matching (tests/vectors/README.md): inside objects and list items only
// the keys a vector gives are compared, list lengths always; costUsd within
// 1e-9 relative; pendingPermissions and pendingMessages as request ids and
// texts; turns as [startSeq, endSeq, eventCount]; toolCalls as the tool
// calls of every turn with their kind.

import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { fromJson, type JsonValue } from "@bufbuild/protobuf";
import type { Timestamp } from "@bufbuild/protobuf/wkt";
import {
  EventSchema,
  Fold,
  SessionStatus,
  StatusFold,
  deriveActivity,
  deriveAll,
  deriveBackgroundTasks,
  deriveContextLost,
  derivePendingMessages,
  derivePendingPermissions,
  derivePlanOutcomes,
  deriveProcessAlive,
  deriveResumeId,
  deriveScheduledWakeup,
  deriveSession,
  deriveSettings,
  deriveStatus,
  deriveTitle,
  deriveUsage,
  groupEvents,
  hasRunningBackgroundTasks,
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

/** A time as the vectors give it: Unix milliseconds, null for none. */
const unixMs = (t: Timestamp | undefined): JsonValue =>
  t === undefined ? null : Number(t.seconds) * 1000 + Math.floor(t.nanos / 1_000_000);

/** Fields this port derives, as the vectors spell them, to comparable JSON. */
const FIELDS: Record<string, (d: Derived, events: Event[]) => JsonValue> = {
  status: (d) => d.status,
  processAlive: (d) => d.processAlive,
  turnInProgress: (d) => d.turnInProgress,
  headSeq: (d) => Number(d.headSeq),
  runId: (d) => d.runId ?? null,
  resumeId: (d) => d.resumeId ?? null,
  contextLost: (d) => (d.contextLost ? { resumeId: d.contextLost.resumeId, seq: Number(d.contextLost.seq) } : null),
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
  settings: (d) => ({
    model: d.settings.model ?? null,
    permissionMode: d.settings.permissionMode ?? null,
    maxThinkingTokens: d.settings.maxThinkingTokens ?? null,
  }),
  title: (d) => d.title,
  cwd: (d) => d.cwd,
  createdAt: (d) => unixMs(d.createdAt),
  updatedAt: (d) => unixMs(d.updatedAt),
  turns: (_d, events) =>
    groupEvents(events).map((t) => [
      t.start ? Number(t.start.seq) : null,
      t.end ? Number(t.end.seq) : null,
      t.events.length,
    ]),
  toolCalls: (_d, events) =>
    groupEvents(events).flatMap((t) =>
      t.toolCalls.map((c) => ({
        toolUseId: c.toolUseId,
        toolName: c.toolName,
        kind: c.kind,
        isError: c.result ? c.result.isError : null,
      })),
    ),
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

function load(file: string): { v: Vector; events: Event[] } {
  const v = JSON.parse(readFileSync(join(DIR, file), "utf8")) as Vector;
  return { v, events: v.events.map((j) => fromJson(EventSchema, j)) };
}

/** Compares every field a checkpoint gives with `d`, the derived state of `prefix`; returns the count. */
function checkCheckpoint(v: Vector, cp: Checkpoint, d: Derived, prefix: Event[], by: string): number {
  let n = 0;
  for (const [field, want] of Object.entries(cp)) {
    if (field === "after") continue;
    const get = FIELDS[field];
    if (!get) {
      skipped.set(field, (skipped.get(field) ?? 0) + 1);
      continue;
    }
    let got = pick(get(d, prefix), want);
    if (field === "usage") got = withCostWithinTolerance(got, want);
    n++;
    assert.deepEqual(got, want, `${v.name} after ${cp.after} event(s), ${by}: ${field}\n  ${v.description}`);
  }
  return n;
}

describe("derive conformance vectors", () => {
  it("finds the vectors", () => {
    assert.ok(files.length > 0, `no vectors in ${DIR}`);
  });

  for (const file of files) {
    it(file, () => {
      const { v, events } = load(file);
      assert.ok(v.expect.length > 0, "a vector without checkpoints proves nothing");
      for (const cp of v.expect) {
        checkpoints++;
        const prefix = events.slice(0, cp.after);
        comparisons += checkCheckpoint(v, cp, deriveAll(prefix), prefix, "deriveAll");
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

/** The parts of a Derived that are objects or arrays: each must change identity when its value does. */
const PARTS = [
  "usage",
  "activity",
  "backgroundTasks",
  "pendingPermissions",
  "pendingMessages",
  "planOutcomes",
  "scheduledWakeup",
  "settings",
] as const satisfies readonly (keyof Derived)[];

let foldVectors = 0;
let foldPrefixes = 0;
let foldCheckpoints = 0;
let foldComparisons = 0;
let identityChanges = 0;

describe("incremental Fold agrees with the O(n) functions on every vector", () => {
  for (const file of files) {
    it(file, () => {
      const { v, events } = load(file);
      const fold = new Fold();
      const sf = new StatusFold();
      const byAfter = new Map(v.expect.map((cp) => [cp.after, cp]));
      /** Every snapshot taken, with a deep copy made when it was taken. */
      const taken: { snap: Derived; copy: Derived; n: number }[] = [];
      let prev: Derived | undefined;
      for (let n = 0; n <= events.length; n++) {
        if (n > 0) {
          fold.apply(events[n - 1]!);
          sf.apply(events[n - 1]!);
        }
        const prefix = events.slice(0, n);
        const ctx = `${v.name} after ${n} event(s)`;
        foldPrefixes++;
        assert.equal(fold.length, n, ctx);
        const snap = fold.snapshot();
        assert.equal(fold.snapshot(), snap, `${ctx}: snapshot() is stable until the next apply`);
        assert.deepEqual(snap, deriveAll(prefix), `${ctx}: snapshot`);
        // Every getter against its O(n) function.
        assert.equal(fold.status(), deriveStatus(prefix), `${ctx}: status`);
        assert.equal(fold.processAlive(), deriveProcessAlive(prefix), `${ctx}: processAlive`);
        assert.equal(fold.turnInProgress(), sf.turnInProgress(), `${ctx}: turnInProgress`);
        assert.equal(fold.headSeq(), sf.headSeq(), `${ctx}: headSeq`);
        assert.equal(fold.runId(), sf.currentRunId(), `${ctx}: runId`);
        assert.equal(sf.status(), deriveStatus(prefix), `${ctx}: StatusFold`);
        assert.equal(fold.resumeId(), deriveResumeId(prefix), `${ctx}: resumeId`);
        assert.deepEqual(fold.contextLost(), deriveContextLost(prefix), `${ctx}: contextLost`);
        assert.deepEqual(fold.usage(), deriveUsage(prefix), `${ctx}: usage`);
        assert.deepEqual(fold.activity(), deriveActivity(prefix), `${ctx}: activity`);
        assert.deepEqual(fold.backgroundTasks(), deriveBackgroundTasks(prefix), `${ctx}: backgroundTasks`);
        assert.equal(fold.hasRunningBackgroundTasks(), hasRunningBackgroundTasks(prefix), `${ctx}: hasRunning`);
        assert.deepEqual(fold.pendingPermissions(), derivePendingPermissions(prefix), `${ctx}: pendingPermissions`);
        assert.equal(fold.pendingPermissionCount(), derivePendingPermissions(prefix).length, `${ctx}: count`);
        assert.deepEqual(fold.pendingMessages(), derivePendingMessages(prefix), `${ctx}: pendingMessages`);
        assert.deepEqual(fold.planOutcomes(), derivePlanOutcomes(prefix), `${ctx}: planOutcomes`);
        assert.deepEqual(fold.scheduledWakeup(), deriveScheduledWakeup(prefix), `${ctx}: scheduledWakeup`);
        assert.deepEqual(fold.settings(), deriveSettings(prefix), `${ctx}: settings`);
        assert.equal(fold.title(), deriveTitle(prefix), `${ctx}: title`);
        assert.deepEqual(fold.session("s"), deriveSession("s", prefix), `${ctx}: session`);
        // The expected values themselves, at the vector's checkpoints.
        const cp = byAfter.get(n);
        if (cp) {
          foldCheckpoints++;
          foldComparisons += checkCheckpoint(v, cp, snap, prefix, "Fold");
        }
        // A part whose value changed is a new object (React compares by identity).
        if (prev) {
          assert.notEqual(snap, prev, `${ctx}: a new snapshot after apply`);
          for (const k of PARTS) {
            let same = true;
            try {
              assert.deepEqual(snap[k], prev[k]);
            } catch {
              same = false;
            }
            if (!same) {
              identityChanges++;
              assert.notEqual(snap[k], prev[k], `${ctx}: ${k} changed in value but kept its identity`);
            }
          }
        }
        taken.push({ snap, copy: structuredClone(snap), n });
        prev = snap;
      }
      // Later events never mutated what was handed out earlier.
      for (const { snap, copy, n } of taken) {
        assert.deepEqual(snap, copy, `${v.name}: the snapshot after ${n} was mutated later`);
      }
      foldVectors++;
    });
  }

  it("summarizes a log as GetSession does", () => {
    const { events } = load("permission_allowed.json");
    // After the permission_requested (seq 5): streaming, one pending.
    const s = deriveSession("sess-1", events.slice(0, 5));
    assert.equal(s.sessionId, "sess-1");
    assert.equal(s.headSeq, 5n);
    assert.equal(s.status, SessionStatus.STREAMING);
    assert.equal(s.processAlive, true);
    assert.equal(s.resumeId, "cli-sess-1");
    assert.equal(s.activity, "Waiting for permission to run Write");
    assert.equal(s.pendingPermissions, 1);
    assert.equal(s.runId, "run-1");
    const empty = deriveSession("none", []);
    assert.equal(empty.status, SessionStatus.IDLE);
    assert.equal(empty.headSeq, 0n);
    assert.equal(empty.runId, "");
    assert.equal(empty.activity, "Idle");
  });

  it("summarizes the settings in force as GetSession does", () => {
    const { events } = load("settings_live.json");
    // After the SetMaxThinkingTokens 0 (seq 9): haiku, default, 0.
    const s = deriveSession("sess-1", events.slice(0, 9));
    assert.deepEqual([s.model, s.permissionMode, s.maxThinkingTokens], ["haiku", "default", 0]);
    const empty = deriveSession("none", []);
    assert.deepEqual([empty.model, empty.permissionMode, empty.maxThinkingTokens], ["", "", undefined]);
  });

  it("names the session and says where and when it ran as GetSession does", () => {
    const { events } = load("title_set.json");
    // After the SetTitle on the live run (seq 6): the chosen title.
    const s = deriveSession("sess-1", events.slice(0, 6));
    assert.deepEqual([s.title, s.cwd], ["Greeting check", "/srv/demo/work"]);
    assert.equal(s.createdAt, events[0]!.time);
    assert.equal(s.updatedAt, events[5]!.time);
    // After the empty one (seq 8): back to the first prompt's.
    assert.equal(deriveSession("sess-1", events.slice(0, 8)).title, "hello");
    const empty = deriveSession("none", []);
    assert.deepEqual([empty.title, empty.cwd, empty.createdAt, empty.updatedAt], ["", "", undefined, undefined]);
  });

  it("reads a recorded thinking budget as Rust's u32 parse does", () => {
    const changed = (value: string): Event =>
      fromJson(EventSchema, {
        seq: "1",
        sessionId: "s",
        settingChanged: { setting: "SETTING_MAX_THINKING_TOKENS", value, applied: "SETTING_APPLIED_LIVE" },
      });
    const budget = (value: string) => deriveSettings([changed("7"), changed(value)]).maxThinkingTokens;
    assert.equal(budget("1024"), 1024);
    assert.equal(budget("+5"), 5);
    assert.equal(budget("007"), 7);
    assert.equal(budget("4294967295"), 4294967295);
    assert.equal(budget("4294967296"), undefined, "over u32");
    assert.equal(budget("-1"), undefined);
    assert.equal(budget(" 5"), undefined);
    assert.equal(budget("1e3"), undefined);
    assert.equal(budget(""), undefined, "empty: back to the CLI's default");
  });

  it("checked every vector file", () => {
    assert.equal(foldVectors, files.length, `${foldVectors} of ${files.length} vector files agree`);
  });

  after(() => {
    console.log(
      `fold: ${foldVectors}/${files.length} files agree at all ${foldPrefixes} prefixes; ` +
        `${foldCheckpoints} checkpoints, ${foldComparisons} field comparisons; ` +
        `${identityChanges} value changes, each a new object`,
    );
  });
});
