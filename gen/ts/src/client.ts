// @agent-harness/client/client: the reconnecting session helper. Bring any
// connect-es transport: createGrpcWebTransport (@connectrpc/connect-web) in
// browsers, createGrpcTransport (@connectrpc/connect-node) in Node.

export * from "./session.js";
export type { Activity, ActivityKind, Derived, SessionUsageTotals, Status } from "./derive/index.js";
