// Helpers for rendering a log: tool kinds, turns, subagent threads and
// queued messages. A port of client-rs/protocol/src/derive/classify.rs (its doc
// comments are the contract; tests/vectors pins turns, subagent children
// and pending messages).

import type { JsonObject } from "@bufbuild/protobuf";
import { InputSource, type Event, type ToolResult } from "../gen/agentharness/v1/events_pb.js";
import { StatusFold } from "./status.js";

/** A tool's family, for picking an icon or a renderer. */
export type ToolKind = "shell" | "read" | "edit" | "web" | "agent" | "todo" | "plan" | "schedule" | "mcp" | "other";

/**
 * Maps a tool name to its kind. `input` matters for `Task` only: the Agent
 * tool's older name (input with `prompt` or `subagent_type`, or no input) →
 * agent; otherwise a task-list tool → todo. Other `Task*` names are todo,
 * `mcp__*` is mcp, unknown names are other.
 */
export function classifyTool(name: string, input?: JsonObject): ToolKind {
  switch (name) {
    case "Bash":
    case "BashOutput":
    case "KillShell":
      return "shell";
    case "Read":
    case "Glob":
    case "Grep":
    case "LS":
      return "read";
    case "Edit":
    case "Write":
    case "MultiEdit":
    case "NotebookEdit":
      return "edit";
    case "WebFetch":
    case "WebSearch":
      return "web";
    case "Agent":
      return "agent";
    case "Task":
      return input && !("prompt" in input) && !("subagent_type" in input) ? "todo" : "agent";
    case "TodoWrite":
      return "todo";
    case "ExitPlanMode":
      return "plan";
    case "ScheduleWakeup":
    case "CronCreate":
    case "CronDelete":
    case "CronList":
      return "schedule";
  }
  if (name.startsWith("Task")) return "todo";
  if (name.startsWith("mcp__")) return "mcp";
  return "other";
}

/** A tool_use paired with its result. */
export interface ToolCall {
  /** The tool_use id. */
  toolUseId: string;
  /** The tool name. */
  toolName: string;
  /** Its kind. */
  kind: ToolKind;
  /** The tool's input. */
  input: JsonObject | undefined;
  /** The subagent it ran in (the Agent tool_use id), or "" for the main thread. */
  parentToolUseId: string;
  /** The content event carrying the tool_use. */
  useEvent: Event;
  /** The tool_result, once it arrived. */
  result: ToolResult | undefined;
  /** The result event carrying it. */
  resultEvent: Event | undefined;
}

/** A turn, or a stretch of events outside any turn (`start` undefined). */
export interface Turn {
  /** The event that began the turn; undefined for a stretch outside turns. */
  start: Event | undefined;
  /** The event that ended it; undefined while open, and always for a stretch. */
  end: Event | undefined;
  /** Every event of the turn in log order, start and end included. */
  events: Event[];
  /** Tool calls made in the turn, each with its result wherever it arrived. */
  toolCalls: ToolCall[];
}

/**
 * Splits the log into turns: from the event that makes a turn begin (input_sent,
 * turn_start, a run_start with a prompt) to the event that ends it (a
 * non-compact turn_end, or run_end). Events between turns form stretches.
 * Each tool_use is paired with its tool_result by id, even across turns.
 */
export function groupEvents(events: readonly Event[]): Turn[] {
  const out: Turn[] = [];
  let cur: Turn | undefined;
  const calls = new Map<string, ToolCall>();
  const sf = new StatusFold();
  for (const e of events) {
    const before = sf.turnInProgress();
    sf.apply(e);
    const after = sf.turnInProgress();
    if (!before && after) {
      if (cur) out.push(cur);
      cur = { start: e, end: undefined, events: [], toolCalls: [] };
    }
    cur ??= { start: undefined, end: undefined, events: [], toolCalls: [] };
    cur.events.push(e);
    const p = e.payload;
    if (p.case === "content") {
      for (const b of p.value.blocks) {
        if (b.type === "tool_use" || b.type === "server_tool_use") {
          const call: ToolCall = {
            toolUseId: b.toolUseId,
            toolName: b.toolName,
            kind: classifyTool(b.toolName, b.input),
            input: b.input,
            parentToolUseId: p.value.parentToolUseId,
            useEvent: e,
            result: undefined,
            resultEvent: undefined,
          };
          calls.set(b.toolUseId, call);
          cur.toolCalls.push(call);
        }
      }
    } else if (p.case === "result") {
      for (const tr of p.value.toolResults) {
        const call = calls.get(tr.toolUseId);
        if (call) {
          call.result = tr;
          call.resultEvent = e;
        }
      }
    }
    if (before && !after) {
      cur.end = e;
      out.push(cur);
      cur = undefined;
    }
  }
  if (cur) out.push(cur);
  return out;
}

/** Content and result events of subagents, by parent_tool_use_id (the Agent tool_use id), in log order. */
export function subagentChildren(events: readonly Event[]): Map<string, Event[]> {
  const out = new Map<string, Event[]>();
  for (const e of events) {
    const p = e.payload;
    const parent = p.case === "content" || p.case === "result" ? p.value.parentToolUseId : "";
    if (parent === "") continue;
    const list = out.get(parent);
    if (list) list.push(e);
    else out.set(parent, [e]);
  }
  return out;
}

/** A user message sent mid-turn that the CLI has not taken up yet. */
export interface PendingMessage {
  /** Seq of its input_sent. */
  seq: bigint;
  /** The message text. */
  text: string;
}

/**
 * Incremental pending-message state. {@link list} returns the same array
 * until the queue changes; arrays handed out are never mutated afterwards.
 */
export class PendingFold {
  private queue: PendingMessage[] = [];
  private view: PendingMessage[] | undefined;

  /** Applies the next event of the log. `turnBefore`: a turn was in progress before it. */
  apply(e: Event, turnBefore: boolean): void {
    const p = e.payload;
    if (p.case === "inputSent" && turnBefore && p.value.source === InputSource.USER) {
      this.queue.push({ seq: e.seq, text: p.value.text });
      this.view = undefined;
    } else if (
      (p.case === "content" && p.value.parentToolUseId === "") ||
      (p.case === "turnEnd" && !p.value.compact) ||
      p.case === "runEnd"
    ) {
      if (this.queue.length === 0) return;
      this.queue = [];
      this.view = undefined;
    }
  }

  /** The queued messages, oldest first (treat as read-only). */
  list(): PendingMessage[] {
    return (this.view ??= this.queue.slice());
  }
}

/**
 * User messages queued into a running turn and not taken up yet: an
 * `input_sent` with source USER while a turn is in progress is pending until
 * the next main-thread `content`, or until the turn ends (non-compact
 * `turn_end`, or `run_end`). Subagent content does not take it up.
 */
export function derivePendingMessages(events: readonly Event[]): PendingMessage[] {
  const sf = new StatusFold();
  const pf = new PendingFold();
  for (const e of events) {
    const before = sf.turnInProgress();
    sf.apply(e);
    pf.apply(e, before);
  }
  return pf.list();
}
