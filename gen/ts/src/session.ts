// A reconnecting view of one session's event log, over any connect-es
// transport (grpc-web in browsers, gRPC or Connect in Node).
//
// The handle holds one contiguous, strictly increasing run of events and
// keeps exactly one Subscribe stream open. When the stream breaks it
// resubscribes from the last seq it holds after a jittered exponential
// backoff, drops anything it already has, and rebuilds the list when the
// server says the cursor was incoherent (ReplayStart.reset). Everything else
// a UI shows is derived from the held events, the same way the server derives
// it, so a reconnect can never leave a stale status behind.
//
// Live typing: with `includeDeltas` (the default) the stream also carries the
// deltas of the assistant message being written, folded into
// `snapshot.partial` (partial.ts): fragments grow a block, the `content`
// event of that message supersedes its blocks, turnEnd and runEnd drop them
// all, and each new stream starts empty (its replay header drops them) until
// the server's snapshot deltas after caughtUp restore what is still being
// written. Never part of `events` or `derived`.
//
// How current it all is: `connection` (connection.ts) says whether the
// stream is live (caught up, so the derived state is the session's) or since
// when it is not; `liveActivity` (live.ts) refines the derived activity by
// the typing; `unrecorded` (unrecorded.ts) keeps typing a broken stream left
// behind that the log will never hold (the server restarted mid-answer).
//
// The derived state is kept by a derive Fold: a streamed event is applied to
// it (O(1) amortized), a reset starts a new one, and only the rare changes
// that are not appends (a History page prepended, an event injected in the
// middle) fold the held list again, once, at the next snapshot.
//
// Actions (start, send, stop, respondPermission, stopTask, setModel,
// setPermissionMode, setMaxThinkingTokens, setTitle, rewindFiles) are retry-safe:
// each logical call gets one fresh idempotency key, and a call that fails in
// transit (UNAVAILABLE, UNKNOWN, DEADLINE_EXCEEDED) is retried with that same
// key, so the server applies it once and answers the retry with the first
// response. getContextUsage only reads, so it is retried the same way.

import { Code, ConnectError, createClient } from "@connectrpc/connect";
import type { CallOptions, Client, Transport } from "@connectrpc/connect";
import type { JsonObject } from "@bufbuild/protobuf";
import type { Event } from "./gen/agentharness/v1/events_pb.js";
import {
  FullEventPart,
  SessionService,
  type RespondPermissionResponse,
  type RewindFilesResponse,
  type SendResponse,
  type GetContextUsageResponse,
  type SetMaxThinkingTokensResponse,
  type SetModelResponse,
  type SetPermissionModeResponse,
  type SetTitleResponse,
  type StartResponse,
  type StopResponse,
  type StopTaskResponse,
} from "./gen/agentharness/v1/session_service_pb.js";
import {
  Fold,
  type Activity,
  type Derived,
  type SessionUsageTotals,
  type Settings,
  type Status,
} from "./derive/index.js";
import { readFullEvent } from "./full-event.js";
import { sessionHeaders } from "./routing.js";
import { EMPTY_PARTIAL, applyPartial, type PartialMessage } from "./partial.js";
import { liveActivity } from "./live.js";
import { NO_UNRECORDED, applyUnrecorded, type Unrecorded } from "./unrecorded.js";
import { connectionHeard, connectionTo, initialConnection, type Connection } from "./connection.js";

/** The SessionService client type the handle drives. */
export type SessionServiceClient = Client<typeof SessionService>;

/**
 * 'hydrating' until the initial replay (CaughtUp) and any history backfill
 * have both settled, then 'ready' once, permanently: replayed history should
 * not animate like live output.
 */
export type HydrationPhase = "hydrating" | "ready";

/**
 * Everything a UI needs about one session: a new object on every change
 * (the same object until then), so identity comparison sees every change.
 * Its parts are shared with later snapshots while they do not change; treat
 * them as read-only.
 */
export interface SessionSnapshot {
  /** The session this snapshot is of. */
  readonly sessionId: string;
  /**
   * The held events: contiguous, oldest first, strictly increasing seq. A new
   * array whenever they change. An event with `truncated` set was too large
   * to stream whole (over the server's --max-event-bytes): its `cliLine` is
   * empty and long texts are cut; {@link SessionHandle.readFullEvent} fetches
   * it whole. Derived state is the same either way.
   */
  readonly events: readonly Event[];
  /**
   * Everything derived from `events` (equal to `deriveAll(events)`): pending
   * permissions, background tasks, queued messages, plans, the scheduled
   * wakeup, ... Each part keeps its identity until its value changes.
   */
  readonly derived: Derived;
  /** Derived status ("idle" | "starting" | "streaming" | "stopping"). */
  readonly status: Status;
  /** True while the CLI process exists (idle-but-alive between turns). */
  readonly processAlive: boolean;
  /** Token totals, cost and context size. */
  readonly usage: SessionUsageTotals;
  /** What the agent is doing now. */
  readonly activity: Activity;
  /**
   * The model, permission mode and thinking budget in force (the latest of
   * the start config, the CLI's init and setModel / setPermissionMode /
   * setMaxThinkingTokens; `derived.settings`).
   */
  readonly settings: Settings;
  /**
   * What the agent is doing this instant: `activity` refined by live typing
   * (`liveActivity(activity, partial)`): "Writing" while answer text
   * streams, "Running Bash" while a tool's input streams, ...
   */
  readonly liveActivity: Activity;
  /**
   * What to call the session (`derived.title`): the latest setTitle, else
   * the first line of its first prompt; "" before any. Derived from the
   * held events: a handle that has not fetched the oldest page may not hold
   * the first prompt, where GetSession's `Session.title` always does.
   */
  readonly title: string;
  /** True while a Subscribe stream is open and has sent its ReplayStart. */
  readonly connected: boolean;
  /**
   * Whether the held state is current (`state` "live") or as of when
   * (`lastLiveAt`): while it is not live, `status`, `processAlive` and the
   * activity are the last known ones, not the session's (connection.ts).
   */
  readonly connection: Connection;
  /** See {@link HydrationPhase}. */
  readonly hydrationPhase: HydrationPhase;
  /** The last stream or action error; cleared when a stream connects. */
  readonly error: Error | undefined;
  /** The seq of the newest held event (0n when none): the resume cursor. */
  readonly lastSeq: bigint;
  /** True when events older than the oldest held one exist on the server. */
  readonly hasMoreHistory: boolean;
  /**
   * Live typing: the blocks of the assistant message being written, not yet
   * superseded by their `content` event (empty without `includeDeltas`).
   * A new object only when it changes. See partial.ts for when blocks grow,
   * reset and drop; `partialMainText(partial)` is the answer being typed.
   */
  readonly partial: PartialMessage;
  /**
   * Live typing a broken stream left behind: `lost` holds the blocks whose
   * turn or run ended without recording them (the server restarted
   * mid-answer), shown as `unrecordedNote(unrecorded)` until the next input
   * (unrecorded.ts). In this handle's memory only.
   */
  readonly unrecorded: Unrecorded;
}

/** Reconnect timing. Delays grow as initialMs * 2^attempt up to maxMs. */
export interface BackoffOptions {
  /** First retry delay in milliseconds (default 250). */
  initialMs?: number;
  /** Upper bound of a delay in milliseconds (default 10000). */
  maxMs?: number;
  /**
   * Fraction of each delay that is randomized, 0..1 (default 0.5): many
   * clients dropped by one server restart must not come back in lockstep.
   */
  jitter?: number;
}

/** Options of {@link SessionHandle}. */
export interface SessionHandleOptions {
  /** Reconnect timing. */
  backoff?: BackoffOptions;
  /**
   * After the first CaughtUp, fetch older pages until at least this many
   * events are held or the log's start is reached (default 0: no backfill).
   * Hydration stays 'hydrating' until the backfill settles.
   */
  backfill?: number;
  /**
   * Abort and resubscribe when the stream sends nothing (no event, no
   * heartbeat) for this long, in milliseconds (default 45000; 0 disables).
   * Proxies can keep a dead connection looking open.
   */
  idleTimeoutMs?: number;
  /**
   * Headers sent with every call (e.g. authorization). `x-session-id` (the
   * session, for a balancer to route by) is always added.
   */
  headers?: HeadersInit;
  /** Start the subscription immediately (default true). */
  autoConnect?: boolean;
  /**
   * Ask for live typing (`SubscribeRequest.includeDeltas`) and keep
   * `snapshot.partial` (default true). False leaves it empty and saves the
   * server the work.
   */
  includeDeltas?: boolean;
  /**
   * How many times an action (start, send, stop, respondPermission,
   * stopTask, setModel, setPermissionMode, setMaxThinkingTokens, setTitle,
   * rewindFiles, getContextUsage) that failed in transit is retried with
   * its idempotency key, after the backoff delays (default 3; 0: never).
   */
  actionRetries?: number;
}

/** Per-call options of the actions. */
export interface ActionOptions {
  /**
   * The call's idempotency key (default: a fresh one). Give your own to
   * retry a call across reloads: a repeat of a key the session applied
   * within the server's TTL (at least 10 minutes) returns the first
   * response and does nothing again.
   */
  idempotencyKey?: string;
}

/** A fresh idempotency key: 128 random bits as 32 hex digits. */
export function newIdempotencyKey(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

/** Codes a failed transport produces: the call may or may not have landed, so retry it under its key. */
const IN_TRANSIT_CODES = new Set<Code>([Code.Unavailable, Code.Unknown, Code.DeadlineExceeded]);

/** A snapshot listener. */
export type SnapshotListener = (snapshot: SessionSnapshot) => void;

/** Arguments of {@link SessionHandle.respondPermission}. */
export interface PermissionAnswer {
  /** The permission_requested event's request_id. */
  requestId: string;
  /** True to let the tool run. */
  allow: boolean;
  /** When allowing: the input the tool runs with (default: as requested). */
  updatedInput?: JsonObject;
  /** When denying: the message given to the model. */
  message?: string;
}

/** Arguments of {@link SessionHandle.start}: the StartConfig, all optional. */
export interface StartOptions {
  /** The first user message; empty: the CLI waits for send(). */
  prompt?: string;
  /** Working directory of the CLI (default: the server's). */
  cwd?: string;
  /** A CLI session id to resume (default: the session's last one). */
  resume?: string;
  /** Extra environment variables for the CLI. */
  env?: Record<string, string>;
  /** Extra CLI arguments. */
  args?: string[];
  /** Anthropic content blocks placed before the prompt. */
  contentBlocks?: JsonObject[];
  /** Model alias or name. */
  model?: string;
  /**
   * The agent to run: "claude" (the default, also "") or "codex" when the
   * server enables it (FAILED_PRECONDITION otherwise). A session keeps the
   * agent of its first run.
   */
  agent?: string;
  /**
   * Permission mode ("default", "plan", "dontAsk", "acceptEdits", "auto",
   * "bypassPermissions"), within the operator's policy (PERMISSION_DENIED
   * beyond it). Default: the CLI's.
   */
  permissionMode?: string;
  /** Most thinking tokens per turn (0: no thinking). Default: the CLI's. */
  maxThinkingTokens?: number;
  /**
   * Start this session as a fork of another session's conversation: the
   * CLI copies the source's conversation (up to and including the assistant
   * message at `atSeq`, a `content` event's seq; omitted: all of it) into
   * this session, which goes on from there; the source is not changed.
   * Start the fork under a new session id; its cwd and settings default to
   * the source's.
   */
  fork?: ForkOptions;
}

/** Where a forked session comes from (see {@link StartOptions.fork}). */
export interface ForkOptions {
  /** The session whose conversation is copied. */
  fromSessionId: string;
  /** The seq of one of its `content` events to fork at (default: the whole conversation). */
  atSeq?: bigint;
}

/** Arguments of {@link SessionHandle.rewindFiles}. */
export interface RewindOptions extends ActionOptions {
  /** Only list what would change (nothing is rewound or recorded). */
  dryRun?: boolean;
}

/** Codes that no amount of retrying fixes; the handle waits for reconnect(). */
const FATAL_CODES = new Set<Code>([
  Code.InvalidArgument,
  Code.Unauthenticated,
  Code.PermissionDenied,
  Code.Unimplemented,
]);

/**
 * One session: a single reconnecting Subscribe stream, the held events, and
 * the derived snapshot. Create it with {@link createSessionHandle} or
 * `new SessionHandle(client, sessionId)`; call {@link close} when done.
 */
export class SessionHandle {
  /** The session id. */
  readonly sessionId: string;
  private readonly client: SessionServiceClient;
  private readonly opts: Required<Omit<SessionHandleOptions, "headers" | "backoff">> & {
    backoff: Required<BackoffOptions>;
    headers: Headers;
  };

  private events: Event[] = [];
  /**
   * `events` was handed out in a snapshot: the next change must copy it
   * (snapshots never see their list change). Until then appends go in place,
   * so a burst of streamed events costs one copy, not one per event.
   */
  private eventsShared = false;
  /** Derived state of `events` (see {@link foldStale}). */
  private fold = new Fold();
  /**
   * `events` changed other than by appends since `fold` was last brought up
   * to date: fold the whole list again at the next snapshot.
   */
  private foldStale = false;
  /** Live typing (see {@link SessionSnapshot.partial}). */
  private partial: PartialMessage = EMPTY_PARTIAL;
  /** Live typing the last broken stream left behind (see {@link SessionSnapshot.unrecorded}). */
  private unrecorded: Unrecorded = NO_UNRECORDED;
  private connection: Connection = initialConnection(Date.now());
  private connected = false;
  private caughtUp = false;
  private ready = false;
  private error: Error | undefined;
  private hasMoreHistory = false;
  private historyInFlight: Promise<{ hasMore: boolean }> | undefined;
  private backfillPending = false;

  private closed = false;
  /** Bumped for every subscription loop; a stale loop sees it and exits. */
  private generation = 0;
  private abort: AbortController | undefined;
  private wakeBackoff: (() => void) | undefined;

  private readonly listeners = new Set<SnapshotListener>();
  private snapshot: SessionSnapshot;
  private notifyScheduled = false;
  private lastNotify = 0;

  /** Creates the handle; subscribes at once unless `autoConnect` is false. */
  constructor(client: SessionServiceClient, sessionId: string, options: SessionHandleOptions = {}) {
    this.client = client;
    this.sessionId = sessionId;
    this.opts = {
      backfill: options.backfill ?? 0,
      idleTimeoutMs: options.idleTimeoutMs ?? 45_000,
      autoConnect: options.autoConnect ?? true,
      includeDeltas: options.includeDeltas ?? true,
      actionRetries: options.actionRetries ?? 3,
      headers: sessionHeaders(options.headers, sessionId),
      backoff: {
        initialMs: options.backoff?.initialMs ?? 250,
        maxMs: options.backoff?.maxMs ?? 10_000,
        jitter: options.backoff?.jitter ?? 0.5,
      },
    };
    this.snapshot = this.computeSnapshot();
    if (this.opts.autoConnect) this.startLoop();
  }

  /** The current snapshot; the same object until something changes. */
  getSnapshot = (): SessionSnapshot => this.snapshot;

  /** Calls `listener` with every new snapshot; returns the unsubscribe. */
  subscribe = (listener: SnapshotListener): (() => void) => {
    this.listeners.add(listener);
    return () => {
      this.listeners.delete(listener);
    };
  };

  /**
   * Spawns the CLI for this session, creating the session on first use
   * (FAILED_PRECONDITION when a run is already live: use send).
   */
  start = async (config: StartOptions = {}, opts: ActionOptions = {}): Promise<StartResponse> =>
    this.keyed(opts, (idempotencyKey) =>
      this.client.start(
        {
          sessionId: this.sessionId,
          config: {
            prompt: config.prompt ?? "",
            cwd: config.cwd ?? "",
            resume: config.resume ?? "",
            env: config.env ?? {},
            args: config.args ?? [],
            contentBlocks: config.contentBlocks ?? [],
            model: config.model ?? "",
            agent: config.agent ?? "",
            permissionMode: config.permissionMode ?? "",
            maxThinkingTokens: config.maxThinkingTokens,
            fork: config.fork && { fromSessionId: config.fork.fromSessionId, atSeq: config.fork.atSeq ?? 0n },
          },
          idempotencyKey,
        },
        this.callOptions(),
      ),
    );

  /**
   * Sends a user message: written to the live process, or the prompt of a
   * resumed run when none is alive (NOT_FOUND for a session never started).
   * Delivered once even when retried.
   */
  send = async (input: string, contentBlocks: JsonObject[] = [], opts: ActionOptions = {}): Promise<SendResponse> =>
    this.keyed(opts, (idempotencyKey) =>
      this.client.send({ sessionId: this.sessionId, input, contentBlocks, idempotencyKey }, this.callOptions()),
    );

  /** Stops the current turn; accepted in any state. A retry never stops a later turn. */
  stop = async (opts: ActionOptions = {}): Promise<StopResponse> =>
    this.keyed(opts, (idempotencyKey) =>
      this.client.stop({ sessionId: this.sessionId, idempotencyKey }, this.callOptions()),
    );

  /**
   * Deletes the session (DeleteSession): its live run is stopped, then its
   * log and stored state are removed; the server ends the session's
   * Subscribe streams with NOT_FOUND. Retried in transit under one key: a
   * retry after the deletion went through succeeds again.
   */
  deleteSession = async (opts: ActionOptions = {}): Promise<void> => {
    await this.keyed(opts, (idempotencyKey) =>
      this.client.deleteSession({ sessionId: this.sessionId, idempotencyKey }, this.callOptions()),
    );
  };

  /** Answers a pending permission request. */
  respondPermission = async (answer: PermissionAnswer, opts: ActionOptions = {}): Promise<RespondPermissionResponse> =>
    this.keyed(opts, (idempotencyKey) =>
      this.client.respondPermission(
        {
          sessionId: this.sessionId,
          requestId: answer.requestId,
          allow: answer.allow,
          updatedInput: answer.updatedInput,
          message: answer.message ?? "",
          idempotencyKey,
        },
        this.callOptions(),
      ),
    );

  /**
   * Stops one background task of the live process (`taskId` of its
   * taskStarted event: a backgrounded Bash, a background subagent); the
   * turn and the process go on, and the task's taskUpdated{killed} /
   * taskNotification{stopped} follow in the log. FAILED_PRECONDITION
   * without a live process.
   */
  stopTask = async (taskId: string, opts: ActionOptions = {}): Promise<StopTaskResponse> =>
    this.keyed(opts, (idempotencyKey) =>
      this.client.stopTask({ sessionId: this.sessionId, taskId, idempotencyKey }, this.callOptions()),
    );

  /**
   * Switches the model (an alias or name; "" goes back to the CLI's
   * default): on the live process at once (`applied` LIVE), else recorded
   * for the next spawn (NEXT_SPAWN); every later spawn applies it too.
   * Recorded as a settingChanged event at `seq`, so `settings` shows it.
   */
  setModel = async (model: string, opts: ActionOptions = {}): Promise<SetModelResponse> =>
    this.keyed(opts, (idempotencyKey) =>
      this.client.setModel({ sessionId: this.sessionId, model, idempotencyKey }, this.callOptions()),
    );

  /**
   * Switches the permission mode ("default", "plan", "dontAsk",
   * "acceptEdits", "auto", "bypassPermissions") like {@link setModel}.
   * PERMISSION_DENIED for a mode beyond the operator's policy.
   */
  setPermissionMode = async (mode: string, opts: ActionOptions = {}): Promise<SetPermissionModeResponse> =>
    this.keyed(opts, (idempotencyKey) =>
      this.client.setPermissionMode({ sessionId: this.sessionId, mode, idempotencyKey }, this.callOptions()),
    );

  /**
   * Sets the thinking budget per turn (0: no thinking; undefined: back to
   * the CLI's default) like {@link setModel}.
   */
  setMaxThinkingTokens = async (
    maxThinkingTokens: number | undefined,
    opts: ActionOptions = {},
  ): Promise<SetMaxThinkingTokensResponse> =>
    this.keyed(opts, (idempotencyKey) =>
      this.client.setMaxThinkingTokens(
        { sessionId: this.sessionId, maxThinkingTokens, idempotencyKey },
        this.callOptions(),
      ),
    );

  /**
   * Names the session (trimmed, one line, at most 200 characters; "" goes
   * back to the title derived from its first prompt), with or without a
   * live process. Recorded as a titleSet event at `seq`, so `title` shows it.
   */
  setTitle = async (title: string, opts: ActionOptions = {}): Promise<SetTitleResponse> =>
    this.keyed(opts, (idempotencyKey) =>
      this.client.setTitle({ sessionId: this.sessionId, title, idempotencyKey }, this.callOptions()),
    );

  /**
   * Undoes the agent's file edits back to a user message: `toSeq` is the
   * seq of its inputSent event, and every file the CLI changed since is
   * restored to its state just before it. Answers the files and line
   * counts; `dryRun` only lists them. A real rewind is recorded as a
   * filesRewound event at `seq`. Needs the live process that made the
   * edits (FAILED_PRECONDITION otherwise).
   */
  rewindFiles = async (toSeq: bigint, opts: RewindOptions = {}): Promise<RewindFilesResponse> =>
    this.keyed(opts, (idempotencyKey) =>
      this.client.rewindFiles(
        { sessionId: this.sessionId, toSeq, dryRun: opts.dryRun ?? false, idempotencyKey },
        this.callOptions(),
      ),
    );

  /**
   * How full the live process's context window is, as the CLI counts it:
   * totalTokens, maxTokens, rawMaxTokens, percentage, and categories (those
   * other than "Free space" add up to totalTokens); `raw` is the CLI's whole
   * answer. FAILED_PRECONDITION without a live process. Read-only: retried
   * in transit like the actions (the key is not sent).
   */
  getContextUsage = async (): Promise<GetContextUsageResponse> =>
    this.keyed({}, () => this.client.getContextUsage({ sessionId: this.sessionId }, this.callOptions()));

  /**
   * Prepends the next older page (events before the oldest held one) and
   * says whether even older ones exist. Concurrent calls share one request,
   * so calling it from a scroll observer is safe.
   */
  fetchHistory = (opts: { limit?: number } = {}): Promise<{ hasMore: boolean }> => {
    if (this.historyInFlight) return this.historyInFlight;
    const p = this.loadOlder(opts.limit ?? 50).finally(() => {
      this.historyInFlight = undefined;
      this.maybeReady();
      // Publish before the caller resumes, so its next getSnapshot() has the page.
      this.publish();
    });
    this.historyInFlight = p;
    return p;
  };

  /**
   * Feeds an event into the handle as if the stream had delivered it (tests,
   * events that came by another channel). Dropped when its seq is already
   * held; otherwise it is placed in seq order. An injected event newer than
   * the stream's cursor advances the cursor, so inject only real log events.
   */
  injectEvent = (event: Event): void => {
    if (this.insert(event)) this.publish();
  };

  /**
   * The whole form of event `seq` (ReadFullEvent, reassembled), for an event
   * held with `truncated` set. Not held in place of the cut event: the held
   * list stays what the stream delivered.
   */
  readFullEvent = (seq: bigint): Promise<Event> =>
    readFullEvent(this.client, this.sessionId, seq, FullEventPart.EVENT, this.callOptions());

  /** Drops the current stream (if any) and subscribes again at once. */
  reconnect = (): void => {
    if (this.closed) return;
    this.error = undefined;
    this.startLoop();
    this.changed();
  };

  /** Ends the subscription for good and forgets the listeners. */
  close = (): void => {
    if (this.closed) return;
    this.closed = true;
    this.generation++;
    this.abort?.abort();
    this.wakeBackoff?.();
    this.connected = false;
    this.listeners.clear();
  };

  // ---- subscription ----------------------------------------------------

  private callOptions(signal?: AbortSignal): CallOptions {
    return { headers: this.opts.headers, signal };
  }

  private startLoop(): void {
    const gen = ++this.generation;
    this.abort?.abort();
    this.wakeBackoff?.();
    void this.loop(gen);
  }

  private async loop(gen: number): Promise<void> {
    let attempt = 0;
    while (!this.closed && gen === this.generation) {
      const abort = new AbortController();
      this.abort = abort;
      let idleTimer: ReturnType<typeof setTimeout> | undefined;
      const armIdle = () => {
        if (this.opts.idleTimeoutMs <= 0) return;
        clearTimeout(idleTimer);
        idleTimer = setTimeout(
          () => abort.abort(new ConnectError("no message within idle timeout", Code.DeadlineExceeded)),
          this.opts.idleTimeoutMs,
        );
      };
      let fatal = false;
      try {
        armIdle();
        const stream = this.client.subscribe(
          { sessionId: this.sessionId, afterSeq: this.lastSeq(), includeDeltas: this.opts.includeDeltas },
          this.callOptions(abort.signal),
        );
        for await (const res of stream) {
          if (gen !== this.generation) break;
          armIdle();
          switch (res.kind.case) {
            case "replay": {
              attempt = 0;
              this.connected = true;
              this.connection = connectionTo(this.connection, "replaying", Date.now());
              this.error = undefined;
              // A new stream: its snapshot after caughtUp restores what is
              // still being written; what it does not is settled by the
              // unrecorded fold.
              this.unrecorded = applyUnrecorded(this.unrecorded, this.partial, res);
              this.partial = EMPTY_PARTIAL;
              if (res.kind.value.reset) {
                // The cursor was incoherent: the replay is the new truth.
                this.setEvents([]);
                this.hasMoreHistory = res.kind.value.fromSeq > 0n;
              }
              this.changed();
              break;
            }
            case "event": {
              this.connection = connectionHeard(this.connection, Date.now());
              this.unrecorded = applyUnrecorded(this.unrecorded, this.partial, res);
              const partial = applyPartial(this.partial, res);
              const changed = partial !== this.partial;
              this.partial = partial;
              if (this.append(res.kind.value) || changed) this.changed();
              break;
            }
            case "delta":
              if (this.opts.includeDeltas) {
                this.connection = connectionHeard(this.connection, Date.now());
                this.unrecorded = applyUnrecorded(this.unrecorded, this.partial, res);
                this.partial = applyPartial(this.partial, res);
                this.changed();
              }
              break;
            case "caughtUp":
              this.connection = connectionTo(this.connection, "live", Date.now());
              if (!this.caughtUp) {
                this.caughtUp = true;
                this.startBackfill();
              }
              this.maybeReady();
              this.changed();
              break;
            case "heartbeat":
            case undefined:
              break;
          }
        }
      } catch (err) {
        if (gen !== this.generation || this.closed) break;
        const ce = ConnectError.from(err);
        this.error = ce;
        fatal = FATAL_CODES.has(ce.code);
      } finally {
        clearTimeout(idleTimer);
      }
      if (gen !== this.generation || this.closed) break;
      const connection = connectionTo(this.connection, "down", Date.now());
      if (this.connected || connection !== this.connection) {
        this.connected = false;
        this.connection = connection;
        this.changed();
      } else if (this.error) {
        this.changed();
      }
      if (fatal) break;
      await this.sleep(this.delay(attempt++));
    }
  }

  private delay(attempt: number): number {
    const { initialMs, maxMs, jitter } = this.opts.backoff;
    const base = Math.min(maxMs, initialMs * 2 ** Math.min(attempt, 30));
    return base * (1 - jitter) + Math.random() * base * jitter;
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const t = setTimeout(done, ms);
      function done() {
        clearTimeout(t);
        resolve();
      }
      this.wakeBackoff = done;
    });
  }

  // ---- the held events -------------------------------------------------

  private lastSeq(): bigint {
    return this.events.length ? this.events[this.events.length - 1]!.seq : 0n;
  }

  /** Appends a streamed event unless it is already held; O(1) amortized. */
  private append(e: Event): boolean {
    if (e.seq <= this.lastSeq()) return false;
    if (this.events.length === 0) this.hasMoreHistory = e.seq > 1n;
    if (this.eventsShared) {
      this.events = [...this.events, e];
      this.eventsShared = false;
    } else {
      this.events.push(e);
    }
    if (!this.foldStale) this.fold.apply(e);
    return true;
  }

  /** Replaces the held list by a fresh array: a new fold when empty, else a refold at the next snapshot. */
  private setEvents(events: Event[]): void {
    this.events = events;
    this.eventsShared = false;
    if (events.length === 0) {
      this.fold = new Fold();
      this.foldStale = false;
    } else {
      this.foldStale = true;
    }
  }

  /** Places an event by seq (inject); false when that seq is held. */
  private insert(e: Event): boolean {
    if (e.seq > this.lastSeq()) return this.append(e);
    const i = this.events.findIndex((x) => x.seq >= e.seq);
    if (i >= 0 && this.events[i]!.seq === e.seq) return false;
    const at = i < 0 ? this.events.length : i;
    this.setEvents([...this.events.slice(0, at), e, ...this.events.slice(at)]);
    return true;
  }

  private async loadOlder(limit: number): Promise<{ hasMore: boolean }> {
    const first = this.events[0]?.seq;
    if (first === 1n) {
      this.hasMoreHistory = false;
      return { hasMore: false };
    }
    try {
      const res = await this.client.history(
        { sessionId: this.sessionId, beforeSeq: first ?? 0n, limit },
        this.callOptions(),
      );
      // Keep the list contiguous: a reset or stream events may have landed
      // while the page was in flight, so prepend only what is older than
      // the oldest event held now and ends right before it.
      const oldest = this.events[0]?.seq;
      const page = oldest === undefined ? res.events : res.events.filter((e) => e.seq < oldest);
      const lastOfPage = page[page.length - 1]?.seq;
      if (oldest === undefined || lastOfPage === undefined || lastOfPage === oldest - 1n) {
        if (page.length > 0) this.setEvents([...page, ...this.events]);
        if (page.length > 0 || res.events.length === 0) this.hasMoreHistory = res.hasMore;
      }
      return { hasMore: this.hasMoreHistory };
    } catch (err) {
      this.error = ConnectError.from(err);
      throw this.error;
    }
  }

  private startBackfill(): void {
    if (this.opts.backfill <= 0) return;
    this.backfillPending = true;
    const step = async (): Promise<void> => {
      while (!this.closed && this.events.length < this.opts.backfill && this.hasMoreHistory) {
        const before = this.events.length;
        const { hasMore } = await this.fetchHistory({
          limit: Math.min(1000, this.opts.backfill - this.events.length),
        });
        if (!hasMore || this.events.length === before) break;
      }
    };
    step()
      .catch(() => {
        // Recorded in `error`; hydration must still settle.
      })
      .finally(() => {
        this.backfillPending = false;
        this.maybeReady();
        this.changed();
      });
  }

  private maybeReady(): void {
    if (!this.ready && this.caughtUp && !this.backfillPending && !this.historyInFlight) {
      this.ready = true;
    }
  }

  /**
   * One logical action: `call` with one idempotency key (the caller's or a
   * fresh one), retried with the same key while it fails in transit, at most
   * `actionRetries` more times, after the backoff delays.
   */
  private async keyed<T>(opts: ActionOptions, call: (idempotencyKey: string) => Promise<T>): Promise<T> {
    const key = opts.idempotencyKey ?? newIdempotencyKey();
    for (let attempt = 0; ; attempt++) {
      try {
        return await call(key);
      } catch (err) {
        const e = ConnectError.from(err);
        if (attempt >= this.opts.actionRetries || !IN_TRANSIT_CODES.has(e.code) || this.closed) {
          this.error = e;
          this.changed();
          throw e;
        }
        await new Promise((resolve) => setTimeout(resolve, this.delay(attempt)));
      }
    }
  }

  // ---- snapshots -------------------------------------------------------

  private computeSnapshot(): SessionSnapshot {
    if (this.foldStale) {
      // Rare (a History page, an inject in the middle): fold the list again.
      this.fold = Fold.from(this.events);
      this.foldStale = false;
    }
    this.eventsShared = true;
    const derived = this.fold.snapshot();
    return {
      sessionId: this.sessionId,
      events: this.events,
      derived,
      status: derived.status,
      processAlive: derived.processAlive,
      usage: derived.usage,
      activity: derived.activity,
      liveActivity: liveActivity(derived.activity, this.partial),
      settings: derived.settings,
      title: derived.title,
      connected: this.connected,
      connection: this.connection,
      hydrationPhase: this.ready ? "ready" : "hydrating",
      error: this.error,
      lastSeq: this.lastSeq(),
      hasMoreHistory: this.hasMoreHistory,
      partial: this.partial,
      unrecorded: this.unrecorded,
    };
  }

  /**
   * Schedules one snapshot rebuild and notification. While hydrating, a
   * long replay arrives one message at a time; publishing at most every
   * 50 ms lets a burst of events share one copy of the list and one
   * notification (the derived state is already up to date per event).
   */
  private changed(): void {
    if (this.notifyScheduled || this.closed) return;
    this.notifyScheduled = true;
    const wait = this.ready ? 0 : Math.max(0, 50 - (Date.now() - this.lastNotify));
    const run = () => {
      if (this.notifyScheduled) this.publish();
    };
    if (wait === 0) queueMicrotask(run);
    else setTimeout(run, wait);
  }

  /** Rebuilds the snapshot and notifies now (a scheduled rebuild is folded in). */
  private publish(): void {
    this.notifyScheduled = false;
    if (this.closed) return;
    this.lastNotify = Date.now();
    this.snapshot = this.computeSnapshot();
    for (const l of [...this.listeners]) l(this.snapshot);
  }
}

/** Creates a SessionService client on `transport` and a handle over it. */
export function createSessionHandle(
  transport: Transport,
  sessionId: string,
  options?: SessionHandleOptions,
): SessionHandle {
  return new SessionHandle(createClient(SessionService, transport), sessionId, options);
}
