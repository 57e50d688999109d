// @agent-harness/client/client: the reconnecting session helper. Bring any
// connect-es transport: createGrpcWebTransport (@connectrpc/connect-web) in
// browsers, createGrpcTransport (@connectrpc/connect-node) in Node. Also
// readFullEvent: an event streamed cut down (`truncated`) fetched whole. Every
// call naming a session carries it in `x-session-id` (routing.ts). How
// current a handle's state is: connection.ts.

export * from "./session.js";
export * from "./full-event.js";
export * from "./connection.js";
export { NODE_HEADER, SESSION_HEADER, sessionHeaders, sessionRouting } from "./routing.js";
export type { Activity, ActivityKind, Derived, SessionUsageTotals, Settings, Status } from "./derive/index.js";
export { EMPTY_PARTIAL, partialMainText, partialMainThread, partialToolOutput } from "./partial.js";
export type { PartialBlock, PartialMessage } from "./partial.js";
export { liveActivity } from "./live.js";
export { NO_UNRECORDED, unrecordedNote, unrecordedText } from "./unrecorded.js";
export type { Unrecorded } from "./unrecorded.js";
