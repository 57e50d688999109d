import datetime

from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class RunEndReason(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    RUN_END_REASON_UNSPECIFIED: _ClassVar[RunEndReason]
    RUN_END_REASON_COMPLETED: _ClassVar[RunEndReason]
    RUN_END_REASON_STOPPED: _ClassVar[RunEndReason]
    RUN_END_REASON_INTERRUPTED: _ClassVar[RunEndReason]
    RUN_END_REASON_ERROR: _ClassVar[RunEndReason]
    RUN_END_REASON_PROCESS_EXIT: _ClassVar[RunEndReason]
    RUN_END_REASON_IDLE_TIMEOUT: _ClassVar[RunEndReason]
    RUN_END_REASON_SERVER_RESTART: _ClassVar[RunEndReason]
    RUN_END_REASON_IDLE_EVICTED: _ClassVar[RunEndReason]

class InputSource(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    INPUT_SOURCE_UNSPECIFIED: _ClassVar[InputSource]
    INPUT_SOURCE_INITIAL: _ClassVar[InputSource]
    INPUT_SOURCE_USER: _ClassVar[InputSource]
    INPUT_SOURCE_WAKEUP: _ClassVar[InputSource]

class Setting(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SETTING_UNSPECIFIED: _ClassVar[Setting]
    SETTING_MODEL: _ClassVar[Setting]
    SETTING_PERMISSION_MODE: _ClassVar[Setting]
    SETTING_MAX_THINKING_TOKENS: _ClassVar[Setting]

class SettingApplied(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SETTING_APPLIED_UNSPECIFIED: _ClassVar[SettingApplied]
    SETTING_APPLIED_LIVE: _ClassVar[SettingApplied]
    SETTING_APPLIED_NEXT_SPAWN: _ClassVar[SettingApplied]
RUN_END_REASON_UNSPECIFIED: RunEndReason
RUN_END_REASON_COMPLETED: RunEndReason
RUN_END_REASON_STOPPED: RunEndReason
RUN_END_REASON_INTERRUPTED: RunEndReason
RUN_END_REASON_ERROR: RunEndReason
RUN_END_REASON_PROCESS_EXIT: RunEndReason
RUN_END_REASON_IDLE_TIMEOUT: RunEndReason
RUN_END_REASON_SERVER_RESTART: RunEndReason
RUN_END_REASON_IDLE_EVICTED: RunEndReason
INPUT_SOURCE_UNSPECIFIED: InputSource
INPUT_SOURCE_INITIAL: InputSource
INPUT_SOURCE_USER: InputSource
INPUT_SOURCE_WAKEUP: InputSource
SETTING_UNSPECIFIED: Setting
SETTING_MODEL: Setting
SETTING_PERMISSION_MODE: Setting
SETTING_MAX_THINKING_TOKENS: Setting
SETTING_APPLIED_UNSPECIFIED: SettingApplied
SETTING_APPLIED_LIVE: SettingApplied
SETTING_APPLIED_NEXT_SPAWN: SettingApplied

class Event(_message.Message):
    __slots__ = ("seq", "session_id", "run_id", "time", "cli_line", "truncated", "run_start", "run_ready", "run_end", "run_error", "stop_requested", "content", "result", "turn_end", "input_sent", "task_started", "task_updated", "task_notification", "permission_requested", "permission_resolved", "turn_start", "setting_changed", "files_rewound", "unreadable", "title_set")
    SEQ_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    TIME_FIELD_NUMBER: _ClassVar[int]
    CLI_LINE_FIELD_NUMBER: _ClassVar[int]
    TRUNCATED_FIELD_NUMBER: _ClassVar[int]
    RUN_START_FIELD_NUMBER: _ClassVar[int]
    RUN_READY_FIELD_NUMBER: _ClassVar[int]
    RUN_END_FIELD_NUMBER: _ClassVar[int]
    RUN_ERROR_FIELD_NUMBER: _ClassVar[int]
    STOP_REQUESTED_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    TURN_END_FIELD_NUMBER: _ClassVar[int]
    INPUT_SENT_FIELD_NUMBER: _ClassVar[int]
    TASK_STARTED_FIELD_NUMBER: _ClassVar[int]
    TASK_UPDATED_FIELD_NUMBER: _ClassVar[int]
    TASK_NOTIFICATION_FIELD_NUMBER: _ClassVar[int]
    PERMISSION_REQUESTED_FIELD_NUMBER: _ClassVar[int]
    PERMISSION_RESOLVED_FIELD_NUMBER: _ClassVar[int]
    TURN_START_FIELD_NUMBER: _ClassVar[int]
    SETTING_CHANGED_FIELD_NUMBER: _ClassVar[int]
    FILES_REWOUND_FIELD_NUMBER: _ClassVar[int]
    UNREADABLE_FIELD_NUMBER: _ClassVar[int]
    TITLE_SET_FIELD_NUMBER: _ClassVar[int]
    seq: int
    session_id: str
    run_id: str
    time: _timestamp_pb2.Timestamp
    cli_line: str
    truncated: Truncated
    run_start: RunStart
    run_ready: RunReady
    run_end: RunEnd
    run_error: RunError
    stop_requested: StopRequested
    content: Content
    result: Result
    turn_end: TurnEnd
    input_sent: InputSent
    task_started: TaskStarted
    task_updated: TaskUpdated
    task_notification: TaskNotification
    permission_requested: PermissionRequested
    permission_resolved: PermissionResolved
    turn_start: TurnStart
    setting_changed: SettingChanged
    files_rewound: FilesRewound
    unreadable: Unreadable
    title_set: TitleSet
    def __init__(self, seq: _Optional[int] = ..., session_id: _Optional[str] = ..., run_id: _Optional[str] = ..., time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., cli_line: _Optional[str] = ..., truncated: _Optional[_Union[Truncated, _Mapping]] = ..., run_start: _Optional[_Union[RunStart, _Mapping]] = ..., run_ready: _Optional[_Union[RunReady, _Mapping]] = ..., run_end: _Optional[_Union[RunEnd, _Mapping]] = ..., run_error: _Optional[_Union[RunError, _Mapping]] = ..., stop_requested: _Optional[_Union[StopRequested, _Mapping]] = ..., content: _Optional[_Union[Content, _Mapping]] = ..., result: _Optional[_Union[Result, _Mapping]] = ..., turn_end: _Optional[_Union[TurnEnd, _Mapping]] = ..., input_sent: _Optional[_Union[InputSent, _Mapping]] = ..., task_started: _Optional[_Union[TaskStarted, _Mapping]] = ..., task_updated: _Optional[_Union[TaskUpdated, _Mapping]] = ..., task_notification: _Optional[_Union[TaskNotification, _Mapping]] = ..., permission_requested: _Optional[_Union[PermissionRequested, _Mapping]] = ..., permission_resolved: _Optional[_Union[PermissionResolved, _Mapping]] = ..., turn_start: _Optional[_Union[TurnStart, _Mapping]] = ..., setting_changed: _Optional[_Union[SettingChanged, _Mapping]] = ..., files_rewound: _Optional[_Union[FilesRewound, _Mapping]] = ..., unreadable: _Optional[_Union[Unreadable, _Mapping]] = ..., title_set: _Optional[_Union[TitleSet, _Mapping]] = ...) -> None: ...

class Unreadable(_message.Message):
    __slots__ = ("reason", "size")
    REASON_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    reason: str
    size: int
    def __init__(self, reason: _Optional[str] = ..., size: _Optional[int] = ...) -> None: ...

class Truncated(_message.Message):
    __slots__ = ("original_size", "cli_line_size", "fields")
    ORIGINAL_SIZE_FIELD_NUMBER: _ClassVar[int]
    CLI_LINE_SIZE_FIELD_NUMBER: _ClassVar[int]
    FIELDS_FIELD_NUMBER: _ClassVar[int]
    original_size: int
    cli_line_size: int
    fields: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, original_size: _Optional[int] = ..., cli_line_size: _Optional[int] = ..., fields: _Optional[_Iterable[str]] = ...) -> None: ...

class StartConfig(_message.Message):
    __slots__ = ("prompt", "cwd", "resume", "env", "args", "content_blocks", "model", "permission_mode", "max_thinking_tokens", "fork", "agent")
    class EnvEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    PROMPT_FIELD_NUMBER: _ClassVar[int]
    CWD_FIELD_NUMBER: _ClassVar[int]
    RESUME_FIELD_NUMBER: _ClassVar[int]
    ENV_FIELD_NUMBER: _ClassVar[int]
    ARGS_FIELD_NUMBER: _ClassVar[int]
    CONTENT_BLOCKS_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    PERMISSION_MODE_FIELD_NUMBER: _ClassVar[int]
    MAX_THINKING_TOKENS_FIELD_NUMBER: _ClassVar[int]
    FORK_FIELD_NUMBER: _ClassVar[int]
    AGENT_FIELD_NUMBER: _ClassVar[int]
    prompt: str
    cwd: str
    resume: str
    env: _containers.ScalarMap[str, str]
    args: _containers.RepeatedScalarFieldContainer[str]
    content_blocks: _containers.RepeatedCompositeFieldContainer[_struct_pb2.Struct]
    model: str
    permission_mode: str
    max_thinking_tokens: int
    fork: Fork
    agent: str
    def __init__(self, prompt: _Optional[str] = ..., cwd: _Optional[str] = ..., resume: _Optional[str] = ..., env: _Optional[_Mapping[str, str]] = ..., args: _Optional[_Iterable[str]] = ..., content_blocks: _Optional[_Iterable[_Union[_struct_pb2.Struct, _Mapping]]] = ..., model: _Optional[str] = ..., permission_mode: _Optional[str] = ..., max_thinking_tokens: _Optional[int] = ..., fork: _Optional[_Union[Fork, _Mapping]] = ..., agent: _Optional[str] = ...) -> None: ...

class Fork(_message.Message):
    __slots__ = ("from_session_id", "at_seq", "message_uuid")
    FROM_SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    AT_SEQ_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_UUID_FIELD_NUMBER: _ClassVar[int]
    from_session_id: str
    at_seq: int
    message_uuid: str
    def __init__(self, from_session_id: _Optional[str] = ..., at_seq: _Optional[int] = ..., message_uuid: _Optional[str] = ...) -> None: ...

class RunStart(_message.Message):
    __slots__ = ("config", "adapter", "trigger", "lost_resume_id", "agent")
    CONFIG_FIELD_NUMBER: _ClassVar[int]
    ADAPTER_FIELD_NUMBER: _ClassVar[int]
    TRIGGER_FIELD_NUMBER: _ClassVar[int]
    LOST_RESUME_ID_FIELD_NUMBER: _ClassVar[int]
    AGENT_FIELD_NUMBER: _ClassVar[int]
    config: StartConfig
    adapter: str
    trigger: str
    lost_resume_id: str
    agent: str
    def __init__(self, config: _Optional[_Union[StartConfig, _Mapping]] = ..., adapter: _Optional[str] = ..., trigger: _Optional[str] = ..., lost_resume_id: _Optional[str] = ..., agent: _Optional[str] = ...) -> None: ...

class McpServer(_message.Message):
    __slots__ = ("name", "status")
    NAME_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    name: str
    status: str
    def __init__(self, name: _Optional[str] = ..., status: _Optional[str] = ...) -> None: ...

class RunReady(_message.Message):
    __slots__ = ("resume_id", "model", "tools", "cwd", "mcp_servers", "permission_mode", "cli_version", "pid", "agent")
    RESUME_ID_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    TOOLS_FIELD_NUMBER: _ClassVar[int]
    CWD_FIELD_NUMBER: _ClassVar[int]
    MCP_SERVERS_FIELD_NUMBER: _ClassVar[int]
    PERMISSION_MODE_FIELD_NUMBER: _ClassVar[int]
    CLI_VERSION_FIELD_NUMBER: _ClassVar[int]
    PID_FIELD_NUMBER: _ClassVar[int]
    AGENT_FIELD_NUMBER: _ClassVar[int]
    resume_id: str
    model: str
    tools: _containers.RepeatedScalarFieldContainer[str]
    cwd: str
    mcp_servers: _containers.RepeatedCompositeFieldContainer[McpServer]
    permission_mode: str
    cli_version: str
    pid: int
    agent: str
    def __init__(self, resume_id: _Optional[str] = ..., model: _Optional[str] = ..., tools: _Optional[_Iterable[str]] = ..., cwd: _Optional[str] = ..., mcp_servers: _Optional[_Iterable[_Union[McpServer, _Mapping]]] = ..., permission_mode: _Optional[str] = ..., cli_version: _Optional[str] = ..., pid: _Optional[int] = ..., agent: _Optional[str] = ...) -> None: ...

class RunEnd(_message.Message):
    __slots__ = ("reason", "exit_code", "signal", "inferred", "source", "stderr_tail")
    REASON_FIELD_NUMBER: _ClassVar[int]
    EXIT_CODE_FIELD_NUMBER: _ClassVar[int]
    SIGNAL_FIELD_NUMBER: _ClassVar[int]
    INFERRED_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    STDERR_TAIL_FIELD_NUMBER: _ClassVar[int]
    reason: RunEndReason
    exit_code: int
    signal: str
    inferred: bool
    source: str
    stderr_tail: str
    def __init__(self, reason: _Optional[_Union[RunEndReason, str]] = ..., exit_code: _Optional[int] = ..., signal: _Optional[str] = ..., inferred: _Optional[bool] = ..., source: _Optional[str] = ..., stderr_tail: _Optional[str] = ...) -> None: ...

class RunError(_message.Message):
    __slots__ = ("message", "kind", "resume_id")
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    RESUME_ID_FIELD_NUMBER: _ClassVar[int]
    message: str
    kind: str
    resume_id: str
    def __init__(self, message: _Optional[str] = ..., kind: _Optional[str] = ..., resume_id: _Optional[str] = ...) -> None: ...

class StopRequested(_message.Message):
    __slots__ = ("source",)
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    source: str
    def __init__(self, source: _Optional[str] = ...) -> None: ...

class Usage(_message.Message):
    __slots__ = ("input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
    INPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    CACHE_CREATION_INPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    CACHE_READ_INPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    input_tokens: int
    output_tokens: int
    cache_creation_input_tokens: int
    cache_read_input_tokens: int
    def __init__(self, input_tokens: _Optional[int] = ..., output_tokens: _Optional[int] = ..., cache_creation_input_tokens: _Optional[int] = ..., cache_read_input_tokens: _Optional[int] = ...) -> None: ...

class ContentBlock(_message.Message):
    __slots__ = ("type", "text", "thinking", "tool_use_id", "tool_name", "input", "raw")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    THINKING_FIELD_NUMBER: _ClassVar[int]
    TOOL_USE_ID_FIELD_NUMBER: _ClassVar[int]
    TOOL_NAME_FIELD_NUMBER: _ClassVar[int]
    INPUT_FIELD_NUMBER: _ClassVar[int]
    RAW_FIELD_NUMBER: _ClassVar[int]
    type: str
    text: str
    thinking: str
    tool_use_id: str
    tool_name: str
    input: _struct_pb2.Struct
    raw: _struct_pb2.Struct
    def __init__(self, type: _Optional[str] = ..., text: _Optional[str] = ..., thinking: _Optional[str] = ..., tool_use_id: _Optional[str] = ..., tool_name: _Optional[str] = ..., input: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., raw: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class Content(_message.Message):
    __slots__ = ("message_id", "model", "blocks", "usage", "parent_tool_use_id", "stop_reason", "error")
    MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    BLOCKS_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    PARENT_TOOL_USE_ID_FIELD_NUMBER: _ClassVar[int]
    STOP_REASON_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    message_id: str
    model: str
    blocks: _containers.RepeatedCompositeFieldContainer[ContentBlock]
    usage: Usage
    parent_tool_use_id: str
    stop_reason: str
    error: str
    def __init__(self, message_id: _Optional[str] = ..., model: _Optional[str] = ..., blocks: _Optional[_Iterable[_Union[ContentBlock, _Mapping]]] = ..., usage: _Optional[_Union[Usage, _Mapping]] = ..., parent_tool_use_id: _Optional[str] = ..., stop_reason: _Optional[str] = ..., error: _Optional[str] = ...) -> None: ...

class ToolResult(_message.Message):
    __slots__ = ("tool_use_id", "text", "is_error")
    TOOL_USE_ID_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    IS_ERROR_FIELD_NUMBER: _ClassVar[int]
    tool_use_id: str
    text: str
    is_error: bool
    def __init__(self, tool_use_id: _Optional[str] = ..., text: _Optional[str] = ..., is_error: _Optional[bool] = ...) -> None: ...

class Result(_message.Message):
    __slots__ = ("tool_results", "is_error", "parent_tool_use_id", "text", "tool_use_result")
    TOOL_RESULTS_FIELD_NUMBER: _ClassVar[int]
    IS_ERROR_FIELD_NUMBER: _ClassVar[int]
    PARENT_TOOL_USE_ID_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    TOOL_USE_RESULT_FIELD_NUMBER: _ClassVar[int]
    tool_results: _containers.RepeatedCompositeFieldContainer[ToolResult]
    is_error: bool
    parent_tool_use_id: str
    text: str
    tool_use_result: _struct_pb2.Value
    def __init__(self, tool_results: _Optional[_Iterable[_Union[ToolResult, _Mapping]]] = ..., is_error: _Optional[bool] = ..., parent_tool_use_id: _Optional[str] = ..., text: _Optional[str] = ..., tool_use_result: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ...) -> None: ...

class ModelUsage(_message.Message):
    __slots__ = ("model", "input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens", "cost_usd", "context_window", "max_output_tokens")
    MODEL_FIELD_NUMBER: _ClassVar[int]
    INPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    CACHE_READ_INPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    CACHE_CREATION_INPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    COST_USD_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_WINDOW_FIELD_NUMBER: _ClassVar[int]
    MAX_OUTPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    model: str
    input_tokens: int
    output_tokens: int
    cache_read_input_tokens: int
    cache_creation_input_tokens: int
    cost_usd: float
    context_window: int
    max_output_tokens: int
    def __init__(self, model: _Optional[str] = ..., input_tokens: _Optional[int] = ..., output_tokens: _Optional[int] = ..., cache_read_input_tokens: _Optional[int] = ..., cache_creation_input_tokens: _Optional[int] = ..., cost_usd: _Optional[float] = ..., context_window: _Optional[int] = ..., max_output_tokens: _Optional[int] = ...) -> None: ...

class TurnEnd(_message.Message):
    __slots__ = ("usage", "cost_usd", "duration_ms", "duration_api_ms", "is_error", "compact", "terminal_reason", "subtype", "num_turns", "result", "origin", "model_usage", "compact_trigger", "compact_pre_tokens", "api_error_status", "errors", "permission_denials")
    USAGE_FIELD_NUMBER: _ClassVar[int]
    COST_USD_FIELD_NUMBER: _ClassVar[int]
    DURATION_MS_FIELD_NUMBER: _ClassVar[int]
    DURATION_API_MS_FIELD_NUMBER: _ClassVar[int]
    IS_ERROR_FIELD_NUMBER: _ClassVar[int]
    COMPACT_FIELD_NUMBER: _ClassVar[int]
    TERMINAL_REASON_FIELD_NUMBER: _ClassVar[int]
    SUBTYPE_FIELD_NUMBER: _ClassVar[int]
    NUM_TURNS_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    ORIGIN_FIELD_NUMBER: _ClassVar[int]
    MODEL_USAGE_FIELD_NUMBER: _ClassVar[int]
    COMPACT_TRIGGER_FIELD_NUMBER: _ClassVar[int]
    COMPACT_PRE_TOKENS_FIELD_NUMBER: _ClassVar[int]
    API_ERROR_STATUS_FIELD_NUMBER: _ClassVar[int]
    ERRORS_FIELD_NUMBER: _ClassVar[int]
    PERMISSION_DENIALS_FIELD_NUMBER: _ClassVar[int]
    usage: Usage
    cost_usd: float
    duration_ms: int
    duration_api_ms: int
    is_error: bool
    compact: bool
    terminal_reason: str
    subtype: str
    num_turns: int
    result: str
    origin: str
    model_usage: _containers.RepeatedCompositeFieldContainer[ModelUsage]
    compact_trigger: str
    compact_pre_tokens: int
    api_error_status: int
    errors: _containers.RepeatedScalarFieldContainer[str]
    permission_denials: _containers.RepeatedCompositeFieldContainer[PermissionDenial]
    def __init__(self, usage: _Optional[_Union[Usage, _Mapping]] = ..., cost_usd: _Optional[float] = ..., duration_ms: _Optional[int] = ..., duration_api_ms: _Optional[int] = ..., is_error: _Optional[bool] = ..., compact: _Optional[bool] = ..., terminal_reason: _Optional[str] = ..., subtype: _Optional[str] = ..., num_turns: _Optional[int] = ..., result: _Optional[str] = ..., origin: _Optional[str] = ..., model_usage: _Optional[_Iterable[_Union[ModelUsage, _Mapping]]] = ..., compact_trigger: _Optional[str] = ..., compact_pre_tokens: _Optional[int] = ..., api_error_status: _Optional[int] = ..., errors: _Optional[_Iterable[str]] = ..., permission_denials: _Optional[_Iterable[_Union[PermissionDenial, _Mapping]]] = ...) -> None: ...

class PermissionDenial(_message.Message):
    __slots__ = ("tool_name", "tool_use_id", "tool_input")
    TOOL_NAME_FIELD_NUMBER: _ClassVar[int]
    TOOL_USE_ID_FIELD_NUMBER: _ClassVar[int]
    TOOL_INPUT_FIELD_NUMBER: _ClassVar[int]
    tool_name: str
    tool_use_id: str
    tool_input: _struct_pb2.Struct
    def __init__(self, tool_name: _Optional[str] = ..., tool_use_id: _Optional[str] = ..., tool_input: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class InputSent(_message.Message):
    __slots__ = ("text", "source", "content_blocks", "message_uuid")
    TEXT_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    CONTENT_BLOCKS_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_UUID_FIELD_NUMBER: _ClassVar[int]
    text: str
    source: InputSource
    content_blocks: _containers.RepeatedCompositeFieldContainer[_struct_pb2.Struct]
    message_uuid: str
    def __init__(self, text: _Optional[str] = ..., source: _Optional[_Union[InputSource, str]] = ..., content_blocks: _Optional[_Iterable[_Union[_struct_pb2.Struct, _Mapping]]] = ..., message_uuid: _Optional[str] = ...) -> None: ...

class TurnStart(_message.Message):
    __slots__ = ("origin",)
    ORIGIN_FIELD_NUMBER: _ClassVar[int]
    origin: str
    def __init__(self, origin: _Optional[str] = ...) -> None: ...

class TaskStarted(_message.Message):
    __slots__ = ("task_id", "task_type", "description", "tool_use_id", "subagent_type", "prompt")
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    TASK_TYPE_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    TOOL_USE_ID_FIELD_NUMBER: _ClassVar[int]
    SUBAGENT_TYPE_FIELD_NUMBER: _ClassVar[int]
    PROMPT_FIELD_NUMBER: _ClassVar[int]
    task_id: str
    task_type: str
    description: str
    tool_use_id: str
    subagent_type: str
    prompt: str
    def __init__(self, task_id: _Optional[str] = ..., task_type: _Optional[str] = ..., description: _Optional[str] = ..., tool_use_id: _Optional[str] = ..., subagent_type: _Optional[str] = ..., prompt: _Optional[str] = ...) -> None: ...

class TaskUpdated(_message.Message):
    __slots__ = ("task_id", "status", "description", "error", "summary", "last_tool_name", "total_tokens", "tool_uses")
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    SUMMARY_FIELD_NUMBER: _ClassVar[int]
    LAST_TOOL_NAME_FIELD_NUMBER: _ClassVar[int]
    TOTAL_TOKENS_FIELD_NUMBER: _ClassVar[int]
    TOOL_USES_FIELD_NUMBER: _ClassVar[int]
    task_id: str
    status: str
    description: str
    error: str
    summary: str
    last_tool_name: str
    total_tokens: int
    tool_uses: int
    def __init__(self, task_id: _Optional[str] = ..., status: _Optional[str] = ..., description: _Optional[str] = ..., error: _Optional[str] = ..., summary: _Optional[str] = ..., last_tool_name: _Optional[str] = ..., total_tokens: _Optional[int] = ..., tool_uses: _Optional[int] = ...) -> None: ...

class TaskNotification(_message.Message):
    __slots__ = ("task_id", "tool_use_id", "status", "output_file", "summary")
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    TOOL_USE_ID_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_FILE_FIELD_NUMBER: _ClassVar[int]
    SUMMARY_FIELD_NUMBER: _ClassVar[int]
    task_id: str
    tool_use_id: str
    status: str
    output_file: str
    summary: str
    def __init__(self, task_id: _Optional[str] = ..., tool_use_id: _Optional[str] = ..., status: _Optional[str] = ..., output_file: _Optional[str] = ..., summary: _Optional[str] = ...) -> None: ...

class PermissionRequested(_message.Message):
    __slots__ = ("request_id", "tool_name", "input", "suggestions", "tool_use_id", "description", "decision_reason", "blocked_path")
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    TOOL_NAME_FIELD_NUMBER: _ClassVar[int]
    INPUT_FIELD_NUMBER: _ClassVar[int]
    SUGGESTIONS_FIELD_NUMBER: _ClassVar[int]
    TOOL_USE_ID_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    DECISION_REASON_FIELD_NUMBER: _ClassVar[int]
    BLOCKED_PATH_FIELD_NUMBER: _ClassVar[int]
    request_id: str
    tool_name: str
    input: _struct_pb2.Struct
    suggestions: _containers.RepeatedCompositeFieldContainer[_struct_pb2.Value]
    tool_use_id: str
    description: str
    decision_reason: str
    blocked_path: str
    def __init__(self, request_id: _Optional[str] = ..., tool_name: _Optional[str] = ..., input: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., suggestions: _Optional[_Iterable[_Union[_struct_pb2.Value, _Mapping]]] = ..., tool_use_id: _Optional[str] = ..., description: _Optional[str] = ..., decision_reason: _Optional[str] = ..., blocked_path: _Optional[str] = ...) -> None: ...

class PermissionResolved(_message.Message):
    __slots__ = ("request_id", "allow", "by", "message", "updated_input")
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    ALLOW_FIELD_NUMBER: _ClassVar[int]
    BY_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    UPDATED_INPUT_FIELD_NUMBER: _ClassVar[int]
    request_id: str
    allow: bool
    by: str
    message: str
    updated_input: _struct_pb2.Struct
    def __init__(self, request_id: _Optional[str] = ..., allow: _Optional[bool] = ..., by: _Optional[str] = ..., message: _Optional[str] = ..., updated_input: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class SettingChanged(_message.Message):
    __slots__ = ("setting", "value", "applied")
    SETTING_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    APPLIED_FIELD_NUMBER: _ClassVar[int]
    setting: Setting
    value: str
    applied: SettingApplied
    def __init__(self, setting: _Optional[_Union[Setting, str]] = ..., value: _Optional[str] = ..., applied: _Optional[_Union[SettingApplied, str]] = ...) -> None: ...

class TitleSet(_message.Message):
    __slots__ = ("title",)
    TITLE_FIELD_NUMBER: _ClassVar[int]
    title: str
    def __init__(self, title: _Optional[str] = ...) -> None: ...

class FilesRewound(_message.Message):
    __slots__ = ("to_seq", "message_uuid", "files_changed", "insertions", "deletions")
    TO_SEQ_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_UUID_FIELD_NUMBER: _ClassVar[int]
    FILES_CHANGED_FIELD_NUMBER: _ClassVar[int]
    INSERTIONS_FIELD_NUMBER: _ClassVar[int]
    DELETIONS_FIELD_NUMBER: _ClassVar[int]
    to_seq: int
    message_uuid: str
    files_changed: _containers.RepeatedScalarFieldContainer[str]
    insertions: int
    deletions: int
    def __init__(self, to_seq: _Optional[int] = ..., message_uuid: _Optional[str] = ..., files_changed: _Optional[_Iterable[str]] = ..., insertions: _Optional[int] = ..., deletions: _Optional[int] = ...) -> None: ...
