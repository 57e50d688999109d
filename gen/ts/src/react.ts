// @agent-harness/client/react: the useSession hook, a thin binding of
// SessionHandle to React state. React is an optional peer dependency; only
// this entry point imports it.
//
// The hook derives nothing itself: the handle keeps the derived state with
// an incremental derive Fold (O(1) amortized per live event) and publishes a
// new snapshot object per change, which useSyncExternalStore compares by
// identity.

import { useCallback, useEffect, useRef, useState, useSyncExternalStore } from "react";
import type { Transport } from "@connectrpc/connect";
import type { JsonObject } from "@bufbuild/protobuf";
import { createGrpcWebTransport } from "@connectrpc/connect-web";
import type {
  Event,
  GetContextUsageResponse,
  RespondPermissionResponse,
  RewindFilesResponse,
  SendResponse,
  SetMaxThinkingTokensResponse,
  SetModelResponse,
  SetPermissionModeResponse,
  SetTitleResponse,
  StartResponse,
  StopResponse,
  StopTaskResponse,
} from "./protocol.js";
import {
  Fold,
  type Activity,
  type Derived,
  type SessionUsageTotals,
  type Settings,
  type Status,
} from "./derive/index.js";
import { EMPTY_PARTIAL, type PartialMessage } from "./partial.js";
import { NO_UNRECORDED, type Unrecorded } from "./unrecorded.js";
import { initialConnection, type Connection } from "./connection.js";
import {
  createSessionHandle,
  type HydrationPhase,
  type PermissionAnswer,
  type RewindOptions,
  type SessionHandle,
  type SessionHandleOptions,
  type SessionSnapshot,
  type StartOptions,
} from "./session.js";

/**
 * Where the server is: a connect-es `transport` (keep it stable across
 * renders, e.g. module scope or useMemo), or a `baseUrl` for which the hook
 * makes a grpc-web transport.
 */
export type UseSessionOptions = SessionHandleOptions &
  ({ transport: Transport; baseUrl?: undefined } | { baseUrl: string; transport?: undefined });

/** What useSession returns: the snapshot plus the session's actions. */
export interface UseSessionResult {
  /** Derived status ("idle" | "starting" | "streaming" | "stopping"). */
  status: Status;
  /**
   * Held events, oldest first, no duplicates. One with `truncated` set came
   * cut down (too large to stream whole); `readFullEvent(e.seq)` fetches it.
   */
  events: readonly Event[];
  /**
   * Everything derived from `events` (equal to `deriveAll(events)`): pending
   * permissions, background tasks, queued messages, plans, ... Each part
   * keeps its identity until its value changes, so it can key a useMemo.
   */
  derived: Derived;
  /**
   * The model, permission mode and thinking budget in force
   * (`derived.settings`): what the start config, the CLI's init or the
   * latest setModel / setPermissionMode / setMaxThinkingTokens said.
   */
  settings: Settings;
  /** What to call the session (`derived.title`; see SessionSnapshot.title). */
  title: string;
  /** Spawns the CLI (creating the session on first use); `config.fork` starts it as a fork of another session. */
  start: (config?: StartOptions) => Promise<StartResponse>;
  /** Sends a user message, with content blocks (images, documents) placed before the text. */
  send: (input: string, contentBlocks?: JsonObject[]) => Promise<SendResponse>;
  /** Stops the current turn. */
  stop: () => Promise<StopResponse>;
  /** Answers a pending permission request. */
  respondPermission: (answer: PermissionAnswer) => Promise<RespondPermissionResponse>;
  /** Stops one background task (`taskId` of its taskStarted); the turn and the process go on. */
  stopTask: (taskId: string) => Promise<StopTaskResponse>;
  /** The live process's context window figures (GetContextUsage). */
  getContextUsage: () => Promise<GetContextUsageResponse>;
  /** Switches the model, live or for the next spawn ("" : the CLI's default). */
  setModel: (model: string) => Promise<SetModelResponse>;
  /** Switches the permission mode, within the operator's policy. */
  setPermissionMode: (mode: string) => Promise<SetPermissionModeResponse>;
  /** Sets the thinking budget per turn (0: none; undefined: the CLI's default). */
  setMaxThinkingTokens: (maxThinkingTokens: number | undefined) => Promise<SetMaxThinkingTokensResponse>;
  /** Names the session ("" : back to the title of its first prompt). */
  setTitle: (title: string) => Promise<SetTitleResponse>;
  /** Undoes the agent's file edits back to the user message whose inputSent is at `toSeq` (`dryRun`: only list them). */
  rewindFiles: (toSeq: bigint, opts?: RewindOptions) => Promise<RewindFilesResponse>;
  /** 'hydrating' until the initial replay and backfill settle, then 'ready'. */
  hydrationPhase: HydrationPhase;
  /** Prepends the next older page; concurrent calls are coalesced. */
  fetchHistory: (opts?: { limit?: number }) => Promise<{ hasMore: boolean }>;
  /** What the agent is doing now. */
  activity: Activity;
  /**
   * What the agent is doing this instant: `activity` refined by live typing
   * ("Writing" while answer text streams, "Running Bash" while a tool's
   * input streams; live.ts).
   */
  liveActivity: Activity;
  /** True while the Subscribe stream is open. */
  connected: boolean;
  /**
   * Whether the state shown is current: `state` "live" while the stream is
   * caught up; otherwise status, process and activity are the last known
   * ones, as of `lastLiveAt` (connection.ts).
   */
  connection: Connection;
  /** True while the CLI process exists. */
  processAlive: boolean;
  /** Token totals, cost and context size. */
  usage: SessionUsageTotals;
  /** The last stream or action error. */
  error: Error | undefined;
  /** Reconnects at once. */
  reconnect: () => void;
  /** Feeds an event in as if the stream had delivered it. */
  injectEvent: (event: Event) => void;
  /** The whole form of a held event marked `truncated` (ReadFullEvent). */
  readFullEvent: (seq: bigint) => Promise<Event>;
  /** True when older events exist on the server. */
  hasMoreHistory: boolean;
  /**
   * Live typing: the blocks of the assistant message being written, until
   * its `content` event lands (then they are in `events`); emptied by
   * turnEnd, runEnd and each reconnect (the server's snapshot restores
   * them). `partialMainText(partial)` is the answer being typed. Empty with
   * `includeDeltas: false`.
   */
  partial: PartialMessage;
  /**
   * Live typing a broken stream left behind and the log never recorded
   * (`lost`, e.g. the server restarted mid-answer): shown with
   * `unrecordedNote(unrecorded)` until the next input (unrecorded.ts).
   */
  unrecorded: Unrecorded;
}

const noHandle = () => Promise.reject(new Error("useSession: not connected yet"));

function emptySnapshot(sessionId: string): SessionSnapshot {
  // What a handle derives from an empty log (activity label "Idle").
  const derived = new Fold().snapshot();
  return {
    sessionId,
    events: [],
    derived,
    status: derived.status,
    processAlive: derived.processAlive,
    usage: derived.usage,
    activity: derived.activity,
    liveActivity: derived.activity,
    settings: derived.settings,
    title: derived.title,
    connected: false,
    connection: initialConnection(Date.now()),
    hydrationPhase: "hydrating",
    error: undefined,
    lastSeq: 0n,
    hasMoreHistory: false,
    partial: EMPTY_PARTIAL,
    unrecorded: NO_UNRECORDED,
  };
}

/**
 * One session's live state. Opens one reconnecting Subscribe stream per
 * (sessionId, transport/baseUrl) and closes it on unmount or change.
 *
 * ```tsx
 * const { status, events, send, stop } = useSession("demo", { baseUrl: "http://127.0.0.1:50051" });
 * ```
 */
export function useSession(sessionId: string, options: UseSessionOptions): UseSessionResult {
  const { transport, baseUrl } = options;
  // Handle options are read once per connection; changing them does not reconnect.
  const optsRef = useRef(options);
  optsRef.current = options;
  const [handle, setHandle] = useState<SessionHandle | undefined>(undefined);

  useEffect(() => {
    const t = transport ?? createGrpcWebTransport({ baseUrl: baseUrl! });
    const { transport: _t, baseUrl: _b, ...handleOpts } = optsRef.current;
    const h = createSessionHandle(t, sessionId, handleOpts);
    setHandle(h);
    return () => {
      h.close();
      setHandle((cur) => (cur === h ? undefined : cur));
    };
  }, [sessionId, transport, baseUrl]);

  const empty = useRef<SessionSnapshot>(emptySnapshot(sessionId));
  if (empty.current.sessionId !== sessionId) empty.current = emptySnapshot(sessionId);
  const subscribe = useCallback(
    (onChange: () => void) => (handle ? handle.subscribe(onChange) : () => {}),
    [handle],
  );
  const getSnapshot = useCallback(() => handle?.getSnapshot() ?? empty.current, [handle]);
  const snap = useSyncExternalStore(subscribe, getSnapshot, getSnapshot);

  return {
    status: snap.status,
    events: snap.events,
    derived: snap.derived,
    hydrationPhase: snap.hydrationPhase,
    activity: snap.activity,
    settings: snap.settings,
    liveActivity: snap.liveActivity,
    title: snap.title,
    connected: snap.connected,
    connection: snap.connection,
    processAlive: snap.processAlive,
    usage: snap.usage,
    error: snap.error,
    hasMoreHistory: snap.hasMoreHistory,
    partial: snap.partial,
    unrecorded: snap.unrecorded,
    start: handle ? handle.start : noHandle,
    send: handle ? handle.send : noHandle,
    stop: handle ? handle.stop : noHandle,
    respondPermission: handle ? handle.respondPermission : noHandle,
    stopTask: handle ? handle.stopTask : noHandle,
    getContextUsage: handle ? handle.getContextUsage : noHandle,
    setModel: handle ? handle.setModel : noHandle,
    setPermissionMode: handle ? handle.setPermissionMode : noHandle,
    setMaxThinkingTokens: handle ? handle.setMaxThinkingTokens : noHandle,
    setTitle: handle ? handle.setTitle : noHandle,
    rewindFiles: handle ? handle.rewindFiles : noHandle,
    fetchHistory: handle ? handle.fetchHistory : () => Promise.resolve({ hasMore: false }),
    reconnect: handle ? handle.reconnect : () => {},
    injectEvent: handle ? handle.injectEvent : () => {},
    readFullEvent: handle ? handle.readFullEvent : noHandle,
  };
}
