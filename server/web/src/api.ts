// The console's one connection to the server it was served from: a grpc-web
// transport on this page's own origin, with the bearer token (when the
// server needs one) added to every call, and the session a call names in
// `x-session-id`. The token is asked for once and
// kept in sessionStorage: for this tab only, gone when it closes, never in a
// cookie (a cookie would ride along on other sites' requests) or a URL.

import { Code, ConnectError, createClient, type Interceptor, type Transport } from "@connectrpc/connect";
import { createGrpcWebTransport } from "@connectrpc/connect-web";
import { SessionService } from "@agent-harness/client/protocol";
import { sessionRouting } from "@agent-harness/client/client";

const TOKEN_KEY = "agent-harness-token";

/** The token this tab holds, if any. */
export function storedToken(): string | null {
  return sessionStorage.getItem(TOKEN_KEY);
}

/** Keeps `token` for this tab (null forgets it). */
export function storeToken(token: string | null): void {
  if (token) sessionStorage.setItem(TOKEN_KEY, token);
  else sessionStorage.removeItem(TOKEN_KEY);
}

/**
 * A transport to this origin that sends `token` (if any) as a bearer token
 * and names the session of a call in `x-session-id` (a balancer in front of
 * several nodes routes by it).
 */
export function makeTransport(token: string | null): Transport {
  const bearer: Interceptor = (next) => (req) => {
    if (token) req.header.set("authorization", `Bearer ${token}`);
    return next(req);
  };
  return createGrpcWebTransport({ baseUrl: location.origin, interceptors: [bearer, sessionRouting] });
}

/** The generated SessionService client over `t`. */
export const serviceClient = (t: Transport) => createClient(SessionService, t);

/** True when `err` says the token is missing or wrong. */
export const isUnauthenticated = (err: unknown) => ConnectError.from(err).code === Code.Unauthenticated;

/** A short human message for a failed call. */
export function errorText(err: unknown): string {
  const ce = ConnectError.from(err);
  return `${Code[ce.code] ?? ce.code}: ${ce.rawMessage}`;
}
