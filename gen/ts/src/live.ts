// What the agent is doing this instant, from live typing: the derived
// activity (a function of the log) refined by the partial message (partial.ts).
// A port of client-rs/protocol/src/live.rs; both follow the same rules.
//
// The log only learns what a block was once its `content` event lands, so the
// derived activity says "Thinking" while an answer is being typed. The
// partial blocks say what is being written now:
// - Only while the derived activity is thinking, writing or running_tool
//   (a turn streams and no permission prompt waits): idle, starting,
//   stopping and waiting_for_permission are facts of the log and win.
// - The newest main-thread block decides (subagents' blocks do not): text →
//   writing ("Writing"); thinking → thinking ("Thinking"); a tool call's
//   input streaming or a running tool's output → running_tool with its tool
//   ("Running Bash").
// - No main-thread block: the derived activity.
// The derived object itself is returned when the kind and tool agree, so
// identity comparison sees only real changes.

import { DeltaBlockType } from "./gen/agentharness/v1/session_service_pb.js";
import { activityOf, type Activity, type ActivityKind } from "./derive/activity.js";
import type { PartialMessage } from "./partial.js";

/** The activity kinds live typing may refine: a turn streams, nothing waits on the user. */
const REFINABLE = new Set<ActivityKind>(["thinking", "writing", "running_tool"]);

/** The activity given the derived one and the live typing (see the rules above). */
export function liveActivity(derived: Activity, partial: PartialMessage): Activity {
  if (!REFINABLE.has(derived.kind)) return derived;
  let newest;
  for (let i = partial.blocks.length - 1; i >= 0; i--) {
    const b = partial.blocks[i]!;
    if (b.parentToolUseId === "" && b.blockType !== DeltaBlockType.UNSPECIFIED) {
      newest = b;
      break;
    }
  }
  if (!newest) return derived;
  let kind: ActivityKind;
  let toolName: string | undefined;
  switch (newest.blockType) {
    case DeltaBlockType.TEXT:
      kind = "writing";
      break;
    case DeltaBlockType.THINKING:
      kind = "thinking";
      break;
    default:
      kind = "running_tool";
      // A tool's output block may not name it; the log's tool_use does.
      toolName = newest.toolName || (derived.kind === "running_tool" ? derived.toolName : undefined);
      break;
  }
  return derived.kind === kind && derived.toolName === toolName ? derived : activityOf(kind, toolName);
}
