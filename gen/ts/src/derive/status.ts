// Status and process-alive: the fold every other derivation builds on.
// A port of client-rs/protocol/src/derive/status.rs.

import type { Event } from "../gen/agentharness/v1/events_pb.js";

/** What a session is doing, as one word. */
export type Status = "idle" | "starting" | "streaming" | "stopping";

/**
 * Incremental status: apply events one at a time, read the state at any
 * point. O(1) per event. Rules (the contract every port obeys, from
 * client-rs StatusFold):
 * - `run_start` begins a run: the process is alive until the run's
 *   `run_end`. A non-empty prompt (or content blocks) in its config means
 *   input is pending, so a turn begins.
 * - `input_sent` (any source) while a run is live begins a turn, or is
 *   folded into the turn already in progress.
 * - `turn_start` (the CLI began a turn on its own) begins a turn.
 * - Until the run's CLI has said anything (`run_ready`, or any other CLI
 *   output), a turn in progress shows as starting; afterwards streaming.
 * - `turn_end` with `compact = false` ends the turn; `compact = true`
 *   changes nothing.
 * - `stop_requested` while a turn is in progress makes it stopping until the
 *   turn or the run ends; otherwise it changes nothing.
 * - `run_end` ends everything: idle, process dead.
 * - input_sent, turn_start and stop_requested are ignored while no run is live.
 */
export class StatusFold {
  private head = 0n;
  private runId: string | undefined;
  private live = false;
  private cliSpoke = false;
  private turn = false;
  private stopping = false;

  /** Applies the next event of the log. */
  apply(e: Event): void {
    if (e.seq > this.head) this.head = e.seq;
    // Logs paged from the middle may lack the run_start.
    if (this.runId === undefined && e.runId !== "") this.runId = e.runId;
    const p = e.payload;
    switch (p.case) {
      case "runStart": {
        const c = p.value.config;
        this.runId = e.runId;
        this.live = true;
        this.cliSpoke = false;
        this.stopping = false;
        this.turn = c !== undefined && (c.prompt !== "" || c.contentBlocks.length > 0);
        break;
      }
      case "runEnd":
        this.live = false;
        this.turn = false;
        this.stopping = false;
        this.cliSpoke = false;
        break;
      case "inputSent":
        if (this.live) this.turn = true;
        break;
      case "turnStart":
        if (this.live) {
          this.turn = true;
          this.cliSpoke = true;
        }
        break;
      case "stopRequested":
        if (this.live && this.turn) this.stopping = true;
        break;
      case "turnEnd":
        if (this.live) {
          this.cliSpoke = true;
          if (!p.value.compact) {
            this.turn = false;
            this.stopping = false;
          }
        }
        break;
      case "runReady":
      case "content":
      case "result":
      case "taskStarted":
      case "taskUpdated":
      case "taskNotification":
      case "permissionRequested":
        if (this.live) this.cliSpoke = true;
        break;
      // Harness-side records neither begin nor end anything; nor does a
      // stored event the server could not read.
      case "runError":
      case "permissionResolved":
      case "settingChanged":
      case "filesRewound":
      case "unreadable":
      case undefined:
        break;
    }
  }

  /** The derived status. */
  status(): Status {
    if (!this.live || !this.turn) return "idle";
    if (this.stopping) return "stopping";
    if (!this.cliSpoke) return "starting";
    return "streaming";
  }

  /** True between a `run_start` and its `run_end`. */
  processAlive(): boolean {
    return this.live;
  }

  /** True while a turn (or start-up with input pending) is in progress. */
  turnInProgress(): boolean {
    return this.live && this.turn;
  }

  /** The latest run_start's run id (or the first run id seen). */
  currentRunId(): string | undefined {
    return this.runId;
  }

  /** The highest seq applied (0n for an empty log). */
  headSeq(): bigint {
    return this.head;
  }
}

/** Folds a whole log. */
export function foldStatus(events: readonly Event[]): StatusFold {
  const f = new StatusFold();
  for (const e of events) f.apply(e);
  return f;
}

/** The session status after `events` (see {@link StatusFold}). */
export function deriveStatus(events: readonly Event[]): Status {
  return foldStatus(events).status();
}

/**
 * True when the log's latest run has a `run_start` and no `run_end`: the CLI
 * process exists (a keep-alive session between turns is idle but alive).
 */
export function deriveProcessAlive(events: readonly Event[]): boolean {
  return foldStatus(events).processAlive();
}
