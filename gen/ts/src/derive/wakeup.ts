// The next self-scheduled prompt (ScheduleWakeup / CronCreate).
// A port of client-rs/protocol/src/derive/wakeup.rs.

import type { JsonObject } from "@bufbuild/protobuf";
import { toJson } from "@bufbuild/protobuf";
import { ValueSchema } from "@bufbuild/protobuf/wkt";
import { InputSource, type Event } from "../gen/agentharness/v1/events_pb.js";

/** A prompt the agent scheduled for itself. */
export interface ScheduledWakeup {
  /** Which tool scheduled it: ScheduleWakeup ("wakeup") or CronCreate ("cron"). */
  kind: "wakeup" | "cron";
  /** The tool_use that scheduled it. */
  toolUseId: string;
  /** "ScheduleWakeup" or "CronCreate". */
  toolName: string;
  /** When it fires, in Unix milliseconds (ScheduleWakeup's scheduledFor). */
  scheduledForMs: number | undefined;
  /** The requested delay (ScheduleWakeup's delaySeconds). */
  delaySeconds: number | undefined;
  /** The cron job id (CronCreate). */
  cronId: string | undefined;
  /** The cron expression (CronCreate). */
  cron: string | undefined;
  /** The CLI's human-readable schedule, when given. */
  humanSchedule: string | undefined;
  /** The prompt that will be delivered. */
  prompt: string;
  /** Why (ScheduleWakeup's reason). */
  reason: string;
  /** True for a recurring cron: firing does not clear it. */
  recurring: boolean;
  /** True for a durable cron: it outlives the process. */
  durable: boolean;
  /** Seq of the tool_result that confirmed it. */
  seq: bigint;
}

const str = (o: JsonObject | undefined, k: string): string | undefined =>
  typeof o?.[k] === "string" ? (o[k] as string) : undefined;
const num = (o: JsonObject | undefined, k: string): number | undefined =>
  typeof o?.[k] === "number" ? (o[k] as number) : undefined;
const bool = (o: JsonObject | undefined, k: string): boolean | undefined =>
  typeof o?.[k] === "boolean" ? (o[k] as boolean) : undefined;

/** "Scheduled one-shot task 75f49f4e (Every minute). …" → "75f49f4e". */
function cronIdFromText(text: string): string | undefined {
  if (!text.startsWith("Scheduled")) return undefined;
  const i = text.indexOf(" task ");
  if (i < 0) return undefined;
  const m = /^[A-Za-z0-9_-]+/.exec(text.slice(i + " task ".length));
  return m ? m[0] : undefined;
}

interface Candidate {
  toolName: string;
  input: JsonObject | undefined;
}

/**
 * Incremental scheduled-wakeup state. The current wakeup is replaced, never
 * mutated, so {@link current} changes identity exactly when it changes.
 */
export class WakeupFold {
  /** Scheduling tool_uses waiting for their tool_result. */
  private readonly candidates = new Map<string, Candidate>();
  private cur: ScheduledWakeup | undefined;

  /** Applies the next event of the log. */
  apply(e: Event): void {
    const p = e.payload;
    if (p.case === "content") {
      for (const b of p.value.blocks) {
        if (
          b.type === "tool_use" &&
          (b.toolName === "ScheduleWakeup" || b.toolName === "CronCreate" || b.toolName === "CronDelete")
        ) {
          this.candidates.set(b.toolUseId, { toolName: b.toolName, input: b.input });
        }
      }
    } else if (p.case === "result") {
      for (const tr of p.value.toolResults) {
        const c = this.candidates.get(tr.toolUseId);
        if (!c) continue;
        this.candidates.delete(tr.toolUseId);
        const sideJson = p.value.toolUseResult ? toJson(ValueSchema, p.value.toolUseResult) : undefined;
        const side =
          sideJson !== null && typeof sideJson === "object" && !Array.isArray(sideJson)
            ? (sideJson as JsonObject)
            : undefined;
        this.resolve(e.seq, tr.toolUseId, c, tr.isError, tr.text, side);
      }
    } else if (p.case === "inputSent" && p.value.source === InputSource.WAKEUP) {
      this.cur = undefined;
    } else if (p.case === "turnStart" && p.value.origin === "cron") {
      if (this.cur && !this.cur.recurring) this.cur = undefined;
    } else if (p.case === "runEnd") {
      // Session-only crons live in the CLI process; wakeups are delivered by
      // the harness and survive it.
      if (this.cur && this.cur.kind === "cron" && !this.cur.durable) this.cur = undefined;
    }
  }

  private resolve(
    seq: bigint,
    toolUseId: string,
    c: Candidate,
    isError: boolean,
    text: string,
    side: JsonObject | undefined,
  ): void {
    const input = c.input;
    const base = {
      toolUseId,
      toolName: c.toolName,
      scheduledForMs: undefined,
      delaySeconds: undefined,
      cronId: undefined,
      cron: undefined,
      humanSchedule: undefined,
      prompt: str(input, "prompt") ?? "",
      reason: "",
      recurring: false,
      durable: false,
      seq,
    };
    if (c.toolName === "ScheduleWakeup") {
      const when = num(side, "scheduledFor");
      const scheduled = !isError && (when !== undefined ? when > 0 : !text.includes("not scheduled"));
      const delay = num(input, "delaySeconds");
      this.cur = scheduled
        ? {
            ...base,
            kind: "wakeup",
            scheduledForMs: when === undefined ? undefined : Math.trunc(when),
            delaySeconds: delay === undefined ? undefined : Math.trunc(delay),
            reason: str(input, "reason") ?? "",
          }
        : undefined;
    } else if (c.toolName === "CronCreate") {
      const sideId = str(side, "id");
      const id = isError ? undefined : sideId !== undefined && sideId !== "" ? sideId : cronIdFromText(text);
      this.cur =
        id === undefined
          ? undefined
          : {
              ...base,
              kind: "cron",
              cronId: id,
              cron: str(input, "cron"),
              humanSchedule: str(side, "humanSchedule"),
              recurring: bool(side, "recurring") ?? bool(input, "recurring") ?? false,
              durable: bool(side, "durable") ?? bool(input, "durable") ?? false,
            };
    } else if (c.toolName === "CronDelete") {
      const id = str(input, "id");
      if (!isError && id !== undefined && this.cur?.cronId === id) this.cur = undefined;
    }
  }

  /** The wakeup still due, if any (treat as read-only). */
  current(): ScheduledWakeup | undefined {
    return this.cur;
  }
}

/**
 * The prompt the agent has scheduled for itself, if one is still due.
 * Rules (client-rs wakeup.rs):
 * - A ScheduleWakeup or CronCreate tool_use counts once its tool_result
 *   arrives: ScheduleWakeup when `tool_use_result.scheduledFor` is a number
 *   > 0 (or, without one, when the text does not say "not scheduled");
 *   CronCreate when the result gives a job id (`tool_use_result.id`, or
 *   "Scheduled … task <id>" in the text). An error or unscheduled result
 *   clears any earlier wakeup: the latest attempt wins.
 * - Cleared by an `input_sent` with source WAKEUP, a `turn_start` with
 *   origin "cron" (unless recurring), a successful CronDelete of its id, and
 *   for a non-durable cron by `run_end`.
 */
export function deriveScheduledWakeup(events: readonly Event[]): ScheduledWakeup | undefined {
  const f = new WakeupFold();
  for (const e of events) f.apply(e);
  return f.current();
}
