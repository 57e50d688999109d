// Token totals, cost and context-window fill.
// A port of client-rs/protocol/src/derive/usage.rs.

import type { Event } from "../gen/agentharness/v1/events_pb.js";

/** Token totals and cost of a session, plus how full the context is. */
export interface SessionUsageTotals {
  /** Uncached input tokens over all turns. */
  inputTokens: number;
  /** Output tokens over all turns. */
  outputTokens: number;
  /** Cache-write input tokens over all turns. */
  cacheCreationInputTokens: number;
  /** Cache-read input tokens over all turns. */
  cacheReadInputTokens: number;
  /** Cost in US dollars over all turns. */
  costUsd: number;
  /** Tokens in the context of the latest main-thread API call. */
  contextTokens: number;
  /** Context window size of the latest turn's model (0 when unknown). */
  contextWindow: number;
  /** Completed (non-compact) turns. */
  turns: number;
}

/** The usage of an empty log (all zero). */
export function emptyUsage(): SessionUsageTotals {
  return {
    inputTokens: 0,
    outputTokens: 0,
    cacheCreationInputTokens: 0,
    cacheReadInputTokens: 0,
    costUsd: 0,
    contextTokens: 0,
    contextWindow: 0,
    turns: 0,
  };
}

/**
 * Incremental usage (see {@link deriveUsage} for the rules). {@link usage}
 * returns the same object until an event changes the totals, then a new
 * one; objects handed out are never mutated afterwards.
 */
export class UsageFold {
  private readonly u = emptyUsage();
  private view: SessionUsageTotals | undefined;

  /** Applies the next event of the log. */
  apply(e: Event): void {
    const p = e.payload;
    if (p.case === "turnEnd" && !p.value.compact) {
      const u = this.u;
      const t = p.value.usage;
      if (t) {
        u.inputTokens += Number(t.inputTokens);
        u.outputTokens += Number(t.outputTokens);
        u.cacheCreationInputTokens += Number(t.cacheCreationInputTokens);
        u.cacheReadInputTokens += Number(t.cacheReadInputTokens);
      }
      u.costUsd += p.value.costUsd;
      u.turns += 1;
      let w = 0n;
      for (const m of p.value.modelUsage) if (m.contextWindow > w) w = m.contextWindow;
      if (w > 0n) u.contextWindow = Number(w);
      this.view = undefined;
    } else if (p.case === "content" && p.value.parentToolUseId === "") {
      const t = p.value.usage;
      if (t) {
        const fill = t.inputTokens + t.cacheCreationInputTokens + t.cacheReadInputTokens + t.outputTokens;
        if (fill > 0n && Number(fill) !== this.u.contextTokens) {
          this.u.contextTokens = Number(fill);
          this.view = undefined;
        }
      }
    }
  }

  /** The totals so far (treat as read-only). */
  usage(): SessionUsageTotals {
    return (this.view ??= { ...this.u });
  }
}

/**
 * Token totals and cost over the whole log. Rules:
 * - token sums and `costUsd` add up every non-compact `turn_end`'s usage and
 *   cost; `turns` counts non-compact `turn_end`s.
 * - `contextTokens` = input + cache creation + cache read + output of the
 *   latest main-thread `content` (empty parent_tool_use_id) whose usage is set
 *   and not all zero.
 * - `contextWindow` = the largest model_usage context_window of the latest
 *   non-compact `turn_end` that reports one (> 0).
 */
export function deriveUsage(events: readonly Event[]): SessionUsageTotals {
  const f = new UsageFold();
  for (const e of events) f.apply(e);
  return f.usage();
}
