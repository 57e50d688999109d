// Routing by session: every call that names a session also carries its id
// in the `x-session-id` header, so a balancer in front of several nodes can
// send all of one session's calls alike by hashing a header (it cannot read
// the request message). The server refuses a header that disagrees with the
// request's session_id.

import type { Interceptor } from "@connectrpc/connect";

/** The request header naming the session of a call. */
export const SESSION_HEADER = "x-session-id";

/** The response header naming the node that served a call. */
export const NODE_HEADER = "x-agent-harness-node";

/** `headers` (any HeadersInit, or none) plus `x-session-id: sessionId`. */
export function sessionHeaders(headers: HeadersInit | undefined, sessionId: string): Headers {
  const out = new Headers(headers);
  out.set(SESSION_HEADER, sessionId);
  return out;
}

/**
 * An interceptor adding `x-session-id` to every unary call whose request
 * names a session (for the generated client used directly, e.g. GetSession);
 * the session handle adds the header itself, streams included.
 */
export const sessionRouting: Interceptor = (next) => (req) => {
  if (!req.stream) {
    const id = (req.message as { sessionId?: unknown }).sessionId;
    if (typeof id === "string" && id !== "" && !req.header.has(SESSION_HEADER)) req.header.set(SESSION_HEADER, id);
  }
  return next(req);
};
