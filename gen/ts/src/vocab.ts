// The wire vocabulary: the values of the string fields whose meaning clients
// match on, the same constants as the Rust crate's `vocab` module (which the
// server writes). docs/events.md lists them with their meaning.

export const vocab = {
  /** `RunError.kind`: a stable, machine-readable reason a run failed. */
  runErrorKind: {
    SPAWN_FAILED: "spawn_failed",
    BAD_LINE: "bad_line",
    LINE_TOO_LARGE: "line_too_large",
    STORAGE: "storage",
    PANIC: "panic",
    RESUME_FAILED: "resume_failed",
    POLICY: "policy",
    CLI_ERROR: "cli_error",
  },
  /** `RunStart.trigger`: why the run was started. */
  trigger: {
    START: "start",
    SEND: "send",
    CONTROL: "control",
  },
  /** `StopRequested.source`: who asked the run to stop. */
  stopSource: {
    USER: "user",
    SHUTDOWN: "shutdown",
    IDLE: "idle",
    DELETE: "delete",
  },
  /** `RunEnd.source`: who recorded the run's end. */
  runEndSource: {
    PROCESS: "process",
    RECOVERY: "recovery",
    SHUTDOWN: "shutdown",
    DELETE: "delete",
    SPAWN: "spawn",
    STORAGE: "storage",
    POLICY: "policy",
    PANIC: "panic",
  },
  /** `PermissionResolved.by`: who answered a permission request. */
  resolvedBy: {
    USER: "user",
    TIMEOUT: "timeout",
    CANCELLED: "cancelled",
    RUN_END: "run_end",
  },
  /**
   * `StartConfig.agent`, `RunStart.agent`, `RunReady.agent`, `Session.agent`:
   * which agent runs a session. An empty `StartConfig.agent` means claude, and
   * so does an empty `RunStart.agent` (a log written before agents could be
   * chosen).
   */
  agent: {
    CLAUDE: "claude",
    CODEX: "codex",
  },
  /** `AgentInfo.kind` (ListAgents): how the server speaks to an agent. */
  agentKind: {
    CLAUDE: "claude",
    CODEX: "codex",
    ACP: "acp",
  },
} as const;
