// Which model, permission mode and thinking budget are in force.
// A port of client-rs/protocol/src/derive/settings.rs.
//
// Three kinds of event say so, and the latest wins, per setting:
// - runStart: what a client chose for the run (StartConfig.model,
//   permissionMode, maxThinkingTokens); empty fields say nothing;
// - runReady: what the CLI reports it runs with (model, permissionMode; it
//   does not report a thinking budget);
// - settingChanged: a client's SetModel, SetPermissionMode or
//   SetMaxThinkingTokens, applied live or recorded for the next spawn (both
//   are in force from the client's point of view: the next spawn applies a
//   recorded one). An empty value means "the CLI's default".

import { Setting, type Event } from "../gen/agentharness/v1/events_pb.js";

/** The settings in force (client-rs `derive::Settings`). */
export interface Settings {
  /**
   * The model: an alias or name a client chose, or the name the CLI
   * reported. Undefined before any (or after a change back to the default,
   * until the CLI reports one).
   */
  model: string | undefined;
  /** The permission mode, the same way. */
  permissionMode: string | undefined;
  /** The thinking budget a client chose; undefined: the CLI's default. */
  maxThinkingTokens: number | undefined;
}

const NONE: Settings = Object.freeze({ model: undefined, permissionMode: undefined, maxThinkingTokens: undefined });

/**
 * A thinking budget as Rust's `u32::from_str` reads it (an optional `+`,
 * decimal digits, at most 2^32 - 1); anything else is undefined.
 */
function parseU32(v: string): number | undefined {
  if (!/^\+?[0-9]+$/.test(v)) return undefined;
  const n = Number(v.startsWith("+") ? v.slice(1) : v);
  return n <= 0xffff_ffff ? n : undefined;
}

/**
 * Incremental settings. The object handed out is replaced (never mutated)
 * when a value changes, so {@link current} keeps its identity until then.
 */
export class SettingsFold {
  private s: Settings = NONE;

  private set(next: Partial<Settings>): void {
    const merged = { ...this.s, ...next };
    if (
      merged.model !== this.s.model ||
      merged.permissionMode !== this.s.permissionMode ||
      merged.maxThinkingTokens !== this.s.maxThinkingTokens
    ) {
      this.s = merged;
    }
  }

  /** Applies the next event of the log. */
  apply(e: Event): void {
    const p = e.payload;
    switch (p.case) {
      case "runStart": {
        const c = p.value.config;
        if (!c) return;
        const next: Partial<Settings> = {};
        if (c.model !== "") next.model = c.model;
        if (c.permissionMode !== "") next.permissionMode = c.permissionMode;
        if (c.maxThinkingTokens !== undefined) next.maxThinkingTokens = c.maxThinkingTokens;
        this.set(next);
        break;
      }
      case "runReady": {
        const next: Partial<Settings> = {};
        if (p.value.model !== "") next.model = p.value.model;
        if (p.value.permissionMode !== "") next.permissionMode = p.value.permissionMode;
        this.set(next);
        break;
      }
      case "settingChanged": {
        const value = p.value.value === "" ? undefined : p.value.value;
        switch (p.value.setting) {
          case Setting.MODEL:
            this.set({ model: value });
            break;
          case Setting.PERMISSION_MODE:
            this.set({ permissionMode: value });
            break;
          case Setting.MAX_THINKING_TOKENS:
            this.set({ maxThinkingTokens: value === undefined ? undefined : parseU32(value) });
            break;
          default:
            break;
        }
        break;
      }
      default:
        break;
    }
  }

  /** The settings in force after the events applied so far. */
  current(): Settings {
    return this.s;
  }
}

/** The settings in force after `events` (see the module comment). */
export function deriveSettings(events: readonly Event[]): Settings {
  const f = new SettingsFold();
  for (const e of events) f.apply(e);
  return f.current();
}
