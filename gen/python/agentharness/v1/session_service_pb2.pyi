import datetime

from agentharness.v1 import events_pb2 as _events_pb2
from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class DeltaBlockType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    DELTA_BLOCK_TYPE_UNSPECIFIED: _ClassVar[DeltaBlockType]
    DELTA_BLOCK_TYPE_TEXT: _ClassVar[DeltaBlockType]
    DELTA_BLOCK_TYPE_THINKING: _ClassVar[DeltaBlockType]
    DELTA_BLOCK_TYPE_TOOL_INPUT: _ClassVar[DeltaBlockType]
    DELTA_BLOCK_TYPE_TOOL_OUTPUT: _ClassVar[DeltaBlockType]

class SessionStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SESSION_STATUS_UNSPECIFIED: _ClassVar[SessionStatus]
    SESSION_STATUS_IDLE: _ClassVar[SessionStatus]
    SESSION_STATUS_STARTING: _ClassVar[SessionStatus]
    SESSION_STATUS_STREAMING: _ClassVar[SessionStatus]
    SESSION_STATUS_STOPPING: _ClassVar[SessionStatus]

class SessionOrder(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SESSION_ORDER_UNSPECIFIED: _ClassVar[SessionOrder]
    SESSION_ORDER_SESSION_ID: _ClassVar[SessionOrder]
    SESSION_ORDER_RECENT_ACTIVITY: _ClassVar[SessionOrder]
    SESSION_ORDER_CWD: _ClassVar[SessionOrder]

class FullEventPart(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    FULL_EVENT_PART_UNSPECIFIED: _ClassVar[FullEventPart]
    FULL_EVENT_PART_CLI_LINE: _ClassVar[FullEventPart]
    FULL_EVENT_PART_EVENT: _ClassVar[FullEventPart]
    FULL_EVENT_PART_EVENT_JSON: _ClassVar[FullEventPart]
DELTA_BLOCK_TYPE_UNSPECIFIED: DeltaBlockType
DELTA_BLOCK_TYPE_TEXT: DeltaBlockType
DELTA_BLOCK_TYPE_THINKING: DeltaBlockType
DELTA_BLOCK_TYPE_TOOL_INPUT: DeltaBlockType
DELTA_BLOCK_TYPE_TOOL_OUTPUT: DeltaBlockType
SESSION_STATUS_UNSPECIFIED: SessionStatus
SESSION_STATUS_IDLE: SessionStatus
SESSION_STATUS_STARTING: SessionStatus
SESSION_STATUS_STREAMING: SessionStatus
SESSION_STATUS_STOPPING: SessionStatus
SESSION_ORDER_UNSPECIFIED: SessionOrder
SESSION_ORDER_SESSION_ID: SessionOrder
SESSION_ORDER_RECENT_ACTIVITY: SessionOrder
SESSION_ORDER_CWD: SessionOrder
FULL_EVENT_PART_UNSPECIFIED: FullEventPart
FULL_EVENT_PART_CLI_LINE: FullEventPart
FULL_EVENT_PART_EVENT: FullEventPart
FULL_EVENT_PART_EVENT_JSON: FullEventPart

class StartRequest(_message.Message):
    __slots__ = ("session_id", "config", "idempotency_key")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    CONFIG_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    config: _events_pb2.StartConfig
    idempotency_key: str
    def __init__(self, session_id: _Optional[str] = ..., config: _Optional[_Union[_events_pb2.StartConfig, _Mapping]] = ..., idempotency_key: _Optional[str] = ...) -> None: ...

class StartResponse(_message.Message):
    __slots__ = ("run_id", "process_id")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    PROCESS_ID_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    process_id: str
    def __init__(self, run_id: _Optional[str] = ..., process_id: _Optional[str] = ...) -> None: ...

class SendRequest(_message.Message):
    __slots__ = ("session_id", "input", "content_blocks", "idempotency_key")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    INPUT_FIELD_NUMBER: _ClassVar[int]
    CONTENT_BLOCKS_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    input: str
    content_blocks: _containers.RepeatedCompositeFieldContainer[_struct_pb2.Struct]
    idempotency_key: str
    def __init__(self, session_id: _Optional[str] = ..., input: _Optional[str] = ..., content_blocks: _Optional[_Iterable[_Union[_struct_pb2.Struct, _Mapping]]] = ..., idempotency_key: _Optional[str] = ...) -> None: ...

class SendResponse(_message.Message):
    __slots__ = ("run_id",)
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    def __init__(self, run_id: _Optional[str] = ...) -> None: ...

class StopRequest(_message.Message):
    __slots__ = ("session_id", "idempotency_key")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    idempotency_key: str
    def __init__(self, session_id: _Optional[str] = ..., idempotency_key: _Optional[str] = ...) -> None: ...

class StopResponse(_message.Message):
    __slots__ = ("stopping",)
    STOPPING_FIELD_NUMBER: _ClassVar[int]
    stopping: bool
    def __init__(self, stopping: _Optional[bool] = ...) -> None: ...

class SubscribeRequest(_message.Message):
    __slots__ = ("session_id", "after_seq", "include_deltas")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    AFTER_SEQ_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_DELTAS_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    after_seq: int
    include_deltas: bool
    def __init__(self, session_id: _Optional[str] = ..., after_seq: _Optional[int] = ..., include_deltas: _Optional[bool] = ...) -> None: ...

class SubscribeResponse(_message.Message):
    __slots__ = ("replay", "event", "caught_up", "heartbeat", "delta")
    REPLAY_FIELD_NUMBER: _ClassVar[int]
    EVENT_FIELD_NUMBER: _ClassVar[int]
    CAUGHT_UP_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_FIELD_NUMBER: _ClassVar[int]
    DELTA_FIELD_NUMBER: _ClassVar[int]
    replay: ReplayStart
    event: _events_pb2.Event
    caught_up: CaughtUp
    heartbeat: Heartbeat
    delta: Delta
    def __init__(self, replay: _Optional[_Union[ReplayStart, _Mapping]] = ..., event: _Optional[_Union[_events_pb2.Event, _Mapping]] = ..., caught_up: _Optional[_Union[CaughtUp, _Mapping]] = ..., heartbeat: _Optional[_Union[Heartbeat, _Mapping]] = ..., delta: _Optional[_Union[Delta, _Mapping]] = ...) -> None: ...

class Delta(_message.Message):
    __slots__ = ("run_id", "after_seq", "message_id", "index", "block_type", "tool_name", "tool_use_id", "parent_tool_use_id", "fragment", "snapshot")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    AFTER_SEQ_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    INDEX_FIELD_NUMBER: _ClassVar[int]
    BLOCK_TYPE_FIELD_NUMBER: _ClassVar[int]
    TOOL_NAME_FIELD_NUMBER: _ClassVar[int]
    TOOL_USE_ID_FIELD_NUMBER: _ClassVar[int]
    PARENT_TOOL_USE_ID_FIELD_NUMBER: _ClassVar[int]
    FRAGMENT_FIELD_NUMBER: _ClassVar[int]
    SNAPSHOT_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    after_seq: int
    message_id: str
    index: int
    block_type: DeltaBlockType
    tool_name: str
    tool_use_id: str
    parent_tool_use_id: str
    fragment: str
    snapshot: bool
    def __init__(self, run_id: _Optional[str] = ..., after_seq: _Optional[int] = ..., message_id: _Optional[str] = ..., index: _Optional[int] = ..., block_type: _Optional[_Union[DeltaBlockType, str]] = ..., tool_name: _Optional[str] = ..., tool_use_id: _Optional[str] = ..., parent_tool_use_id: _Optional[str] = ..., fragment: _Optional[str] = ..., snapshot: _Optional[bool] = ...) -> None: ...

class ReplayStart(_message.Message):
    __slots__ = ("reset", "from_seq", "head_seq")
    RESET_FIELD_NUMBER: _ClassVar[int]
    FROM_SEQ_FIELD_NUMBER: _ClassVar[int]
    HEAD_SEQ_FIELD_NUMBER: _ClassVar[int]
    reset: bool
    from_seq: int
    head_seq: int
    def __init__(self, reset: _Optional[bool] = ..., from_seq: _Optional[int] = ..., head_seq: _Optional[int] = ...) -> None: ...

class CaughtUp(_message.Message):
    __slots__ = ("head_seq",)
    HEAD_SEQ_FIELD_NUMBER: _ClassVar[int]
    head_seq: int
    def __init__(self, head_seq: _Optional[int] = ...) -> None: ...

class Heartbeat(_message.Message):
    __slots__ = ("head_seq",)
    HEAD_SEQ_FIELD_NUMBER: _ClassVar[int]
    head_seq: int
    def __init__(self, head_seq: _Optional[int] = ...) -> None: ...

class HistoryRequest(_message.Message):
    __slots__ = ("session_id", "before_seq", "limit")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    BEFORE_SEQ_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    before_seq: int
    limit: int
    def __init__(self, session_id: _Optional[str] = ..., before_seq: _Optional[int] = ..., limit: _Optional[int] = ...) -> None: ...

class HistoryResponse(_message.Message):
    __slots__ = ("events", "has_more")
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    HAS_MORE_FIELD_NUMBER: _ClassVar[int]
    events: _containers.RepeatedCompositeFieldContainer[_events_pb2.Event]
    has_more: bool
    def __init__(self, events: _Optional[_Iterable[_Union[_events_pb2.Event, _Mapping]]] = ..., has_more: _Optional[bool] = ...) -> None: ...

class RespondPermissionRequest(_message.Message):
    __slots__ = ("session_id", "request_id", "allow", "updated_input", "message", "idempotency_key")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    ALLOW_FIELD_NUMBER: _ClassVar[int]
    UPDATED_INPUT_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    request_id: str
    allow: bool
    updated_input: _struct_pb2.Struct
    message: str
    idempotency_key: str
    def __init__(self, session_id: _Optional[str] = ..., request_id: _Optional[str] = ..., allow: _Optional[bool] = ..., updated_input: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., message: _Optional[str] = ..., idempotency_key: _Optional[str] = ...) -> None: ...

class RespondPermissionResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class SessionUsage(_message.Message):
    __slots__ = ("input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens", "cost_usd", "context_tokens", "context_window", "turns")
    INPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    CACHE_CREATION_INPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    CACHE_READ_INPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    COST_USD_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_WINDOW_FIELD_NUMBER: _ClassVar[int]
    TURNS_FIELD_NUMBER: _ClassVar[int]
    input_tokens: int
    output_tokens: int
    cache_creation_input_tokens: int
    cache_read_input_tokens: int
    cost_usd: float
    context_tokens: int
    context_window: int
    turns: int
    def __init__(self, input_tokens: _Optional[int] = ..., output_tokens: _Optional[int] = ..., cache_creation_input_tokens: _Optional[int] = ..., cache_read_input_tokens: _Optional[int] = ..., cost_usd: _Optional[float] = ..., context_tokens: _Optional[int] = ..., context_window: _Optional[int] = ..., turns: _Optional[int] = ...) -> None: ...

class Session(_message.Message):
    __slots__ = ("session_id", "head_seq", "status", "process_alive", "resume_id", "usage", "activity", "pending_permissions", "run_id", "lost_resume_id", "model", "permission_mode", "max_thinking_tokens", "agent", "title", "cwd", "created_at", "updated_at")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    HEAD_SEQ_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    PROCESS_ALIVE_FIELD_NUMBER: _ClassVar[int]
    RESUME_ID_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    ACTIVITY_FIELD_NUMBER: _ClassVar[int]
    PENDING_PERMISSIONS_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    LOST_RESUME_ID_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    PERMISSION_MODE_FIELD_NUMBER: _ClassVar[int]
    MAX_THINKING_TOKENS_FIELD_NUMBER: _ClassVar[int]
    AGENT_FIELD_NUMBER: _ClassVar[int]
    TITLE_FIELD_NUMBER: _ClassVar[int]
    CWD_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    UPDATED_AT_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    head_seq: int
    status: SessionStatus
    process_alive: bool
    resume_id: str
    usage: SessionUsage
    activity: str
    pending_permissions: int
    run_id: str
    lost_resume_id: str
    model: str
    permission_mode: str
    max_thinking_tokens: int
    agent: str
    title: str
    cwd: str
    created_at: _timestamp_pb2.Timestamp
    updated_at: _timestamp_pb2.Timestamp
    def __init__(self, session_id: _Optional[str] = ..., head_seq: _Optional[int] = ..., status: _Optional[_Union[SessionStatus, str]] = ..., process_alive: _Optional[bool] = ..., resume_id: _Optional[str] = ..., usage: _Optional[_Union[SessionUsage, _Mapping]] = ..., activity: _Optional[str] = ..., pending_permissions: _Optional[int] = ..., run_id: _Optional[str] = ..., lost_resume_id: _Optional[str] = ..., model: _Optional[str] = ..., permission_mode: _Optional[str] = ..., max_thinking_tokens: _Optional[int] = ..., agent: _Optional[str] = ..., title: _Optional[str] = ..., cwd: _Optional[str] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., updated_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class GetSessionRequest(_message.Message):
    __slots__ = ("session_id",)
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    def __init__(self, session_id: _Optional[str] = ...) -> None: ...

class GetSessionResponse(_message.Message):
    __slots__ = ("session",)
    SESSION_FIELD_NUMBER: _ClassVar[int]
    session: Session
    def __init__(self, session: _Optional[_Union[Session, _Mapping]] = ...) -> None: ...

class ListSessionsRequest(_message.Message):
    __slots__ = ("page_size", "page_token", "query", "statuses", "agent", "cwd", "order")
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    QUERY_FIELD_NUMBER: _ClassVar[int]
    STATUSES_FIELD_NUMBER: _ClassVar[int]
    AGENT_FIELD_NUMBER: _ClassVar[int]
    CWD_FIELD_NUMBER: _ClassVar[int]
    ORDER_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    query: str
    statuses: _containers.RepeatedScalarFieldContainer[SessionStatus]
    agent: str
    cwd: str
    order: SessionOrder
    def __init__(self, page_size: _Optional[int] = ..., page_token: _Optional[str] = ..., query: _Optional[str] = ..., statuses: _Optional[_Iterable[_Union[SessionStatus, str]]] = ..., agent: _Optional[str] = ..., cwd: _Optional[str] = ..., order: _Optional[_Union[SessionOrder, str]] = ...) -> None: ...

class ListSessionsResponse(_message.Message):
    __slots__ = ("sessions", "next_page_token", "total_size")
    SESSIONS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    TOTAL_SIZE_FIELD_NUMBER: _ClassVar[int]
    sessions: _containers.RepeatedCompositeFieldContainer[Session]
    next_page_token: str
    total_size: int
    def __init__(self, sessions: _Optional[_Iterable[_Union[Session, _Mapping]]] = ..., next_page_token: _Optional[str] = ..., total_size: _Optional[int] = ...) -> None: ...

class ReadFullEventRequest(_message.Message):
    __slots__ = ("session_id", "seq", "part", "chunk_size")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    PART_FIELD_NUMBER: _ClassVar[int]
    CHUNK_SIZE_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    seq: int
    part: FullEventPart
    chunk_size: int
    def __init__(self, session_id: _Optional[str] = ..., seq: _Optional[int] = ..., part: _Optional[_Union[FullEventPart, str]] = ..., chunk_size: _Optional[int] = ...) -> None: ...

class ReadFullEventResponse(_message.Message):
    __slots__ = ("chunk", "offset", "total_size")
    CHUNK_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    TOTAL_SIZE_FIELD_NUMBER: _ClassVar[int]
    chunk: bytes
    offset: int
    total_size: int
    def __init__(self, chunk: _Optional[bytes] = ..., offset: _Optional[int] = ..., total_size: _Optional[int] = ...) -> None: ...

class StopTaskRequest(_message.Message):
    __slots__ = ("session_id", "task_id", "idempotency_key")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    task_id: str
    idempotency_key: str
    def __init__(self, session_id: _Optional[str] = ..., task_id: _Optional[str] = ..., idempotency_key: _Optional[str] = ...) -> None: ...

class StopTaskResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetContextUsageRequest(_message.Message):
    __slots__ = ("session_id",)
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    def __init__(self, session_id: _Optional[str] = ...) -> None: ...

class ContextCategory(_message.Message):
    __slots__ = ("name", "tokens", "kind")
    NAME_FIELD_NUMBER: _ClassVar[int]
    TOKENS_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    name: str
    tokens: int
    kind: str
    def __init__(self, name: _Optional[str] = ..., tokens: _Optional[int] = ..., kind: _Optional[str] = ...) -> None: ...

class GetContextUsageResponse(_message.Message):
    __slots__ = ("total_tokens", "max_tokens", "raw_max_tokens", "percentage", "categories", "raw")
    TOTAL_TOKENS_FIELD_NUMBER: _ClassVar[int]
    MAX_TOKENS_FIELD_NUMBER: _ClassVar[int]
    RAW_MAX_TOKENS_FIELD_NUMBER: _ClassVar[int]
    PERCENTAGE_FIELD_NUMBER: _ClassVar[int]
    CATEGORIES_FIELD_NUMBER: _ClassVar[int]
    RAW_FIELD_NUMBER: _ClassVar[int]
    total_tokens: int
    max_tokens: int
    raw_max_tokens: int
    percentage: float
    categories: _containers.RepeatedCompositeFieldContainer[ContextCategory]
    raw: _struct_pb2.Struct
    def __init__(self, total_tokens: _Optional[int] = ..., max_tokens: _Optional[int] = ..., raw_max_tokens: _Optional[int] = ..., percentage: _Optional[float] = ..., categories: _Optional[_Iterable[_Union[ContextCategory, _Mapping]]] = ..., raw: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class SetModelRequest(_message.Message):
    __slots__ = ("session_id", "model", "idempotency_key")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    model: str
    idempotency_key: str
    def __init__(self, session_id: _Optional[str] = ..., model: _Optional[str] = ..., idempotency_key: _Optional[str] = ...) -> None: ...

class SetModelResponse(_message.Message):
    __slots__ = ("applied", "seq")
    APPLIED_FIELD_NUMBER: _ClassVar[int]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    applied: _events_pb2.SettingApplied
    seq: int
    def __init__(self, applied: _Optional[_Union[_events_pb2.SettingApplied, str]] = ..., seq: _Optional[int] = ...) -> None: ...

class SetPermissionModeRequest(_message.Message):
    __slots__ = ("session_id", "mode", "idempotency_key")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    mode: str
    idempotency_key: str
    def __init__(self, session_id: _Optional[str] = ..., mode: _Optional[str] = ..., idempotency_key: _Optional[str] = ...) -> None: ...

class SetPermissionModeResponse(_message.Message):
    __slots__ = ("applied", "seq")
    APPLIED_FIELD_NUMBER: _ClassVar[int]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    applied: _events_pb2.SettingApplied
    seq: int
    def __init__(self, applied: _Optional[_Union[_events_pb2.SettingApplied, str]] = ..., seq: _Optional[int] = ...) -> None: ...

class SetMaxThinkingTokensRequest(_message.Message):
    __slots__ = ("session_id", "max_thinking_tokens", "idempotency_key")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    MAX_THINKING_TOKENS_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    max_thinking_tokens: int
    idempotency_key: str
    def __init__(self, session_id: _Optional[str] = ..., max_thinking_tokens: _Optional[int] = ..., idempotency_key: _Optional[str] = ...) -> None: ...

class SetMaxThinkingTokensResponse(_message.Message):
    __slots__ = ("applied", "seq")
    APPLIED_FIELD_NUMBER: _ClassVar[int]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    applied: _events_pb2.SettingApplied
    seq: int
    def __init__(self, applied: _Optional[_Union[_events_pb2.SettingApplied, str]] = ..., seq: _Optional[int] = ...) -> None: ...

class RewindFilesRequest(_message.Message):
    __slots__ = ("session_id", "to_seq", "dry_run", "idempotency_key")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    TO_SEQ_FIELD_NUMBER: _ClassVar[int]
    DRY_RUN_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    to_seq: int
    dry_run: bool
    idempotency_key: str
    def __init__(self, session_id: _Optional[str] = ..., to_seq: _Optional[int] = ..., dry_run: _Optional[bool] = ..., idempotency_key: _Optional[str] = ...) -> None: ...

class RewindFilesResponse(_message.Message):
    __slots__ = ("files_changed", "insertions", "deletions", "seq")
    FILES_CHANGED_FIELD_NUMBER: _ClassVar[int]
    INSERTIONS_FIELD_NUMBER: _ClassVar[int]
    DELETIONS_FIELD_NUMBER: _ClassVar[int]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    files_changed: _containers.RepeatedScalarFieldContainer[str]
    insertions: int
    deletions: int
    seq: int
    def __init__(self, files_changed: _Optional[_Iterable[str]] = ..., insertions: _Optional[int] = ..., deletions: _Optional[int] = ..., seq: _Optional[int] = ...) -> None: ...

class DeleteSessionRequest(_message.Message):
    __slots__ = ("session_id", "idempotency_key")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    idempotency_key: str
    def __init__(self, session_id: _Optional[str] = ..., idempotency_key: _Optional[str] = ...) -> None: ...

class DeleteSessionResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListAgentsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListAgentsResponse(_message.Message):
    __slots__ = ("agents",)
    AGENTS_FIELD_NUMBER: _ClassVar[int]
    agents: _containers.RepeatedCompositeFieldContainer[AgentInfo]
    def __init__(self, agents: _Optional[_Iterable[_Union[AgentInfo, _Mapping]]] = ...) -> None: ...

class AgentInfo(_message.Message):
    __slots__ = ("name", "kind", "is_default")
    NAME_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    IS_DEFAULT_FIELD_NUMBER: _ClassVar[int]
    name: str
    kind: str
    is_default: bool
    def __init__(self, name: _Optional[str] = ..., kind: _Optional[str] = ..., is_default: _Optional[bool] = ...) -> None: ...

class SetTitleRequest(_message.Message):
    __slots__ = ("session_id", "title", "idempotency_key")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    TITLE_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    title: str
    idempotency_key: str
    def __init__(self, session_id: _Optional[str] = ..., title: _Optional[str] = ..., idempotency_key: _Optional[str] = ...) -> None: ...

class SetTitleResponse(_message.Message):
    __slots__ = ("seq",)
    SEQ_FIELD_NUMBER: _ClassVar[int]
    seq: int
    def __init__(self, seq: _Optional[int] = ...) -> None: ...
