// What the page shows when it cannot know the present: with the stream to
// the server down (a restart, a network cut), the last status it saw may
// already be false (a run the crash ended still reads "streaming"). So it
// says "status unknown", and shows the last known value greyed with its age
// ("streaming 12 s ago") rather than as a fact.

import { useEffect, useState, type ReactNode } from "react";

/** The current time (ms), ticking every second while `ticking`, so ages stay true. */
export function useNow(ticking: boolean): number {
  const [now, setNow] = useState(() => Date.now());
  useEffect(() => {
    if (!ticking) return;
    setNow(Date.now());
    const t = setInterval(() => setNow(Date.now()), 1000);
    return () => clearInterval(t);
  }, [ticking]);
  return now;
}

/** How long ago `at` was, for a human: "4 s ago", "3 min ago", "2 h ago". */
export function ago(at: number, now: number): string {
  const s = Math.max(0, Math.round((now - at) / 1000));
  if (s < 60) return `${s} s ago`;
  if (s < 3600) return `${Math.floor(s / 60)} min ago`;
  return `${Math.floor(s / 3600)} h ago`;
}

/**
 * A value shown only while it is known (`knownAt` undefined: it is current).
 * Otherwise `unknown` in its place and, when a value was ever known, that
 * value greyed with its age beside it (`data-testid={testid}-stale`).
 */
export function Known(props: {
  testid: string;
  className?: string;
  value: ReactNode;
  /** The last known value in words ("streaming", "alive"): what the greyed note says. */
  last: string;
  /** False: the value is current. Otherwise when it was last known (undefined: never). */
  stale: false | number | undefined;
  unknown: string;
  now: number;
}) {
  const { testid, className, value, last, stale, unknown, now } = props;
  if (stale === false)
    return (
      <span className={className} data-testid={testid}>
        {value}
      </span>
    );
  return (
    <>
      <span className="unknown" data-testid={testid} data-known="false" title="the link to the server is down: the current value cannot be known">
        {unknown}
      </span>
      {stale !== undefined && (
        <span className="stale" data-testid={`${testid}-stale`} title="the last value the page saw">
          {last} {ago(stale, now)}
        </span>
      )}
    </>
  );
}
