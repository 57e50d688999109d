// Text a reader saw being typed that the log will never hold.
//
// Live typing (partial.ts) is never stored: when the server dies mid-answer,
// the CLI it ran dies with it, the answer's `content` event is never written,
// and recovery ends the run (run_end SERVER_RESTART). The partial fold drops
// every block at each new stream, so without this the text the reader was
// watching would vanish without a word. Instead the blocks held when a stream
// breaks are carried over, and the new stream settles them:
// - A `replay` header moves the partial blocks held until then (the previous
//   stream's) into `pending`.
// - A delta of a pending block's message drops it: the server still has the
//   message (its snapshot after caughtUp restores it into the partial fold).
// - A `content` event drops the pending and lost blocks of its message: it
//   was recorded after all. A `result` drops the tool-output blocks of its
//   tools, as in the partial fold.
// - A `turnEnd` or `runEnd` moves what is still pending to `lost`: the turn
//   or run ended without recording it; a runEnd names why (`reason`).
// - An `inputSent` or `runStart` drops the lost blocks: the conversation
//   goes on, and the next answer replaces them.
// The lost text is shown as "not recorded (...)" until then, rather than
// cleared: the reader saw it and may still need it (a half-written command,
// an explanation), and greyed and labelled it cannot be taken for part of
// the conversation. It lives in this client's memory only: a reload, which
// reads the log, never shows it.
//
// Pure over immutable values like the partial fold: the same object back
// when nothing changed.

import { RunEndReason, type Event } from "./gen/agentharness/v1/events_pb.js";
import { DeltaBlockType, type SubscribeResponse } from "./gen/agentharness/v1/session_service_pb.js";
import type { PartialBlock, PartialMessage } from "./partial.js";

/** Blocks a broken stream left behind, and those the log will never hold. */
export interface Unrecorded {
  /** Held when the previous stream broke; the new stream has not yet said what became of them. */
  readonly pending: readonly PartialBlock[];
  /** Never recorded: their turn or run ended without their `content` event. */
  readonly lost: readonly PartialBlock[];
  /** Why the run of the lost blocks ended (its runEnd), when it did. */
  readonly reason: RunEndReason | undefined;
}

/** Nothing left behind. */
export const NO_UNRECORDED: Unrecorded = Object.freeze({
  pending: Object.freeze([]),
  lost: Object.freeze([]),
  reason: undefined,
});

/**
 * Applies one Subscribe message. `partial` is the partial fold as it was
 * before this message (a replay header carries its blocks over).
 */
export function applyUnrecorded(u: Unrecorded, partial: PartialMessage, res: SubscribeResponse): Unrecorded {
  switch (res.kind.case) {
    case "replay": {
      if (partial.blocks.length === 0) return u;
      // A block held again replaces its older copy: its text is newer.
      const older = u.pending.filter((p) => !partial.blocks.some((b) => same(p, b)));
      return make([...older, ...partial.blocks], u.lost, u.reason);
    }
    case "delta": {
      const id = res.kind.value.messageId;
      return filterPending(u, (b) => b.messageId !== id);
    }
    case "event":
      return applyEvent(u, res.kind.value);
    default:
      return u;
  }
}

function applyEvent(u: Unrecorded, e: Event): Unrecorded {
  switch (e.payload.case) {
    case "content": {
      const id = e.payload.value.messageId;
      const pending = u.pending.filter((b) => b.messageId !== id);
      const lost = u.lost.filter((b) => b.messageId !== id);
      if (pending.length === u.pending.length && lost.length === u.lost.length) return u;
      return make(pending, lost, lost.length ? u.reason : undefined);
    }
    case "result": {
      const ids = new Set(e.payload.value.toolResults.map((r) => r.toolUseId));
      return filterPending(u, (b) => b.blockType !== DeltaBlockType.TOOL_OUTPUT || !ids.has(b.toolUseId));
    }
    case "turnEnd":
      if (u.pending.length === 0) return u;
      return make([], [...u.lost, ...u.pending], u.reason);
    case "runEnd":
      if (u.pending.length === 0) return u;
      return make([], [...u.lost, ...u.pending], e.payload.value.reason);
    case "inputSent":
    case "runStart":
      return u.lost.length === 0 ? u : make(u.pending, [], undefined);
    default:
      return u;
  }
}

/**
 * The lost answer text of the main thread (its text blocks, joined): what
 * a UI shows as not recorded. "" when none.
 */
export function unrecordedText(u: Unrecorded): string {
  return u.lost
    .filter((b) => b.parentToolUseId === "" && b.blockType === DeltaBlockType.TEXT)
    .map((b) => b.text)
    .join("");
}

/** The note shown with the lost text: "not recorded (server restarted)", ... */
export function unrecordedNote(u: Unrecorded): string {
  switch (u.reason) {
    case RunEndReason.SERVER_RESTART:
      return "not recorded (server restarted)";
    case RunEndReason.STOPPED:
      return "not recorded (stopped)";
    case RunEndReason.PROCESS_EXIT:
    case RunEndReason.ERROR:
    case RunEndReason.INTERRUPTED:
      return "not recorded (the agent's process ended)";
    default:
      return "not recorded";
  }
}

function same(a: PartialBlock, b: PartialBlock): boolean {
  return a.messageId === b.messageId && a.index === b.index;
}

function filterPending(u: Unrecorded, keeps: (b: PartialBlock) => boolean): Unrecorded {
  const pending = u.pending.filter(keeps);
  return pending.length === u.pending.length ? u : make(pending, u.lost, u.reason);
}

function make(
  pending: readonly PartialBlock[],
  lost: readonly PartialBlock[],
  reason: RunEndReason | undefined,
): Unrecorded {
  if (pending.length === 0 && lost.length === 0) return NO_UNRECORDED;
  return Object.freeze({ pending: Object.freeze([...pending]), lost: Object.freeze([...lost]), reason });
}
