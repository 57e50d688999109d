// @agent-harness/client/protocol: the generated agentharness.v1 types and
// the derive functions (derive/: pure functions over a log, the classify
// helpers, and the incremental Fold), and the live-typing fold (partial.ts).
// React-free and transport-free; safe anywhere.

export * from "./gen/agentharness/v1/events_pb.js";
export * from "./gen/agentharness/v1/session_service_pb.js";
export * from "./derive/index.js";
export * from "./partial.js";
