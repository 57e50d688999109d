// Small formatting helpers shared by the views.

import type { JsonObject } from "@bufbuild/protobuf";
import type { Timestamp } from "@bufbuild/protobuf/wkt";

/** US dollars, with enough digits for the cents of one cheap turn. */
export const usd = (n: number) => (n >= 1 ? `$${n.toFixed(2)}` : `$${n.toFixed(4)}`);

/** A token count: 950, 12.3k, 1.2M. */
export function tokens(n: number): string {
  if (n < 1000) return String(n);
  if (n < 1_000_000) return `${(n / 1000).toFixed(n < 10_000 ? 1 : 0)}k`;
  return `${(n / 1_000_000).toFixed(1)}M`;
}

/** Milliseconds as 850ms, 12.4s, 3m05s. */
export function duration(ms: number): string {
  if (ms < 1000) return `${ms}ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)}s`;
  const s = Math.round(ms / 1000);
  return `${Math.floor(s / 60)}m${String(s % 60).padStart(2, "0")}s`;
}

/** An event time as HH:MM:SS in the viewer's zone. */
export function clock(t: Timestamp | undefined): string {
  if (!t) return "";
  return new Date(Number(t.seconds) * 1000 + Math.floor(t.nanos / 1e6)).toLocaleTimeString([], { hour12: false });
}

/** The one-line gist of a tool's input: the command, the path, the pattern. */
export function toolGist(input: JsonObject | undefined): string {
  if (!input) return "";
  for (const k of ["command", "file_path", "path", "pattern", "url", "query", "description", "prompt"]) {
    const v = input[k];
    if (typeof v === "string" && v !== "") return v;
  }
  const s = JSON.stringify(input);
  return s === "{}" ? "" : s;
}

/** Pretty JSON of a tool input, for reading or editing. */
export const pretty = (v: unknown) => JSON.stringify(v ?? {}, null, 2);

/** A new session id: readable, sortable by time, valid for the server. */
export function newSessionId(): string {
  const rand = crypto.getRandomValues(new Uint8Array(3));
  return `console-${Date.now().toString(36)}-${Array.from(rand, (b) => b.toString(16).padStart(2, "0")).join("")}`;
}
