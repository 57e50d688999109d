// What to call a session, where it runs and when it was active.
// A port of client-rs/protocol/src/derive/title.rs.
//
// The title is the latest non-empty titleSet's (a client's SetTitle; an
// empty one goes back to the derived title), else the title of the first
// prompt: a runStart's config.prompt or an inputSent from the Start prompt
// (INITIAL) or a user (USER). The cwd is the latest runStart's; the times
// are those of the first and the newest event.

import type { Timestamp } from "@bufbuild/protobuf/wkt";
import { InputSource, type Event } from "../gen/agentharness/v1/events_pb.js";

/** Most characters of a title derived from a prompt (before the "…"). */
export const DERIVED_TITLE_CHARS = 80;

// Rust's char::is_whitespace (Unicode White_Space), which `trim` and
// `split_whitespace` use: JavaScript's \s differs (it has U+FEFF, lacks U+0085).
const WS = "\\t\\n\\v\\f\\r \\u0085\\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000";
const WORDS = new RegExp(`[^${WS}]+`, "gu");
const TRAILING = new RegExp(`[${WS}]+$`, "u");

/**
 * The title a prompt gives a session: its first non-blank line, whitespace
 * collapsed, cut to {@link DERIVED_TITLE_CHARS} characters (code points,
 * as Rust counts chars) with "…" when longer. "" for a blank prompt.
 */
export function titleOfPrompt(prompt: string): string {
  // Rust's `lines`: split at "\n", one trailing "\r" dropped per line.
  const line = prompt
    .split("\n")
    .map((l) => (l.endsWith("\r") ? l.slice(0, -1) : l))
    .find((l) => (l.match(WORDS) ?? []).length > 0);
  const words = line === undefined ? [] : (line.match(WORDS) ?? []);
  const collapsed = words.join(" ");
  const chars = Array.from(collapsed);
  if (chars.length <= DERIVED_TITLE_CHARS) return collapsed;
  return chars.slice(0, DERIVED_TITLE_CHARS).join("").replace(TRAILING, "") + "…";
}

/** Incremental title, cwd and times (client-rs `derive::TitleFold`). */
export class TitleFold {
  private chosen: string | undefined;
  private derived: string | undefined;
  private cwdValue: string | undefined;
  private created: Timestamp | undefined;
  private updated: Timestamp | undefined;

  /** Applies the next event of the log. */
  apply(e: Event): void {
    if (e.time) {
      this.created ??= e.time;
      this.updated = e.time;
    }
    const p = e.payload;
    switch (p.case) {
      case "titleSet":
        this.chosen = p.value.title === "" ? undefined : p.value.title;
        break;
      case "runStart": {
        const c = p.value.config;
        if (c) {
          this.cwdValue = c.cwd;
          this.offer(c.prompt);
        }
        break;
      }
      case "inputSent":
        if (p.value.source === InputSource.INITIAL || p.value.source === InputSource.USER) this.offer(p.value.text);
        break;
      default:
        break;
    }
  }

  private offer(prompt: string): void {
    if (this.derived !== undefined) return;
    const t = titleOfPrompt(prompt);
    if (t !== "") this.derived = t;
  }

  /** See {@link deriveTitle}. */
  title(): string {
    return this.chosen ?? this.derived ?? "";
  }

  /** The cwd of the latest runStart ("" before any). */
  cwd(): string {
    return this.cwdValue ?? "";
  }

  /** When the first event was appended (undefined for an empty log). */
  createdAt(): Timestamp | undefined {
    return this.created;
  }

  /** When the newest event was appended: the last activity. */
  updatedAt(): Timestamp | undefined {
    return this.updated;
  }
}

/**
 * The session's title: the latest non-empty titleSet's title, else
 * {@link titleOfPrompt} of the first prompt. "" before any prompt.
 */
export function deriveTitle(events: readonly Event[]): string {
  const f = new TitleFold();
  for (const e of events) f.apply(e);
  return f.title();
}
