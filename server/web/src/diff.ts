// What a file-editing tool call changes, as unified-diff lines per file:
// Claude's Edit (old_string → new_string), MultiEdit (edits[]) and Write
// (content: shown as all added, the whole file as written), Codex's
// fileChange (the adapter names it Edit, its input `changes[]` each with a
// path, a kind and Codex's own diff text) and an ACP agent's `diff` content
// (kept in the call's result as `content[]` items with path, oldText and
// newText). Pure: the view (diff-view.tsx) only draws these lines.

import { structuredPatch } from "diff";
import type { JsonObject, JsonValue } from "@bufbuild/protobuf";

/** One line of a unified diff: added, removed, context, or a hunk's header. */
export interface DiffLine {
  kind: "add" | "del" | "ctx" | "hunk";
  text: string;
}

/** The change to one file. */
export interface FileDiff {
  path: string;
  /** What kind of change, when not a plain edit: "new file", "deleted", "written". */
  note: string;
  lines: DiffLine[];
  added: number;
  removed: number;
}

/** Context lines kept around each change. */
const CONTEXT = 3;

const str = (v: JsonValue | undefined): string | undefined => (typeof v === "string" ? v : undefined);
const obj = (v: JsonValue | undefined): JsonObject | undefined =>
  v !== null && typeof v === "object" && !Array.isArray(v) ? (v as JsonObject) : undefined;

/**
 * The unified diff from `before` to `after` (line by line, a few lines of
 * context). Hunks are headed with their line numbers when `numbered` (whole
 * files), else with `label` (an edit's snippets, whose line numbers in the
 * file are not known).
 */
export function lineDiff(before: string, after: string, numbered = true, label = "@@"): DiffLine[] {
  const patch = structuredPatch("a", "b", before, after, undefined, undefined, { context: CONTEXT });
  const out: DiffLine[] = [];
  for (const h of patch.hunks) {
    out.push({ kind: "hunk", text: numbered ? `@@ -${h.oldStart},${h.oldLines} +${h.newStart},${h.newLines} @@` : label });
    for (const l of h.lines) {
      if (l.startsWith("\\")) continue; // "\ No newline at end of file"
      out.push({ kind: l[0] === "+" ? "add" : l[0] === "-" ? "del" : "ctx", text: l.slice(1) });
    }
  }
  return out;
}

/** Every line of `text` as added (or removed): a new file, a deleted one. */
function whole(text: string, kind: "add" | "del"): DiffLine[] {
  const lines = text.split("\n");
  if (lines.at(-1) === "") lines.pop();
  return lines.map((l) => ({ kind, text: l }));
}

/**
 * Diff text as an agent reports it: a unified diff (its `@@` hunks, any
 * `---`/`+++` file header dropped), or for a file added or deleted, its
 * content (each line prefixed with + or - or not).
 */
export function parseUnified(text: string, kind: string): DiffLine[] {
  const lines = text.split("\n");
  if (lines.at(-1) === "") lines.pop();
  if (!lines.some((l) => l.startsWith("@@"))) {
    const sign = kind === "delete" ? "-" : "+";
    if (kind === "delete" || kind === "add") {
      const bare = lines.every((l) => l.startsWith(sign)) ? lines.map((l) => l.slice(1)) : lines;
      return bare.map((l) => ({ kind: kind === "delete" ? "del" : "add", text: l }));
    }
  }
  const out: DiffLine[] = [];
  let inHunk = false;
  for (const l of lines) {
    if (l.startsWith("@@")) {
      inHunk = true;
      out.push({ kind: "hunk", text: l });
    } else if (!inHunk && (l.startsWith("---") || l.startsWith("+++") || l.startsWith("diff ") || l.startsWith("index "))) {
      continue;
    } else if (l.startsWith("\\")) {
      continue;
    } else {
      const c = l[0];
      out.push({ kind: c === "+" ? "add" : c === "-" ? "del" : "ctx", text: c === "+" || c === "-" || c === " " ? l.slice(1) : l });
    }
  }
  return out;
}

function file(path: string, note: string, lines: DiffLine[]): FileDiff {
  return {
    path,
    note,
    lines,
    added: lines.filter((l) => l.kind === "add").length,
    removed: lines.filter((l) => l.kind === "del").length,
  };
}

/** A Codex fileChange's changes (`{path, kind: {type}, diff}` each). */
function codexChanges(changes: JsonValue[]): FileDiff[] {
  return changes.flatMap((c) => {
    const o = obj(c);
    const path = str(o?.["path"]);
    const diff = str(o?.["diff"]);
    if (!o || path === undefined || diff === undefined) return [];
    const kind = str(obj(o["kind"])?.["type"]) ?? str(o["kind"]) ?? "update";
    const note = kind === "add" ? "new file" : kind === "delete" ? "deleted" : "";
    return [file(path, note, parseUnified(diff, kind))];
  });
}

/** An ACP tool call's `diff` content items (`{type: "diff", path, oldText, newText}`), from its result. */
function acpDiffs(result: JsonValue | undefined): FileDiff[] {
  const content = obj(result)?.["content"];
  if (!Array.isArray(content)) return [];
  return content.flatMap((c) => {
    const o = obj(c);
    if (!o || o["type"] !== "diff") return [];
    const path = str(o["path"]) ?? "";
    const before = str(o["oldText"]);
    const after = str(o["newText"]) ?? "";
    return [before === undefined ? file(path, "new file", whole(after, "add")) : file(path, "", lineDiff(before, after))];
  });
}

/**
 * The files a tool call changes, as diffs; undefined when it is not a file
 * edit this knows (its input is then shown as it is). `result` is the
 * call's recorded `tool_use_result`, where an ACP agent's diffs are.
 */
export function toolDiffs(toolName: string, input: JsonObject | undefined, result?: JsonValue): FileDiff[] | undefined {
  const path = str(input?.["file_path"]) ?? str(input?.["path"]) ?? "";
  const fromResult = acpDiffs(result);
  if (fromResult.length > 0) return fromResult;
  if (!input) return undefined;
  switch (toolName) {
    case "Edit": {
      const changes = input["changes"];
      if (Array.isArray(changes)) return codexChanges(changes);
      const before = str(input["old_string"]);
      const after = str(input["new_string"]);
      if (before === undefined || after === undefined) return undefined;
      return [file(path, "", lineDiff(before, after, false))];
    }
    case "MultiEdit": {
      const edits = input["edits"];
      if (!Array.isArray(edits)) return undefined;
      const lines = edits.flatMap((e, i) => {
        const o = obj(e);
        return lineDiff(str(o?.["old_string"]) ?? "", str(o?.["new_string"]) ?? "", false, `@@ edit ${i + 1} of ${edits.length}`);
      });
      return [file(path, "", lines)];
    }
    case "Write": {
      const content = str(input["content"]);
      if (content === undefined) return undefined;
      return [file(path, "written", whole(content, "add"))];
    }
    default:
      return undefined;
  }
}
