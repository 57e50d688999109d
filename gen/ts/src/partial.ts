// Live typing: the partial assistant message, folded from a Subscribe stream
// that asked for `includeDeltas`. A port of client-rs/protocol/src/partial.rs (the
// Rust `Partial`); both pass the vectors in tests/vectors/partial/.
//
// The server streams the blocks the CLI is still writing as `Delta`s. They
// are never stored and have no seq: the log stays the truth, and a partial
// block only lives until the event that makes it redundant.
//
// Rules (the contract every port obeys):
// - A block is named by (messageId, index).
// - A delta with `snapshot: false` appends its fragment to its block,
//   creating the block (text = fragment) when it is not held.
// - A delta with `snapshot: true` replaces its block's text with the
//   fragment, creating the block when it is not held. The server sends one
//   per block still being written right after `caughtUp`, and when a stream
//   fell behind.
// - A delta's non-empty metadata (run id, block type, tool name, tool_use
//   id, parent tool_use id) overwrites the block's; empty fields keep it.
// - A `content` event drops every block whose messageId equals its own.
// - A `result` event drops every tool-output block whose toolUseId is one of
//   its tool results' (a running tool's output is keyed by its tool_use id,
//   as its messageId: it belongs to no message).
// - A `turnEnd` (compact boundaries included) or `runEnd` event drops every
//   block.
// - A `replay` header drops every block: it opens a new stream, whose
//   snapshot deltas after `caughtUp` restore what is still being written.
// - `heartbeat`, `caughtUp` and every other event change nothing.
// - Order: a block of a message already held goes among that message's
//   blocks by index; a block of a message not held goes last.
//
// The fold is a pure reducer over immutable values: each apply returns the
// same object when nothing changed and a new one (sharing the untouched
// blocks) when something did, so identity comparison sees every change.

import type { Event } from "./gen/agentharness/v1/events_pb.js";
import {
  DeltaBlockType,
  type Delta,
  type SubscribeResponse,
} from "./gen/agentharness/v1/session_service_pb.js";

/** One block of an assistant message the CLI is writing. */
export interface PartialBlock {
  /** The run writing it. */
  readonly runId: string;
  /** The API message id; the `content` event with this id supersedes it. */
  readonly messageId: string;
  /** The block's index in its message. */
  readonly index: number;
  /** Text, thinking, a tool call's input, or a running tool's output. */
  readonly blockType: DeltaBlockType;
  /** For a tool-input or tool-output block: the tool's name. */
  readonly toolName: string;
  /** For a tool-input or tool-output block: the tool_use id. */
  readonly toolUseId: string;
  /** Set when a subagent writes it: the Agent tool_use id ("" for the main thread). */
  readonly parentToolUseId: string;
  /** The text so far (for a tool input, JSON that is not complete yet). */
  readonly text: string;
}

/** The partial blocks held, in display order. Never mutated: treat as a value. */
export interface PartialMessage {
  readonly blocks: readonly PartialBlock[];
}

/** Nothing being written. */
export const EMPTY_PARTIAL: PartialMessage = Object.freeze({ blocks: Object.freeze([]) });

/** Applies one Subscribe message (see the rules above). */
export function applyPartial(partial: PartialMessage, res: SubscribeResponse): PartialMessage {
  switch (res.kind.case) {
    case "replay":
      return EMPTY_PARTIAL;
    case "event":
      return applyPartialEvent(partial, res.kind.value);
    case "delta":
      return applyPartialDelta(partial, res.kind.value);
    default:
      return partial;
  }
}

/**
 * Applies a delta: appends its fragment to its block, or replaces the
 * block's text when it is a snapshot, creating the block if needed. Always
 * a new object.
 */
export function applyPartialDelta(partial: PartialMessage, d: Delta): PartialMessage {
  const blocks = partial.blocks;
  const { at, found } = position(blocks, d.messageId, d.index);
  const old: PartialBlock = found
    ? blocks[at]!
    : {
        runId: "",
        messageId: d.messageId,
        index: d.index,
        blockType: DeltaBlockType.UNSPECIFIED,
        toolName: "",
        toolUseId: "",
        parentToolUseId: "",
        text: "",
      };
  const block: PartialBlock = Object.freeze({
    runId: d.runId || old.runId,
    messageId: old.messageId,
    index: old.index,
    blockType: d.blockType !== DeltaBlockType.UNSPECIFIED ? d.blockType : old.blockType,
    toolName: d.toolName || old.toolName,
    toolUseId: d.toolUseId || old.toolUseId,
    parentToolUseId: d.parentToolUseId || old.parentToolUseId,
    text: d.snapshot ? d.fragment : old.text + d.fragment,
  });
  const next = [...blocks];
  next.splice(at, found ? 1 : 0, block);
  return Object.freeze({ blocks: Object.freeze(next) });
}

/**
 * Applies a log event: `content` drops its message's blocks, `result` its
 * tools' outputs, `turnEnd` and `runEnd` drop all.
 */
export function applyPartialEvent(partial: PartialMessage, e: Event): PartialMessage {
  if (partial.blocks.length === 0) return partial;
  switch (e.payload.case) {
    case "content": {
      const id = e.payload.value.messageId;
      return keep(partial, (b) => b.messageId !== id);
    }
    case "result": {
      const ids = new Set(e.payload.value.toolResults.map((r) => r.toolUseId));
      return keep(partial, (b) => b.blockType !== DeltaBlockType.TOOL_OUTPUT || !ids.has(b.toolUseId));
    }
    case "turnEnd":
    case "runEnd":
      return EMPTY_PARTIAL;
    default:
      return partial;
  }
}

/** The blocks `keeps` keeps; the same object when that is all of them. */
function keep(partial: PartialMessage, keeps: (b: PartialBlock) => boolean): PartialMessage {
  const kept = partial.blocks.filter(keeps);
  return kept.length === partial.blocks.length ? partial : Object.freeze({ blocks: Object.freeze(kept) });
}

/**
 * What tool `toolUseId` has printed so far while it runs, or undefined when
 * nothing streams for it: shown under the tool until its `result` arrives.
 */
export function partialToolOutput(partial: PartialMessage, toolUseId: string): string | undefined {
  return partial.blocks.find((b) => b.blockType === DeltaBlockType.TOOL_OUTPUT && b.toolUseId === toolUseId)
    ?.text;
}

/** The main thread's blocks (no subagent's), in display order. */
export function partialMainThread(partial: PartialMessage): PartialBlock[] {
  return partial.blocks.filter((b) => b.parentToolUseId === "");
}

/**
 * The answer text the main thread is writing: its text blocks, joined. ""
 * when it is writing none (thinking, a tool input, or nothing).
 */
export function partialMainText(partial: PartialMessage): string {
  return partialMainThread(partial)
    .filter((b) => b.blockType === DeltaBlockType.TEXT)
    .map((b) => b.text)
    .join("");
}

/** Where block (messageId, index) is, or where it would go. */
function position(
  blocks: readonly PartialBlock[],
  messageId: string,
  index: number,
): { at: number; found: boolean } {
  let insertAt = blocks.length;
  let seenMessage = false;
  for (let at = 0; at < blocks.length; at++) {
    const b = blocks[at]!;
    if (b.messageId !== messageId) {
      if (seenMessage) return { at, found: false };
      continue;
    }
    seenMessage = true;
    if (b.index === index) return { at, found: true };
    if (b.index > index) return { at, found: false };
    insertAt = at + 1;
  }
  return { at: insertAt, found: false };
}
