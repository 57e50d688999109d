// Background tasks (backgrounded Bash, subagents, ...).
// A port of client-rs/protocol/src/derive/tasks.rs.

import type { Event } from "../gen/agentharness/v1/events_pb.js";

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

type StringKeys<T> = { [K in keyof T]: T[K] extends string ? K : never }[keyof T];

function set<T>(obj: T, key: StringKeys<T>, v: string): void {
  if (v !== "") (obj as Record<StringKeys<T>, string>)[key] = v;
}

/**
 * Incremental task state, in order of first appearance. A task object is
 * replaced (never mutated) when an event changes it, so {@link tasks} hands
 * out arrays and objects that later events leave alone: a new array when
 * anything changed, with unchanged tasks keeping their identity.
 */
export class TasksFold {
  private readonly list: BackgroundTask[] = [];
  private readonly index = new Map<string, number>();
  private running = 0;
  private view: BackgroundTask[] | undefined;

  /** A private copy of the task (created running when new), to change and store back. */
  private edit(id: string, seq: bigint): { t: BackgroundTask; i: number } {
    const i = this.index.get(id);
    if (i !== undefined) return { t: { ...this.list[i]! }, i };
    const t: BackgroundTask = {
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
    this.index.set(id, this.list.length);
    this.list.push(t);
    this.running++;
    return { t, i: this.list.length - 1 };
  }

  private store(i: number, t: BackgroundTask): void {
    this.list[i] = t;
    this.view = undefined;
  }

  private finish(t: BackgroundTask, s: TaskStatus, seq: bigint): void {
    if (t.status === "running") {
      t.status = s;
      t.endedSeq = seq;
      this.running--;
    }
  }

  /** Applies the next event of the log. */
  apply(e: Event): void {
    const p = e.payload;
    switch (p.case) {
      case "taskStarted": {
        const { t, i } = this.edit(p.value.taskId, e.seq);
        set(t, "taskType", p.value.taskType);
        set(t, "description", p.value.description);
        set(t, "toolUseId", p.value.toolUseId);
        set(t, "subagentType", p.value.subagentType);
        this.store(i, t);
        break;
      }
      case "taskUpdated": {
        const u = p.value;
        const { t, i } = this.edit(u.taskId, e.seq);
        set(t, "description", u.description);
        set(t, "error", u.error);
        set(t, "summary", u.summary);
        set(t, "lastToolName", u.lastToolName);
        if (u.totalTokens > 0n) t.totalTokens = Number(u.totalTokens);
        if (u.toolUses > 0) t.toolUses = u.toolUses;
        const s = terminalTaskStatus(u.status);
        if (s) this.finish(t, s, e.seq);
        this.store(i, t);
        break;
      }
      case "taskNotification": {
        const n = p.value;
        const { t, i } = this.edit(n.taskId, e.seq);
        set(t, "toolUseId", n.toolUseId);
        set(t, "outputFile", n.outputFile);
        set(t, "summary", n.summary);
        // A notification always means the task is over; an unknown status
        // still ends it (as completed) rather than leaving it running.
        this.finish(t, terminalTaskStatus(n.status) ?? "completed", e.seq);
        this.store(i, t);
        break;
      }
      case "runEnd":
        // The CLI's tasks live in its process group: they end with it.
        if (this.running === 0) break;
        this.list.forEach((old, i) => {
          if (old.status !== "running") return;
          const t = { ...old };
          this.finish(t, "stopped", e.seq);
          this.store(i, t);
        });
        break;
      default:
        break;
    }
  }

  /** True when any task is still running. */
  hasRunning(): boolean {
    return this.running > 0;
  }

  /** The tasks in order of first appearance (treat as read-only). */
  tasks(): BackgroundTask[] {
    return (this.view ??= this.list.slice());
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
  const f = new TasksFold();
  for (const e of events) f.apply(e);
  return f.tasks();
}

/** True when any background task is still running. */
export function hasRunningBackgroundTasks(events: readonly Event[]): boolean {
  const f = new TasksFold();
  for (const e of events) f.apply(e);
  return f.hasRunning();
}
