// Derived state: pure functions over a session's event log.
//
// A port of client-rs/src/derive (the one specification; its doc comments
// are the contract). The conformance vectors in tests/vectors pin both, and
// tests/ts runs every vector against this file. Token counts are plain
// numbers (exact up to 2^53), seqs stay bigint like the generated types.

import type { JsonObject, JsonValue } from "@bufbuild/protobuf";
import { toJson } from "@bufbuild/protobuf";
import { ValueSchema } from "@bufbuild/protobuf/wkt";
import { InputSource, type Event, type PermissionRequested } from "./gen/agentharness/v1/events_pb.js";

// ---- status and process alive ------------------------------------------

/** What a session is doing, as one word. */
export type Status = "idle" | "starting" | "streaming" | "stopping";

/**
 * Incremental status: apply events one at a time, read the state at any
 * point. Rules (the contract every port obeys, from client-rs StatusFold):
 * - `run_start` begins a run: the process is alive until the run's
 *   `run_end`. A non-empty prompt (or content blocks) in its config means
 *   input is pending, so a turn begins.
 * - `input_sent` (any source) while a run is live begins a turn, or is
 *   folded into the turn already in progress.
 * - `turn_start` (the CLI began a turn on its own) begins a turn.
 * - Until the run's CLI has said anything (`run_ready`, or any other CLI
 *   output), a turn in progress shows as starting; afterwards streaming.
 * - `turn_end` with `compact = false` ends the turn; `compact = true`
 *   changes nothing.
 * - `stop_requested` while a turn is in progress makes it stopping until the
 *   turn or the run ends; otherwise it changes nothing.
 * - `run_end` ends everything: idle, process dead.
 * - input_sent, turn_start and stop_requested are ignored while no run is live.
 */
export class StatusFold {
  private head = 0n;
  private runId: string | undefined;
  private live = false;
  private cliSpoke = false;
  private turn = false;
  private stopping = false;

  /** Applies the next event of the log. */
  apply(e: Event): void {
    if (e.seq > this.head) this.head = e.seq;
    // Logs paged from the middle may lack the run_start.
    if (this.runId === undefined && e.runId !== "") this.runId = e.runId;
    const p = e.payload;
    switch (p.case) {
      case "runStart": {
        const c = p.value.config;
        this.runId = e.runId;
        this.live = true;
        this.cliSpoke = false;
        this.stopping = false;
        this.turn = c !== undefined && (c.prompt !== "" || c.contentBlocks.length > 0);
        break;
      }
      case "runEnd":
        this.live = false;
        this.turn = false;
        this.stopping = false;
        this.cliSpoke = false;
        break;
      case "inputSent":
        if (this.live) this.turn = true;
        break;
      case "turnStart":
        if (this.live) {
          this.turn = true;
          this.cliSpoke = true;
        }
        break;
      case "stopRequested":
        if (this.live && this.turn) this.stopping = true;
        break;
      case "turnEnd":
        if (this.live) {
          this.cliSpoke = true;
          if (!p.value.compact) {
            this.turn = false;
            this.stopping = false;
          }
        }
        break;
      case "runReady":
      case "content":
      case "result":
      case "taskStarted":
      case "taskUpdated":
      case "taskNotification":
      case "permissionRequested":
        if (this.live) this.cliSpoke = true;
        break;
      // Harness-side records neither begin nor end anything.
      case "runError":
      case "permissionResolved":
      case undefined:
        break;
    }
  }

  /** The derived status. */
  status(): Status {
    if (!this.live || !this.turn) return "idle";
    if (this.stopping) return "stopping";
    if (!this.cliSpoke) return "starting";
    return "streaming";
  }

  /** True between a `run_start` and its `run_end`. */
  processAlive(): boolean {
    return this.live;
  }

  /** True while a turn (or start-up with input pending) is in progress. */
  turnInProgress(): boolean {
    return this.live && this.turn;
  }

  /** The latest run_start's run id (or the first run id seen). */
  currentRunId(): string | undefined {
    return this.runId;
  }

  /** The highest seq applied (0n for an empty log). */
  headSeq(): bigint {
    return this.head;
  }
}

function foldStatus(events: readonly Event[]): StatusFold {
  const f = new StatusFold();
  for (const e of events) f.apply(e);
  return f;
}

/** The session status after `events` (see {@link StatusFold}). */
export function deriveStatus(events: readonly Event[]): Status {
  return foldStatus(events).status();
}

/**
 * True when the log's latest run has a `run_start` and no `run_end`: the CLI
 * process exists (a keep-alive session between turns is idle but alive).
 */
export function deriveProcessAlive(events: readonly Event[]): boolean {
  return foldStatus(events).processAlive();
}

// ---- usage ---------------------------------------------------------------

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
  const u: SessionUsageTotals = {
    inputTokens: 0,
    outputTokens: 0,
    cacheCreationInputTokens: 0,
    cacheReadInputTokens: 0,
    costUsd: 0,
    contextTokens: 0,
    contextWindow: 0,
    turns: 0,
  };
  for (const e of events) {
    const p = e.payload;
    if (p.case === "turnEnd" && !p.value.compact) {
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
    } else if (p.case === "content" && p.value.parentToolUseId === "") {
      const t = p.value.usage;
      if (t) {
        const fill = t.inputTokens + t.cacheCreationInputTokens + t.cacheReadInputTokens + t.outputTokens;
        if (fill > 0n) u.contextTokens = Number(fill);
      }
    }
  }
  return u;
}

// ---- background tasks ----------------------------------------------------

/** Where a background task stands. */
export type TaskStatus = "running" | "completed" | "failed" | "stopped";

/** One background task as the log tells it. */
export interface BackgroundTask {
  /** The CLI's task id ("b…" for Bash, "a…" for agents). */
  taskId: string;
  /** "local_bash", "local_agent", ... (empty when no task_started was seen). */
  taskType: string;
  /** Human description (the latest one reported). */
  description: string;
  /** Current status. */
  status: TaskStatus;
  /** The tool_use that started it. */
  toolUseId: string;
  /** Latest progress or final summary. */
  summary: string;
  /** Where the task's output was written (from task_notification). */
  outputFile: string;
  /** Subagent type, for agents. */
  subagentType: string;
  /** Error text, when the task failed. */
  error: string;
  /** Last tool the task used, when reported. */
  lastToolName: string;
  /** Tokens used so far, when reported. */
  totalTokens: number;
  /** Tool uses so far, when reported. */
  toolUses: number;
  /** Seq of the first event about this task. */
  startedSeq: bigint;
  /** Seq of the event that made it terminal. */
  endedSeq: bigint | undefined;
}

function terminalTaskStatus(s: string): TaskStatus | undefined {
  switch (s) {
    case "completed":
      return "completed";
    case "failed":
      return "failed";
    case "killed":
    case "stopped":
      return "stopped";
    default:
      return undefined;
  }
}

/**
 * Background tasks in order of first appearance. Rules (client-rs tasks.rs):
 * - `task_started` creates the task, running; a `task_updated` or
 *   `task_notification` for an unknown task creates it too.
 * - A terminal status in `task_updated` (completed | failed | killed |
 *   stopped) or any `task_notification` (unknown status = completed) ends
 *   it; killed maps to stopped; the first terminal status wins.
 * - `run_end` stops every task still running.
 * - Non-empty fields of later frames overwrite earlier ones.
 */
export function deriveBackgroundTasks(events: readonly Event[]): BackgroundTask[] {
  const tasks: BackgroundTask[] = [];
  const index = new Map<string, BackgroundTask>();
  const entry = (id: string, seq: bigint): BackgroundTask => {
    let t = index.get(id);
    if (!t) {
      t = {
        taskId: id,
        taskType: "",
        description: "",
        status: "running",
        toolUseId: "",
        summary: "",
        outputFile: "",
        subagentType: "",
        error: "",
        lastToolName: "",
        totalTokens: 0,
        toolUses: 0,
        startedSeq: seq,
        endedSeq: undefined,
      };
      index.set(id, t);
      tasks.push(t);
    }
    return t;
  };
  const finish = (t: BackgroundTask, s: TaskStatus, seq: bigint) => {
    if (t.status === "running") {
      t.status = s;
      t.endedSeq = seq;
    }
  };
  for (const e of events) {
    const p = e.payload;
    switch (p.case) {
      case "taskStarted": {
        const t = entry(p.value.taskId, e.seq);
        set(t, "taskType", p.value.taskType);
        set(t, "description", p.value.description);
        set(t, "toolUseId", p.value.toolUseId);
        set(t, "subagentType", p.value.subagentType);
        break;
      }
      case "taskUpdated": {
        const u = p.value;
        const t = entry(u.taskId, e.seq);
        set(t, "description", u.description);
        set(t, "error", u.error);
        set(t, "summary", u.summary);
        set(t, "lastToolName", u.lastToolName);
        if (u.totalTokens > 0n) t.totalTokens = Number(u.totalTokens);
        if (u.toolUses > 0) t.toolUses = u.toolUses;
        const s = terminalTaskStatus(u.status);
        if (s) finish(t, s, e.seq);
        break;
      }
      case "taskNotification": {
        const n = p.value;
        const t = entry(n.taskId, e.seq);
        set(t, "toolUseId", n.toolUseId);
        set(t, "outputFile", n.outputFile);
        set(t, "summary", n.summary);
        finish(t, terminalTaskStatus(n.status) ?? "completed", e.seq);
        break;
      }
      case "runEnd":
        // The CLI's tasks live in its process group: they end with it.
        for (const t of tasks) finish(t, "stopped", e.seq);
        break;
      default:
        break;
    }
  }
  return tasks;
}

/** True when any background task is still running. */
export function hasRunningBackgroundTasks(events: readonly Event[]): boolean {
  return deriveBackgroundTasks(events).some((t) => t.status === "running");
}

type StringKeys<T> = { [K in keyof T]: T[K] extends string ? K : never }[keyof T];

function set<T>(obj: T, key: StringKeys<T>, v: string): void {
  if (v !== "") (obj as Record<StringKeys<T>, string>)[key] = v;
}

// ---- pending permissions -------------------------------------------------

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
 * Permission requests waiting for an answer, oldest first: pending until a
 * `permission_resolved` with the same request_id or the next `run_end`. A
 * repeated request id replaces the old entry in place.
 */
export function derivePendingPermissions(events: readonly Event[]): PendingPermission[] {
  // Insertion order of a Map is the order asked; re-setting a key keeps its slot.
  let pending = new Map<string, PendingPermission>();
  for (const e of events) {
    const p = e.payload;
    if (p.case === "permissionRequested") pending.set(p.value.requestId, pendingOf(e, p.value));
    else if (p.case === "permissionResolved") pending.delete(p.value.requestId);
    else if (p.case === "runEnd") pending = new Map();
  }
  return [...pending.values()];
}

// ---- activity --------------------------------------------------------------

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

function activityOf(kind: ActivityKind, toolName?: string): Activity {
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
  let tail: "none" | "thinking" | "text" | "tool" = "none";
  // tool_uses of the current turn in order; resolved ones popped from the top.
  let open: { id: string; name: string }[] = [];
  let resolved = new Set<string>();
  for (const e of events) {
    const before = sf.turnInProgress();
    sf.apply(e);
    if (!before && sf.turnInProgress()) {
      tail = "none";
      open = [];
      resolved = new Set();
    }
    const p = e.payload;
    if (p.case === "content" && p.value.parentToolUseId === "") {
      for (const b of p.value.blocks) {
        switch (b.type) {
          case "thinking":
          case "redacted_thinking":
            tail = "thinking";
            break;
          case "text":
            tail = "text";
            break;
          case "tool_use":
          case "server_tool_use":
            tail = "tool";
            open.push({ id: b.toolUseId, name: b.toolName });
            break;
        }
      }
    } else if (p.case === "result" && p.value.parentToolUseId === "" && p.value.toolResults.length > 0) {
      tail = "tool";
      for (const tr of p.value.toolResults) resolved.add(tr.toolUseId);
      while (open.length > 0 && resolved.has(open[open.length - 1]!.id)) open.pop();
    }
  }
  switch (sf.status()) {
    case "idle":
      return activityOf("idle");
    case "starting":
      return activityOf("starting");
    case "stopping":
      return activityOf("stopping");
    case "streaming": {
      const perms = derivePendingPermissions(events);
      const latest = perms[perms.length - 1];
      if (latest) return activityOf("waiting_for_permission", latest.toolName);
      if (tail === "text") return activityOf("writing");
      if (tail === "tool") {
        const top = open[open.length - 1];
        return top ? activityOf("running_tool", top.name) : activityOf("thinking");
      }
      return activityOf("thinking");
    }
  }
}

// ---- resume id, pending messages, plan outcomes ----------------------------

/** The latest `run_ready`'s non-empty resume_id: the CLI session the next run resumes. */
export function deriveResumeId(events: readonly Event[]): string | undefined {
  let id: string | undefined;
  for (const e of events) {
    if (e.payload.case === "runReady" && e.payload.value.resumeId !== "") id = e.payload.value.resumeId;
  }
  return id;
}

/** A user message sent mid-turn that the CLI has not taken up yet. */
export interface PendingMessage {
  /** Seq of its input_sent. */
  seq: bigint;
  /** The message text. */
  text: string;
}

/**
 * User messages queued into a running turn and not taken up yet: an
 * `input_sent` with source USER while a turn is in progress is pending until
 * the next main-thread `content`, or until the turn ends (non-compact
 * `turn_end`, or `run_end`). Subagent content does not take it up.
 */
export function derivePendingMessages(events: readonly Event[]): PendingMessage[] {
  const sf = new StatusFold();
  let list: PendingMessage[] = [];
  for (const e of events) {
    const before = sf.turnInProgress();
    sf.apply(e);
    const p = e.payload;
    if (p.case === "inputSent" && before && p.value.source === InputSource.USER) {
      list.push({ seq: e.seq, text: p.value.text });
    } else if (p.case === "content" && p.value.parentToolUseId === "") {
      list = [];
    } else if (p.case === "turnEnd" && !p.value.compact) {
      list = [];
    } else if (p.case === "runEnd") {
      list = [];
    }
  }
  return list;
}

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
 * Every ExitPlanMode tool_use, oldest first, with its decision: pending
 * until a `permission_resolved` of a request about it (allow → approved,
 * deny → rejected) or its tool_result (not an error → approved, error →
 * rejected); the latest of these wins.
 */
export function derivePlanOutcomes(events: readonly Event[]): PlanOutcome[] {
  const plans: PlanOutcome[] = [];
  const byToolUse = new Map<string, PlanOutcome>();
  const byRequest = new Map<string, PlanOutcome>();
  const decide = (p: PlanOutcome, approved: boolean, seq: bigint) => {
    p.decision = approved ? "approved" : "rejected";
    p.decidedSeq = seq;
  };
  for (const e of events) {
    const p = e.payload;
    if (p.case === "content") {
      for (const b of p.value.blocks) {
        if (b.type === "tool_use" && b.toolName === "ExitPlanMode") {
          const plan = typeof b.input?.["plan"] === "string" ? (b.input["plan"] as string) : "";
          const o: PlanOutcome = { toolUseId: b.toolUseId, plan, decision: "pending", seq: e.seq, decidedSeq: undefined };
          byToolUse.set(b.toolUseId, o);
          plans.push(o);
        }
      }
    } else if (p.case === "permissionRequested") {
      const o = byToolUse.get(p.value.toolUseId);
      if (o) byRequest.set(p.value.requestId, o);
    } else if (p.case === "permissionResolved") {
      const o = byRequest.get(p.value.requestId);
      if (o) {
        byRequest.delete(p.value.requestId);
        decide(o, p.value.allow, e.seq);
      }
    } else if (p.case === "result") {
      for (const tr of p.value.toolResults) {
        const o = byToolUse.get(tr.toolUseId);
        if (o) decide(o, !tr.isError, e.seq);
      }
    }
  }
  return plans;
}

// ---- scheduled wakeup ------------------------------------------------------

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
  const candidates = new Map<string, { toolName: string; input: JsonObject | undefined }>();
  let current: ScheduledWakeup | undefined;
  for (const e of events) {
    const p = e.payload;
    if (p.case === "content") {
      for (const b of p.value.blocks) {
        if (b.type === "tool_use" && ["ScheduleWakeup", "CronCreate", "CronDelete"].includes(b.toolName)) {
          candidates.set(b.toolUseId, { toolName: b.toolName, input: b.input });
        }
      }
    } else if (p.case === "result") {
      for (const tr of p.value.toolResults) {
        const c = candidates.get(tr.toolUseId);
        if (!c) continue;
        candidates.delete(tr.toolUseId);
        const sideJson = p.value.toolUseResult ? toJson(ValueSchema, p.value.toolUseResult) : undefined;
        const side =
          sideJson !== null && typeof sideJson === "object" && !Array.isArray(sideJson)
            ? (sideJson as JsonObject)
            : undefined;
        const input = c.input;
        const base = {
          toolUseId: tr.toolUseId,
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
          seq: e.seq,
        };
        if (c.toolName === "ScheduleWakeup") {
          const when = num(side, "scheduledFor");
          const scheduled = !tr.isError && (when !== undefined ? when > 0 : !tr.text.includes("not scheduled"));
          current = scheduled
            ? {
                ...base,
                kind: "wakeup",
                scheduledForMs: when === undefined ? undefined : Math.trunc(when),
                delaySeconds: ((d) => (d === undefined ? undefined : Math.trunc(d)))(num(input, "delaySeconds")),
                reason: str(input, "reason") ?? "",
              }
            : undefined;
        } else if (c.toolName === "CronCreate") {
          const sideId = str(side, "id");
          const id = tr.isError ? undefined : sideId !== undefined && sideId !== "" ? sideId : cronIdFromText(tr.text);
          current =
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
          if (!tr.isError && id !== undefined && current?.cronId === id) current = undefined;
        }
      }
    } else if (p.case === "inputSent" && p.value.source === InputSource.WAKEUP) {
      current = undefined;
    } else if (p.case === "turnStart" && p.value.origin === "cron") {
      if (current && !current.recurring) current = undefined;
    } else if (p.case === "runEnd") {
      // Session-only crons live in the CLI process; wakeups are delivered by
      // the harness and survive it.
      if (current && current.kind === "cron" && !current.durable) current = undefined;
    }
  }
  return current;
}

// ---- everything at once ----------------------------------------------------

/** Every derivation this port implements, over one log. */
export interface Derived {
  /** Seq of the newest event (0n for an empty log). */
  headSeq: bigint;
  /** See {@link deriveStatus}. */
  status: Status;
  /** See {@link deriveProcessAlive}. */
  processAlive: boolean;
  /** True while a turn (or start-up with input) is in progress. */
  turnInProgress: boolean;
  /** The current or last run id. */
  runId: string | undefined;
  /** See {@link deriveResumeId}. */
  resumeId: string | undefined;
  /** See {@link deriveUsage}. */
  usage: SessionUsageTotals;
  /** See {@link deriveActivity}. */
  activity: Activity;
  /** See {@link deriveBackgroundTasks}. */
  backgroundTasks: BackgroundTask[];
  /** See {@link hasRunningBackgroundTasks}. */
  hasRunningBackgroundTasks: boolean;
  /** See {@link derivePendingPermissions}. */
  pendingPermissions: PendingPermission[];
  /** See {@link derivePendingMessages}. */
  pendingMessages: PendingMessage[];
  /** See {@link derivePlanOutcomes}. */
  planOutcomes: PlanOutcome[];
  /** See {@link deriveScheduledWakeup}. */
  scheduledWakeup: ScheduledWakeup | undefined;
}

/** Every derivation this port implements. */
export function deriveAll(events: readonly Event[]): Derived {
  const sf = foldStatus(events);
  const tasks = deriveBackgroundTasks(events);
  return {
    headSeq: sf.headSeq(),
    status: sf.status(),
    processAlive: sf.processAlive(),
    turnInProgress: sf.turnInProgress(),
    runId: sf.currentRunId(),
    resumeId: deriveResumeId(events),
    usage: deriveUsage(events),
    activity: deriveActivity(events),
    backgroundTasks: tasks,
    hasRunningBackgroundTasks: tasks.some((t) => t.status === "running"),
    pendingPermissions: derivePendingPermissions(events),
    pendingMessages: derivePendingMessages(events),
    planOutcomes: derivePlanOutcomes(events),
    scheduledWakeup: deriveScheduledWakeup(events),
  };
}
