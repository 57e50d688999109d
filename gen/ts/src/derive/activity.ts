// What the agent is doing right now, for a human.
// A port of client-rs/protocol/src/derive/activity.rs.

import type { Event } from "../gen/agentharness/v1/events_pb.js";
import { PermissionsFold } from "./permissions.js";
import { StatusFold, type Status } from "./status.js";

/** The kind of thing the agent is doing now. */
export type ActivityKind =
  | "idle"
  | "starting"
  | "thinking"
  | "writing"
  | "running_tool"
  | "waiting_for_permission"
  | "stopping";

/** What the agent is doing now, for a human. */
export interface Activity {
  /** The kind. */
  kind: ActivityKind;
  /** The tool running or asking, when there is one. */
  toolName: string | undefined;
  /** A short label ("Thinking", "Running Bash", ...). */
  label: string;
}

/** The activity of `kind` (with `toolName` for running_tool and waiting_for_permission), labelled. */
export function activityOf(kind: ActivityKind, toolName?: string): Activity {
  let label: string;
  switch (kind) {
    case "idle":
      label = "Idle";
      break;
    case "starting":
      label = "Starting";
      break;
    case "thinking":
      label = "Thinking";
      break;
    case "writing":
      label = "Writing";
      break;
    case "stopping":
      label = "Stopping";
      break;
    case "running_tool":
      label = toolName !== undefined ? `Running ${toolName}` : "Running a tool";
      break;
    case "waiting_for_permission":
      label = toolName !== undefined ? `Waiting for permission to run ${toolName}` : "Waiting for permission";
      break;
  }
  return { kind, toolName, label };
}

/**
 * Incremental activity state of the current turn (main thread only).
 * {@link activity} returns the same object while the activity stays the
 * same, a new one when it changes.
 */
export class ActivityFold {
  private tail: "none" | "thinking" | "text" | "tool" = "none";
  /** tool_uses of the current turn in order; resolved ones popped from the top. */
  private open: { id: string; name: string }[] = [];
  private resolved = new Set<string>();
  private last: Activity = activityOf("idle");

  /**
   * Applies the next event of the log. `beganTurn`: this event began a new
   * turn (the status fold went from no turn to a turn).
   */
  apply(e: Event, beganTurn: boolean): void {
    if (beganTurn) {
      this.tail = "none";
      if (this.open.length > 0) this.open = [];
      if (this.resolved.size > 0) this.resolved = new Set();
    }
    const p = e.payload;
    if (p.case === "content" && p.value.parentToolUseId === "") {
      for (const b of p.value.blocks) {
        switch (b.type) {
          case "thinking":
          case "redacted_thinking":
            this.tail = "thinking";
            break;
          case "text":
            this.tail = "text";
            break;
          case "tool_use":
          case "server_tool_use":
            this.tail = "tool";
            this.open.push({ id: b.toolUseId, name: b.toolName });
            break;
        }
      }
    } else if (p.case === "result" && p.value.parentToolUseId === "" && p.value.toolResults.length > 0) {
      this.tail = "tool";
      for (const tr of p.value.toolResults) this.resolved.add(tr.toolUseId);
      while (this.open.length > 0 && this.resolved.has(this.open[this.open.length - 1]!.id)) this.open.pop();
    }
  }

  /** The activity, given the current status and pending permissions. */
  activity(status: Status, perms: PermissionsFold): Activity {
    let kind: ActivityKind;
    let toolName: string | undefined;
    switch (status) {
      case "idle":
      case "starting":
      case "stopping":
        kind = status;
        break;
      case "streaming": {
        const latest = perms.latest();
        if (latest) {
          kind = "waiting_for_permission";
          toolName = latest.toolName;
        } else if (this.tail === "text") {
          kind = "writing";
        } else if (this.tail === "tool" && this.open.length > 0) {
          kind = "running_tool";
          toolName = this.open[this.open.length - 1]!.name;
        } else {
          kind = "thinking";
        }
        break;
      }
    }
    if (this.last.kind !== kind || this.last.toolName !== toolName) this.last = activityOf(kind, toolName);
    return this.last;
  }
}

/**
 * What the agent is doing now. Rules (client-rs activity.rs), first match wins:
 * - status idle → idle; starting → starting; stopping → stopping.
 * - streaming with a pending permission → waiting_for_permission (tool of
 *   the most recent pending request).
 * - otherwise the tail of the current turn's main thread (content and
 *   results with an empty parent_tool_use_id, since the turn began): no
 *   block yet or a thinking block → thinking; a text block → writing; a
 *   tool_use block or tool results → running_tool (the latest tool_use of
 *   the turn with no tool_result yet), or thinking when every tool_use has
 *   its result.
 */
export function deriveActivity(events: readonly Event[]): Activity {
  const sf = new StatusFold();
  const pf = new PermissionsFold();
  const af = new ActivityFold();
  for (const e of events) {
    const before = sf.turnInProgress();
    sf.apply(e);
    pf.apply(e);
    af.apply(e, !before && sf.turnInProgress());
  }
  return af.activity(sf.status(), pf);
}
