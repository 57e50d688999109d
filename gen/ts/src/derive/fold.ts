// Every derivation at once, incrementally, plus the resume id and the
// GetSession summary. A port of client-rs/protocol/src/derive/mod.rs (Fold, Derived,
// derive_all, resume_id, session).

import { create } from "@bufbuild/protobuf";
import type { Timestamp } from "@bufbuild/protobuf/wkt";
import type { Event } from "../gen/agentharness/v1/events_pb.js";
import {
  SessionSchema,
  SessionStatus,
  SessionUsageSchema,
  type Session,
} from "../gen/agentharness/v1/session_service_pb.js";
import { ActivityFold, type Activity } from "./activity.js";
import { PendingFold, type PendingMessage } from "./classify.js";
import { PermissionsFold, type PendingPermission } from "./permissions.js";
import { PlanFold, type PlanOutcome } from "./plan.js";
import { SettingsFold, type Settings } from "./settings.js";
import { StatusFold, type Status } from "./status.js";
import { TitleFold } from "./title.js";
import { TasksFold, type BackgroundTask } from "./tasks.js";
import { UsageFold, type SessionUsageTotals } from "./usage.js";
import { WakeupFold, type ScheduledWakeup } from "./wakeup.js";
import { vocab } from "../vocab.js";

/** The `run_error` kind recorded when the CLI could not resume its conversation. */
export const RESUME_FAILED = vocab.runErrorKind.RESUME_FAILED;

/**
 * The CLI session the next run resumes: the latest `run_ready`'s non-empty
 * resume_id, unless a `run_error{kind: "resume_failed"}` came after it (the
 * CLI could not load that conversation; the next run starts a new one):
 * then undefined until a later `run_ready`.
 */
export function deriveResumeId(events: readonly Event[]): string | undefined {
  for (let i = events.length - 1; i >= 0; i--) {
    const p = events[i]!.payload;
    if (p.case === "runReady" && p.value.resumeId !== "") return p.value.resumeId;
    if (p.case === "runError" && p.value.kind === RESUME_FAILED) return undefined;
  }
  return undefined;
}

/** Where the session's earlier context was lost (client-rs `derive::ContextLost`). */
export interface ContextLost {
  /** The CLI session id that could not be resumed (`RunError.resumeId`). */
  resumeId: string;
  /** The seq of that run_error: everything before it is gone from the model's view. */
  seq: bigint;
}

/**
 * The latest `run_error{kind: "resume_failed"}`, if any: the point before
 * which the conversation's context is gone. It stays the latest loss for
 * good (the new conversation that follows does not bring it back).
 */
export function deriveContextLost(events: readonly Event[]): ContextLost | undefined {
  for (let i = events.length - 1; i >= 0; i--) {
    const e = events[i]!;
    if (e.payload.case === "runError" && e.payload.value.kind === RESUME_FAILED)
      return { resumeId: e.payload.value.resumeId, seq: e.seq };
  }
  return undefined;
}

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
  /** See {@link deriveContextLost}. */
  contextLost: ContextLost | undefined;
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
  /** See {@link deriveSettings}. */
  settings: Settings;
  /** See {@link deriveTitle}. */
  title: string;
  /** The working directory of the latest runStart ("" before any). */
  cwd: string;
  /** When the first event was appended (undefined for an empty log). */
  createdAt: Timestamp | undefined;
  /** When the newest event was appended: the last activity. */
  updatedAt: Timestamp | undefined;
}

const PROTO_STATUS: Record<Status, SessionStatus> = {
  idle: SessionStatus.IDLE,
  starting: SessionStatus.STARTING,
  streaming: SessionStatus.STREAMING,
  stopping: SessionStatus.STOPPING,
};

/**
 * Every derivation at once, incrementally (client-rs `derive::Fold`): apply
 * the events of a log in order and read any value at any point; each getter
 * gives what the matching `derive*` function gives over the events applied
 * so far. O(1) amortized per event.
 *
 * Values handed out are shared, not copied: treat them as read-only. Later
 * events never mutate them. An object or array getter returns the same
 * object until its value changes and a new one after, so identity
 * comparison (React memo, useSyncExternalStore) sees every change.
 *
 * ```ts
 * const fold = new Fold();
 * for (const e of events) fold.apply(e);
 * fold.status(); // === deriveStatus(events)
 * ```
 */
export class Fold {
  private readonly sf = new StatusFold();
  private readonly uf = new UsageFold();
  private readonly af = new ActivityFold();
  private readonly tf = new TasksFold();
  private readonly pf = new PermissionsFold();
  private readonly wf = new WakeupFold();
  private readonly plf = new PlanFold();
  private readonly mf = new PendingFold();
  private readonly stf = new SettingsFold();
  private readonly tif = new TitleFold();
  private resume: string | undefined;
  private agent: string | undefined;
  private lost: ContextLost | undefined;
  private applied = 0;
  private snap: Derived | undefined;

  /** A fold over `events` (the state of an empty log when none). */
  static from(events: Iterable<Event> = []): Fold {
    const f = new Fold();
    for (const e of events) f.apply(e);
    return f;
  }

  /** Applies the next event of the log. */
  apply(e: Event): void {
    const before = this.sf.turnInProgress();
    this.sf.apply(e);
    const began = !before && this.sf.turnInProgress();
    this.uf.apply(e);
    this.af.apply(e, began);
    this.tf.apply(e);
    this.pf.apply(e);
    this.wf.apply(e);
    this.plf.apply(e);
    this.mf.apply(e, before);
    this.stf.apply(e);
    this.tif.apply(e);
    // The agent of the latest run; an empty one is a log from before agents could be chosen: claude.
    if (e.payload.case === "runStart") this.agent = e.payload.value.agent || vocab.agent.CLAUDE;
    if (e.payload.case === "runReady" && e.payload.value.resumeId !== "") this.resume = e.payload.value.resumeId;
    if (e.payload.case === "runError" && e.payload.value.kind === RESUME_FAILED) {
      this.resume = undefined;
      this.lost = { resumeId: e.payload.value.resumeId, seq: e.seq };
    }
    this.applied++;
    this.snap = undefined;
  }

  /** Number of events applied. */
  get length(): number {
    return this.applied;
  }

  /** The highest seq applied (0n for an empty log). */
  headSeq(): bigint {
    return this.sf.headSeq();
  }

  /** See {@link deriveStatus}. */
  status(): Status {
    return this.sf.status();
  }

  /** See {@link deriveProcessAlive}. */
  processAlive(): boolean {
    return this.sf.processAlive();
  }

  /** True while a turn (or start-up with input) is in progress. */
  turnInProgress(): boolean {
    return this.sf.turnInProgress();
  }

  /** The current or last run id. */
  runId(): string | undefined {
    return this.sf.currentRunId();
  }

  /** See {@link deriveResumeId}. */
  resumeId(): string | undefined {
    return this.resume;
  }

  /** See {@link deriveContextLost}. */
  contextLost(): ContextLost | undefined {
    return this.lost;
  }

  /** See {@link deriveUsage}. */
  usage(): SessionUsageTotals {
    return this.uf.usage();
  }

  /** See {@link deriveActivity}. */
  activity(): Activity {
    return this.af.activity(this.sf.status(), this.pf);
  }

  /** See {@link deriveBackgroundTasks}. */
  backgroundTasks(): BackgroundTask[] {
    return this.tf.tasks();
  }

  /** See {@link hasRunningBackgroundTasks}. */
  hasRunningBackgroundTasks(): boolean {
    return this.tf.hasRunning();
  }

  /** See {@link derivePendingPermissions}. */
  pendingPermissions(): PendingPermission[] {
    return this.pf.pending();
  }

  /** Number of pending permission requests. */
  pendingPermissionCount(): number {
    return this.pf.count();
  }

  /** See {@link derivePendingMessages}. */
  pendingMessages(): PendingMessage[] {
    return this.mf.list();
  }

  /** See {@link derivePlanOutcomes}. */
  planOutcomes(): PlanOutcome[] {
    return this.plf.plans();
  }

  /** See {@link deriveScheduledWakeup}. */
  scheduledWakeup(): ScheduledWakeup | undefined {
    return this.wf.current();
  }

  /** See {@link deriveSettings}. */
  settings(): Settings {
    return this.stf.current();
  }

  /** See {@link deriveTitle}. */
  title(): string {
    return this.tif.title();
  }

  /** The working directory of the latest runStart ("" before any). */
  cwd(): string {
    return this.tif.cwd();
  }

  /** When the first event was appended (undefined for an empty log). */
  createdAt(): Timestamp | undefined {
    return this.tif.createdAt();
  }

  /** When the newest event was appended: the last activity. */
  updatedAt(): Timestamp | undefined {
    return this.tif.updatedAt();
  }

  /**
   * Everything at once (what {@link deriveAll} returns). The same object
   * until the next {@link apply}; its parts keep their identity while
   * their values do not change.
   */
  snapshot(): Derived {
    return (this.snap ??= {
      headSeq: this.sf.headSeq(),
      status: this.sf.status(),
      processAlive: this.sf.processAlive(),
      turnInProgress: this.sf.turnInProgress(),
      runId: this.sf.currentRunId(),
      resumeId: this.resume,
      contextLost: this.lost,
      usage: this.uf.usage(),
      activity: this.activity(),
      backgroundTasks: this.tf.tasks(),
      hasRunningBackgroundTasks: this.tf.hasRunning(),
      pendingPermissions: this.pf.pending(),
      pendingMessages: this.mf.list(),
      planOutcomes: this.plf.plans(),
      scheduledWakeup: this.wf.current(),
      settings: this.stf.current(),
      title: this.tif.title(),
      cwd: this.tif.cwd(),
      createdAt: this.tif.createdAt(),
      updatedAt: this.tif.updatedAt(),
    });
  }

  /** What GetSession/ListSessions return for this log (see {@link deriveSession}). */
  session(sessionId: string): Session {
    const u = this.uf.usage();
    return create(SessionSchema, {
      sessionId,
      headSeq: this.sf.headSeq(),
      status: PROTO_STATUS[this.sf.status()],
      processAlive: this.sf.processAlive(),
      resumeId: this.resume ?? "",
      usage: create(SessionUsageSchema, {
        inputTokens: BigInt(u.inputTokens),
        outputTokens: BigInt(u.outputTokens),
        cacheCreationInputTokens: BigInt(u.cacheCreationInputTokens),
        cacheReadInputTokens: BigInt(u.cacheReadInputTokens),
        costUsd: u.costUsd,
        contextTokens: BigInt(u.contextTokens),
        contextWindow: BigInt(u.contextWindow),
        turns: u.turns,
      }),
      activity: this.activity().label,
      pendingPermissions: this.pf.count(),
      runId: this.sf.currentRunId() ?? "",
      lostResumeId: this.lost?.resumeId ?? "",
      model: this.stf.current().model ?? "",
      permissionMode: this.stf.current().permissionMode ?? "",
      maxThinkingTokens: this.stf.current().maxThinkingTokens,
      agent: this.agent ?? "",
      title: this.tif.title(),
      cwd: this.tif.cwd(),
      createdAt: this.tif.createdAt(),
      updatedAt: this.tif.updatedAt(),
    });
  }
}

/** Every derivation this port implements, in one pass over the log. */
export function deriveAll(events: readonly Event[]): Derived {
  return Fold.from(events).snapshot();
}

/**
 * A session's derived state as the API returns it (GetSession,
 * ListSessions): head seq, status, process alive, resume id ("" when none),
 * usage, the activity label, the pending permission count, the current or
 * last run id, the lost resume id and the settings in force (model,
 * permission mode, thinking budget), the agent of the latest run, the
 * title, the cwd and the times of the first and the newest event.
 */
export function deriveSession(sessionId: string, events: readonly Event[]): Session {
  return Fold.from(events).session(sessionId);
}
