// Derived state: pure functions over a session's event log.
//
// A port of client-rs/protocol/src/derive (the one specification; its doc comments
// are the contract), one module per Rust module:
//
//   status.ts       Status, StatusFold, deriveStatus, deriveProcessAlive
//   usage.ts        SessionUsageTotals, deriveUsage
//   activity.ts     Activity, ActivityKind, deriveActivity
//   tasks.ts        BackgroundTask, TaskStatus, deriveBackgroundTasks, hasRunningBackgroundTasks
//   permissions.ts  PendingPermission, derivePendingPermissions
//   wakeup.ts       ScheduledWakeup, deriveScheduledWakeup
//   plan.ts         PlanOutcome, PlanDecision, derivePlanOutcomes
//   settings.ts     Settings, deriveSettings
//   title.ts        TitleFold, deriveTitle, titleOfPrompt, DERIVED_TITLE_CHARS
//   classify.ts     classifyTool, groupEvents, subagentChildren, derivePendingMessages
//   fold.ts         Fold, Derived, deriveAll, deriveResumeId, deriveContextLost, deriveSession (Rust's mod.rs)
//
// Every derive* function is O(n) over the log; each is a fold over the
// module's incremental state, and Fold applies all of them at once, one
// event at a time, for O(1) amortized work per live event. The conformance
// vectors in tests/vectors pin both (tests/ts runs every vector against the
// functions and against Fold). Token counts are plain numbers (exact up to
// 2^53); seqs stay bigint like the generated types.

export { StatusFold, deriveProcessAlive, deriveStatus, type Status } from "./status.js";
export { deriveUsage, type SessionUsageTotals } from "./usage.js";
export { activityOf, deriveActivity, type Activity, type ActivityKind } from "./activity.js";
export {
  deriveBackgroundTasks,
  hasRunningBackgroundTasks,
  type BackgroundTask,
  type TaskStatus,
} from "./tasks.js";
export { derivePendingPermissions, type PendingPermission } from "./permissions.js";
export { deriveScheduledWakeup, type ScheduledWakeup } from "./wakeup.js";
export { derivePlanOutcomes, type PlanDecision, type PlanOutcome } from "./plan.js";
export { deriveSettings, type Settings } from "./settings.js";
export { DERIVED_TITLE_CHARS, TitleFold, deriveTitle, titleOfPrompt } from "./title.js";
export {
  classifyTool,
  derivePendingMessages,
  groupEvents,
  subagentChildren,
  type PendingMessage,
  type ToolCall,
  type ToolKind,
  type Turn,
} from "./classify.js";
export {
  Fold,
  RESUME_FAILED,
  deriveAll,
  deriveContextLost,
  deriveResumeId,
  deriveSession,
  type ContextLost,
  type Derived,
} from "./fold.js";
