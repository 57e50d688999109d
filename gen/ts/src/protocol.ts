// @agent-harness/client/protocol: the generated agentharness.v1 types and
// the derive functions (derive/: pure functions over a log, the classify
// helpers, and the incremental Fold), the live-typing fold (partial.ts), the
// live activity (live.ts), the typing a broken stream left behind
// (unrecorded.ts), and the wire vocabulary (vocab.ts).
// React-free and transport-free; safe anywhere.

export * from "./gen/agentharness/v1/events_pb.js";
export * from "./gen/agentharness/v1/session_service_pb.js";
export * from "./derive/index.js";
export * from "./partial.js";
export * from "./live.js";
export * from "./unrecorded.js";
export { vocab } from "./vocab.js";
