//! The wire vocabulary: the values of the string fields whose meaning
//! clients match on. The server writes these constants and derive compares
//! against them, so a value is spelled once; docs/events.md lists them.
//! Each is the exact string on the wire (a test pins every one).

/// `RunError.kind`: a stable, machine-readable reason a run failed.
pub mod run_error_kind {
    /// The CLI process could not be started.
    pub const SPAWN_FAILED: &str = "spawn_failed";
    /// A stdout line was not a JSON object the normalizer could read.
    pub const BAD_LINE: &str = "bad_line";
    /// A stdout line exceeded the line limit and was dropped.
    pub const LINE_TOO_LARGE: &str = "line_too_large";
    /// The event log could not be written; the run was stopped.
    pub const STORAGE: &str = "storage";
    /// The run's task panicked.
    pub const PANIC: &str = "panic";
    /// The CLI could not resume the conversation it was spawned with (its
    /// transcript is gone); the next run starts a new conversation.
    pub const RESUME_FAILED: &str = "resume_failed";
    /// The run went beyond the launch policy and was ended.
    pub const POLICY: &str = "policy";
    /// The agent answered one of the harness's requests with an error
    /// (Codex: a JSON-RPC error other than a lost rollout); the message is
    /// the agent's. Also an ACP agent that lists no permission mode or
    /// model for what the run asked: the run ends before its first prompt.
    pub const CLI_ERROR: &str = "cli_error";
}

/// `StartConfig.agent`, `RunStart.agent`, `RunReady.agent`,
/// `Session.agent`: which agent runs a session. Besides the built-in names,
/// any name an operator gives an Agent Client Protocol agent
/// (`--acp-agent NAME=COMMAND`; `[a-z][a-z0-9_-]{0,31}`) is an agent.
pub mod agent {
    /// The claude CLI (also what an empty `StartConfig.agent` means).
    pub const CLAUDE: &str = "claude";
    /// OpenAI Codex, through its app-server.
    pub const CODEX: &str = "codex";

    /// The agent a `run_start` says its run ran: its `agent`, else (a log
    /// written before agents could be chosen) claude.
    pub fn of_run(agent: &str) -> &str {
        if agent.is_empty() { CLAUDE } else { agent }
    }
}

/// `AgentInfo.kind` (ListAgents): how the server speaks to an agent.
pub mod agent_kind {
    /// The claude CLI's stream-json.
    pub const CLAUDE: &str = "claude";
    /// Codex's app-server.
    pub const CODEX: &str = "codex";
    /// The Agent Client Protocol: an agent the operator configured by name.
    pub const ACP: &str = "acp";
}

/// `RunStart.trigger`: why the run was started.
pub mod trigger {
    /// A Start call.
    pub const START: &str = "start";
    /// A Send with no live process: the run resumes the session.
    pub const SEND: &str = "send";
    /// A control call that needs a process (rewind, fork, ...).
    pub const CONTROL: &str = "control";
}

/// `StopRequested.source`: who asked the run to stop.
pub mod stop_source {
    /// The Stop call.
    pub const USER: &str = "user";
    /// Server shutdown.
    pub const SHUTDOWN: &str = "shutdown";
    /// The idle timeout.
    pub const IDLE: &str = "idle";
    /// DeleteSession of a session with a live run.
    pub const DELETE: &str = "delete";
}

/// `RunEnd.source`: who recorded the run's end.
pub mod run_end_source {
    /// The server observed the process exit.
    pub const PROCESS: &str = "process";
    /// Start-up recovery inferred the end of a run a previous server left.
    pub const RECOVERY: &str = "recovery";
    /// Server shutdown ended the run.
    pub const SHUTDOWN: &str = "shutdown";
    /// DeleteSession ended the run.
    pub const DELETE: &str = "delete";
    /// The process could not be started.
    pub const SPAWN: &str = "spawn";
    /// The event log could not be written.
    pub const STORAGE: &str = "storage";
    /// The run went beyond the launch policy.
    pub const POLICY: &str = "policy";
    /// The run's task panicked.
    pub const PANIC: &str = "panic";
}

/// `PermissionResolved.by`: who answered a permission request.
pub mod resolved_by {
    /// The RespondPermission call.
    pub const USER: &str = "user";
    /// Nobody answered within the permission timeout.
    pub const TIMEOUT: &str = "timeout";
    /// The CLI withdrew the request.
    pub const CANCELLED: &str = "cancelled";
    /// The process went away with the request open.
    pub const RUN_END: &str = "run_end";
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every constant is the string on the wire today: a rename here is a
    /// wire change and must fail.
    #[test]
    fn constants_are_the_wire_strings() {
        let pinned: &[(&str, &str)] = &[
            (run_error_kind::SPAWN_FAILED, "spawn_failed"),
            (run_error_kind::BAD_LINE, "bad_line"),
            (run_error_kind::LINE_TOO_LARGE, "line_too_large"),
            (run_error_kind::STORAGE, "storage"),
            (run_error_kind::PANIC, "panic"),
            (run_error_kind::RESUME_FAILED, "resume_failed"),
            (run_error_kind::POLICY, "policy"),
            (trigger::START, "start"),
            (trigger::SEND, "send"),
            (trigger::CONTROL, "control"),
            (stop_source::USER, "user"),
            (stop_source::SHUTDOWN, "shutdown"),
            (stop_source::IDLE, "idle"),
            (stop_source::DELETE, "delete"),
            (run_end_source::PROCESS, "process"),
            (run_end_source::RECOVERY, "recovery"),
            (run_end_source::SHUTDOWN, "shutdown"),
            (run_end_source::DELETE, "delete"),
            (run_end_source::SPAWN, "spawn"),
            (run_end_source::STORAGE, "storage"),
            (run_end_source::POLICY, "policy"),
            (run_end_source::PANIC, "panic"),
            (resolved_by::USER, "user"),
            (resolved_by::TIMEOUT, "timeout"),
            (resolved_by::CANCELLED, "cancelled"),
            (resolved_by::RUN_END, "run_end"),
            (agent::CLAUDE, "claude"),
            (agent::CODEX, "codex"),
            (agent_kind::CLAUDE, "claude"),
            (agent_kind::CODEX, "codex"),
            (agent_kind::ACP, "acp"),
        ];
        for (constant, wire) in pinned {
            assert_eq!(constant, wire);
        }
    }
}
