// Runs every partial-message vector (tests/vectors/partial/*.json) against
// the TypeScript fold (partial.ts): each step is a SubscribeResponse in
// canonical proto3 JSON, parsed with the generated schema and applied with
// applyPartial; after every step the blocks must equal the checkpoint
// exactly (format in tests/vectors/README.md). The fold must also return
// the same object when nothing changed, a new one when anything did, and
// never mutate a value it handed out.

import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import { fromJson, type JsonValue } from "@bufbuild/protobuf";
import {
  DeltaBlockTypeSchema,
  EMPTY_PARTIAL,
  SubscribeResponseSchema,
  applyPartial,
  partialToolOutput,
  type PartialBlock,
  type PartialMessage,
} from "@agent-harness/client/protocol";
import { ROOT } from "./support.ts";

/** Fewer files than this means the vectors went missing, not that all passed. */
const MIN_VECTORS = 8;

const DIR = join(ROOT, "tests/vectors/partial");
const files = readdirSync(DIR)
  .filter((f) => f.endsWith(".json"))
  .sort();

interface Vector {
  name: string;
  steps: JsonValue[];
  expect: { after: number; blocks: JsonValue[] }[];
}

/** A block as the vectors write it: empty optional strings left out. */
function blockJson(b: PartialBlock): JsonValue {
  const out: Record<string, JsonValue> = {};
  if (b.runId) out.runId = b.runId;
  out.messageId = b.messageId;
  out.index = b.index;
  out.blockType = DeltaBlockTypeSchema.values.find((v) => v.number === b.blockType)!.name;
  out.text = b.text;
  if (b.toolName) out.toolName = b.toolName;
  if (b.toolUseId) out.toolUseId = b.toolUseId;
  if (b.parentToolUseId) out.parentToolUseId = b.parentToolUseId;
  return out;
}

/** Key order does not matter. */
function canon(v: JsonValue): string {
  return JSON.stringify(v, (_k, x: unknown) =>
    x && typeof x === "object" && !Array.isArray(x)
      ? Object.fromEntries(Object.entries(x as Record<string, unknown>).sort(([a], [b]) => a.localeCompare(b)))
      : x,
  );
}

describe("partial message vectors", () => {
  it(`finds at least ${MIN_VECTORS} vectors`, () => {
    assert.ok(files.length >= MIN_VECTORS, `${files.length} vectors in ${DIR}`);
  });

  for (const f of files) {
    it(f, () => {
      const v = JSON.parse(readFileSync(join(DIR, f), "utf8")) as Vector;
      assert.deepEqual(
        v.expect.map((c) => c.after),
        Array.from({ length: v.steps.length + 1 }, (_, i) => i),
        "a checkpoint after every step",
      );
      let partial: PartialMessage = EMPTY_PARTIAL;
      const handedOut: [PartialMessage, string][] = [];
      for (const [i, checkpoint] of v.expect.entries()) {
        if (i > 0) {
          const before = partial;
          const beforeJson = canon(before.blocks.map(blockJson));
          partial = applyPartial(partial, fromJson(SubscribeResponseSchema, v.steps[i - 1]!));
          const afterJson = canon(partial.blocks.map(blockJson));
          if (afterJson === beforeJson) {
            // A delta may rewrite a block with the same text (a snapshot of
            // what is held): a new object is allowed then, not required.
            if (!("delta" in (v.steps[i - 1] as object)))
              assert.equal(partial, before, `${f} @after=${i}: unchanged, same object`);
          } else {
            assert.notEqual(partial, before, `${f} @after=${i}: changed, new object`);
          }
        }
        handedOut.push([partial, canon(partial.blocks.map(blockJson))]);
        assert.equal(
          canon(partial.blocks.map(blockJson)),
          canon(checkpoint.blocks as JsonValue),
          `${f} @after=${i}`,
        );
      }
      for (const [value, json] of handedOut) {
        assert.equal(canon(value.blocks.map(blockJson)), json, `${f}: a handed-out value changed`);
      }
    });
  }
});

describe("a running tool's output", () => {
  it("is found by its tool_use id and goes with its result", () => {
    const v = JSON.parse(readFileSync(join(DIR, "tool_output.json"), "utf8")) as { steps: JsonValue[] };
    let partial: PartialMessage = EMPTY_PARTIAL;
    const seen: (string | undefined)[] = [];
    for (const step of v.steps) {
      partial = applyPartial(partial, fromJson(SubscribeResponseSchema, step));
      seen.push(partialToolOutput(partial, "call_a"));
    }
    assert.ok(seen.includes("line2\nline3\n"), JSON.stringify(seen));
    assert.equal(seen.at(-1), undefined, "gone at the turn's end");
    const resultAt = v.steps.findIndex((s) => JSON.stringify(s).includes('"toolResults"'));
    assert.equal(seen[resultAt], undefined, "gone with its result");
    assert.equal(seen[resultAt - 1], "line2\nline3\n");
  });
});
