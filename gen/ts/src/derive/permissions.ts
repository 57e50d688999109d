// Permission prompts waiting for an answer.
// A port of client-rs/protocol/src/derive/permissions.rs.

import type { JsonObject, JsonValue } from "@bufbuild/protobuf";
import { toJson } from "@bufbuild/protobuf";
import { ValueSchema } from "@bufbuild/protobuf/wkt";
import type { Event, PermissionRequested } from "../gen/agentharness/v1/events_pb.js";

/** A `permission_requested` with no answer yet. */
export interface PendingPermission {
  /** The id to answer with RespondPermission. */
  requestId: string;
  /** The tool that wants to run. */
  toolName: string;
  /** The tool's input, as JSON. */
  input: JsonObject | undefined;
  /** The tool_use the request is about. */
  toolUseId: string;
  /** The CLI's description of the action, when given. */
  description: string;
  /** Why the CLI asks, when it says. */
  decisionReason: string;
  /** The path outside the allowed directories, when that is why it asks. */
  blockedPath: string;
  /** Permission updates the CLI suggests, as JSON. */
  suggestions: JsonValue[];
  /** Seq of the `permission_requested` event. */
  seq: bigint;
  /** The run that asked. */
  runId: string;
}

function pendingOf(e: Event, p: PermissionRequested): PendingPermission {
  return {
    requestId: p.requestId,
    toolName: p.toolName,
    input: p.input,
    toolUseId: p.toolUseId,
    description: p.description,
    decisionReason: p.decisionReason,
    blockedPath: p.blockedPath,
    suggestions: p.suggestions.map((v) => toJson(ValueSchema, v)),
    seq: e.seq,
    runId: e.runId,
  };
}

/**
 * Incremental pending-permission state: requests in the order asked, with
 * answered ones left as holes (trailing holes trimmed) so each event is O(1)
 * amortized. {@link pending} returns the same array until the set changes.
 */
export class PermissionsFold {
  private list: (PendingPermission | undefined)[] = [];
  private readonly index = new Map<string, number>();
  private live = 0;
  private view: PendingPermission[] | undefined;

  /** Applies the next event of the log. */
  apply(e: Event): void {
    const p = e.payload;
    if (p.case === "permissionRequested") {
      const i = this.index.get(p.value.requestId);
      if (i !== undefined) {
        // A repeated request id replaces the old entry in place.
        if (this.list[i] === undefined) this.live++;
        this.list[i] = pendingOf(e, p.value);
      } else {
        this.index.set(p.value.requestId, this.list.length);
        this.list.push(pendingOf(e, p.value));
        this.live++;
      }
      this.view = undefined;
    } else if (p.case === "permissionResolved") {
      const i = this.index.get(p.value.requestId);
      if (i === undefined) return;
      this.index.delete(p.value.requestId);
      if (this.list[i] !== undefined) {
        this.list[i] = undefined;
        this.live--;
        this.view = undefined;
      }
      while (this.list.length > 0 && this.list[this.list.length - 1] === undefined) this.list.pop();
    } else if (p.case === "runEnd") {
      // The process that asked is gone; nobody can answer it now.
      if (this.list.length === 0) return;
      this.list = [];
      this.index.clear();
      this.live = 0;
      this.view = undefined;
    }
  }

  /** Number of pending requests. */
  count(): number {
    return this.live;
  }

  /** The most recent pending request (last in asking order). */
  latest(): PendingPermission | undefined {
    return this.list[this.list.length - 1];
  }

  /** Pending requests, oldest first (treat as read-only). */
  pending(): PendingPermission[] {
    return (this.view ??= this.list.filter((p): p is PendingPermission => p !== undefined));
  }
}

/**
 * Permission requests waiting for an answer, oldest first: pending until a
 * `permission_resolved` with the same request_id or the next `run_end`. A
 * repeated request id replaces the old entry in place.
 */
export function derivePendingPermissions(events: readonly Event[]): PendingPermission[] {
  const f = new PermissionsFold();
  for (const e of events) f.apply(e);
  return f.pending();
}
