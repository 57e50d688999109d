// How current a session handle's state is: whether its Subscribe stream is
// live, and since when. A status derived from the held events is the
// session's status only while the stream is live; once it breaks, the held
// state is what was true when it broke, and a UI that shows it as current
// would show a status it cannot know (a "streaming" for a run the server's
// crash ended). These facts let it say "status unknown" and how old the
// last known state is.

/**
 * - "connecting": no stream has opened yet; nothing is known.
 * - "replaying": a stream is open and replaying the log up to the present
 *   (until its CaughtUp): the held state is catching up.
 * - "live": caught up; every change arrives as it happens, so the held
 *   state is the session's.
 * - "down": the stream broke or could not open; the handle retries (unless
 *   the error cannot be retried, see `error`). The held state is as of
 *   `lastLiveAt`.
 */
export type ConnectionState = "connecting" | "replaying" | "live" | "down";

/** The handle's link to the session's log. A new object when any field changes. */
export interface Connection {
  readonly state: ConnectionState;
  /** When `state` began (ms since the epoch). */
  readonly since: number;
  /**
   * When the stream last stopped being live (ms since the epoch): the held
   * state was current until then. Undefined while live, and before the
   * first live stream.
   */
  readonly lastLiveAt: number | undefined;
  /** When the last event or delta arrived (ms since the epoch); undefined before any. */
  readonly lastEventAt: number | undefined;
}

/** The state before the first stream, at `now`. */
export function initialConnection(now: number): Connection {
  return Object.freeze({ state: "connecting", since: now, lastLiveAt: undefined, lastEventAt: undefined });
}

/**
 * `c` moved to `state` at `now`: the same object when it is already there.
 * Leaving "live" stamps `lastLiveAt`; entering it clears it.
 */
export function connectionTo(c: Connection, state: ConnectionState, now: number): Connection {
  if (c.state === state) return c;
  const lastLiveAt = state === "live" ? undefined : c.state === "live" ? now : c.lastLiveAt;
  return Object.freeze({ state, since: now, lastLiveAt, lastEventAt: c.lastEventAt });
}

/** `c` with an event or delta received at `now`. */
export function connectionHeard(c: Connection, now: number): Connection {
  return Object.freeze({ ...c, lastEventAt: now });
}

/**
 * True when the held state is the session's (the stream is live): only then
 * is the derived status, process and activity a fact rather than history.
 */
export function statusKnown(c: Connection): boolean {
  return c.state === "live";
}
