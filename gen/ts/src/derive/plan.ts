// ExitPlanMode calls and what became of them.
// A port of client-rs/protocol/src/derive/plan.rs.

import type { Event } from "../gen/agentharness/v1/events_pb.js";

/** What happened to a proposed plan. */
export type PlanDecision = "pending" | "approved" | "rejected";

/** One ExitPlanMode call. */
export interface PlanOutcome {
  /** The ExitPlanMode tool_use id. */
  toolUseId: string;
  /** The plan text (`input.plan`). */
  plan: string;
  /** What became of it. */
  decision: PlanDecision;
  /** Seq of the tool_use's content event. */
  seq: bigint;
  /** Seq of the event that decided it. */
  decidedSeq: bigint | undefined;
}

/**
 * Incremental plan state. Outcomes are replaced (never mutated) when
 * decided, so {@link plans} hands out arrays that later events leave alone.
 */
export class PlanFold {
  private readonly list: PlanOutcome[] = [];
  /** tool_use id → index in `list`. */
  private readonly index = new Map<string, number>();
  /** permission request id → index in `list`. */
  private readonly requests = new Map<string, number>();
  private view: PlanOutcome[] | undefined;

  private decide(i: number, approved: boolean, seq: bigint): void {
    this.list[i] = { ...this.list[i]!, decision: approved ? "approved" : "rejected", decidedSeq: seq };
    this.view = undefined;
  }

  /** Applies the next event of the log. */
  apply(e: Event): void {
    const p = e.payload;
    if (p.case === "content") {
      for (const b of p.value.blocks) {
        if (b.type === "tool_use" && b.toolName === "ExitPlanMode") {
          const plan = typeof b.input?.["plan"] === "string" ? (b.input["plan"] as string) : "";
          this.index.set(b.toolUseId, this.list.length);
          this.list.push({ toolUseId: b.toolUseId, plan, decision: "pending", seq: e.seq, decidedSeq: undefined });
          this.view = undefined;
        }
      }
    } else if (p.case === "permissionRequested") {
      const i = this.index.get(p.value.toolUseId);
      if (i !== undefined) this.requests.set(p.value.requestId, i);
    } else if (p.case === "permissionResolved") {
      const i = this.requests.get(p.value.requestId);
      if (i !== undefined) {
        this.requests.delete(p.value.requestId);
        this.decide(i, p.value.allow, e.seq);
      }
    } else if (p.case === "result") {
      for (const tr of p.value.toolResults) {
        const i = this.index.get(tr.toolUseId);
        if (i !== undefined) this.decide(i, !tr.isError, e.seq);
      }
    }
  }

  /** Every plan so far, oldest first (treat as read-only). */
  plans(): PlanOutcome[] {
    return (this.view ??= this.list.slice());
  }
}

/**
 * Every ExitPlanMode tool_use, oldest first, with its decision: pending
 * until a `permission_resolved` of a request about it (allow → approved,
 * deny → rejected) or its tool_result (not an error → approved, error →
 * rejected); the latest of these wins.
 */
export function derivePlanOutcomes(events: readonly Event[]): PlanOutcome[] {
  const f = new PlanFold();
  for (const e of events) f.apply(e);
  return f.plans();
}
