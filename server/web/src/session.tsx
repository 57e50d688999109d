// One session, live: useSession's events and derived state. The timeline
// (turns, tool calls, subagents, live typing) pages back on scroll-up; the
// side panel shows status, activity, process, usage with the context bar,
// background tasks and the scheduled wakeup; pending permission prompts are
// answered above the composer. Enter sends, Esc stops. While the stream is
// not live, status, process and activity say they are unknown (stale.tsx),
// and live typing a server restart cut off is shown as not recorded.

import { useCallback, useEffect, useLayoutEffect, useMemo, useRef, useState } from "react";
import type { Transport } from "@connectrpc/connect";
import { Code, ConnectError } from "@connectrpc/connect";
import type { JsonObject } from "@bufbuild/protobuf";
import { useSession } from "@agent-harness/client/react";
import { statusKnown, unrecordedNote, unrecordedText } from "@agent-harness/client/client";
import { DeltaBlockType, partialMainText, vocab, type Event, type PartialMessage, type PendingPermission, type Session, type SessionUsage } from "@agent-harness/client/protocol";
import type { BackgroundTask, ScheduledWakeup, SessionUsageTotals } from "@agent-harness/client/protocol";
import { errorText, isUnauthenticated, serviceClient } from "./api.ts";
import { pretty } from "./format.ts";
import { Timeline } from "./timeline.tsx";
import { MarkdownText } from "./markdown.tsx";
import { Conn, UsagePanel } from "./widgets.tsx";
import { RewindContext, SettingsPanel } from "./control.tsx";
import { Known, useNow } from "./stale.tsx";
import { SessionTitle } from "./title.tsx";

/** Events asked for per History page: a screenful or two of a dense session. */
const PAGE = 30;
/** Scrolled this close to the top, the next older page is fetched. */
const NEAR_TOP_PX = 80;
/** Largest image attached, in bytes (a request is at most 4 MiB). */
const MAX_IMAGE_BYTES = 3 * 1024 * 1024;

/**
 * The agent of the latest run held (hydration fetches back to the current
 * run's run_start): its run_start's agent, claude for a log from before agents
 * could be chosen; undefined before any run.
 */
function latestAgent(events: readonly Event[]): string | undefined {
  for (let i = events.length - 1; i >= 0; i--) {
    const p = events[i]!.payload;
    if (p.case === "runStart") return p.value.agent || vocab.agent.CLAUDE;
  }
  return undefined;
}

export function SessionView(props: { sessionId: string; transport: Transport; onUnauthenticated: () => void }) {
  const { sessionId, transport, onUnauthenticated } = props;
  const s = useSession(sessionId, { transport });
  const [actionError, setActionError] = useState("");

  useEffect(() => {
    if (s.error && isUnauthenticated(s.error)) onUnauthenticated();
  }, [s.error, onUnauthenticated]);

  const act = (f: () => Promise<unknown>) => {
    setActionError("");
    f().catch((err: unknown) => setActionError(errorText(err)));
  };
  const stop = () => act(() => s.stop());

  // Esc stops the turn, wherever the focus is.
  const stopRef = useRef(stop);
  stopRef.current = stop;
  const busy = s.status !== "idle";
  useEffect(() => {
    const onKey = (ev: KeyboardEvent) => {
      if (ev.key === "Escape" && busy) {
        ev.preventDefault();
        stopRef.current();
      }
    };
    window.addEventListener("keydown", onKey);
    return () => window.removeEventListener("keydown", onKey);
  }, [busy]);

  const d = s.derived;
  const typing = partialMainText(s.partial);
  const outputs = useToolOutputs(s.partial);
  // A long session opens on its tail (the server replays the newest events).
  // Status, process, activity and pending prompts follow from the current
  // run, so hydration fetches back to its run_start; the usage totals sum
  // every turn, so until the whole log is held they come from the server.
  const whole = s.events.length === 0 || s.events[0]!.seq === 1n;
  const runHeld = whole || s.events.some((e) => e.payload.case === "runStart");
  const ready = s.hydrationPhase === "ready";
  const { fetchHistory, hasMoreHistory } = s;
  useEffect(() => {
    if (ready && !runHeld && hasMoreHistory) void fetchHistory({ limit: PAGE });
  }, [ready, runHeld, hasMoreHistory, fetchHistory, s.events]);
  // The title too: a respawn's run_start held without the first prompt would name it wrongly.
  const server = useServerSession(transport, sessionId, !whole, `${s.usage.turns} ${d.headSeq}`);
  const serverUsage = server?.usage && pick(server.usage);
  const title = whole ? s.title : (server?.title ?? s.title);
  const conn = s.connected ? "connected" : s.error ? "disconnected" : "connecting";
  // Status, process and activity are facts only while the stream is live;
  // otherwise they are as of `lastLiveAt` (undefined: never known).
  const known = statusKnown(s.connection);
  const stale = known ? false : s.connection.lastLiveAt;
  const now = useNow(!known);
  const processText = s.processAlive ? "alive" : "gone";
  const { rewindFiles } = s;
  const rewind = useCallback((toSeq: bigint, dryRun: boolean) => rewindFiles(toSeq, { dryRun }), [rewindFiles]);
  const first = s.events[0];
  const agent = latestAgent(s.events);

  return (
    <main className="session" data-hydration={s.hydrationPhase}>
      <div className="toolbar">
        <SessionTitle sessionId={sessionId} title={title} onRename={s.setTitle} />
        {agent && (
          <span className="badge agent" title="the agent running this session" data-testid="agent">
            {agent}
          </span>
        )}
        <Known testid="status" className={`status ${s.status}`} value={s.status} last={s.status} stale={stale} unknown="status unknown" now={now} />
        {known && busy && <span className="spinner" data-testid="spinner" title="at work" />}
        <span className="activity" data-testid="activity">
          {known ? s.liveActivity.label : ""}
        </span>
        <span className="spacer" />
        <Conn state={conn} />
      </div>
      <div className="body">
        <RewindContext.Provider value={rewind}>
        <Scroller
          events={s.events}
          pending={d.pendingPermissions}
          typing={typing}
          live={known}
          unrecorded={unrecordedText(s.unrecorded)}
          unrecordedNote={unrecordedNote(s.unrecorded)}
          outputs={outputs}
          hasMore={s.hasMoreHistory}
          ready={s.hydrationPhase === "ready"}
          fetchOlder={() => s.fetchHistory({ limit: PAGE })}
          firstSeq={first?.seq}
          headSeq={d.headSeq}
        />
        </RewindContext.Provider>
        <aside className="side">
          <section className="panel">
            <h3>Session</h3>
            <dl>
              <dt>status</dt>
              <dd>
                <Known testid="status-detail" className={`status-text ${s.status}`} value={s.status} last={s.status} stale={stale} unknown="unknown" now={now} />
              </dd>
              <dt>agent</dt>
              <dd data-testid="agent-detail">{agent ?? "–"}</dd>
              <dt>process</dt>
              <dd>
                <Known
                  testid="process"
                  value={
                    <>
                      <span className={`dot ${processText}`} /> {processText}
                    </>
                  }
                  last={processText}
                  stale={stale}
                  unknown="unknown"
                  now={now}
                />
              </dd>
              <dt>stream</dt>
              <dd data-testid="connected">{s.connected ? "connected" : "disconnected"}</dd>
              <dt>hydration</dt>
              <dd data-testid="hydration">{s.hydrationPhase}</dd>
              <dt>events</dt>
              <dd>
                <span data-testid="head">{String(d.headSeq)}</span>
                {first && first.seq > 1n ? ` (from #${first.seq})` : ""}
              </dd>
              {d.resumeId && (
                <>
                  <dt>resume</dt>
                  <dd className="mono small">{d.resumeId}</dd>
                </>
              )}
            </dl>
            {d.contextLost && <p className="warn-text">The CLI lost the conversation before #{String(d.contextLost.seq)}.</p>}
          </section>
          <SettingsPanel
            settings={s.settings}
            setModel={s.setModel}
            setPermissionMode={s.setPermissionMode}
            setMaxThinkingTokens={s.setMaxThinkingTokens}
          />
          <UsagePanel usage={whole ? s.usage : (serverUsage ?? s.usage)} fromServer={!whole} />
          <Tasks tasks={d.backgroundTasks} onStop={(id) => act(() => s.stopTask(id))} />
          {d.scheduledWakeup && <Wakeup w={d.scheduledWakeup} />}
        </aside>
      </div>
      <div className="dock">
        {d.pendingMessages.length > 0 && (
          <div className="queued" data-testid="queued">
            queued: {d.pendingMessages.map((m) => m.text).join(" · ")}
          </div>
        )}
        {d.pendingPermissions.map((p) => (
          <Permission key={p.requestId} p={p} onAnswer={(a) => act(() => s.respondPermission({ requestId: p.requestId, ...a }))} />
        ))}
        <Composer
          busy={busy}
          onSend={(text, blocks) =>
            act(() =>
              s.send(text, blocks).catch((err: unknown) => {
                // A session never started: the first message starts it.
                if (ConnectError.from(err).code === Code.NotFound) return s.start({ prompt: text, contentBlocks: blocks });
                throw err;
              }),
            )
          }
          onStop={stop}
        />
        {(actionError || (s.error && !s.connected)) && (
          <p className="error" data-testid="error">
            {actionError || errorText(s.error)}
          </p>
        )}
      </div>
    </main>
  );
}

/**
 * The session as the server derives it over the whole log (GetSession):
 * its usage and title when the page holds only the log's tail. Asked again
 * whenever `key` changes; undefined while `enabled` is false or before the
 * first answer.
 */
function useServerSession(transport: Transport, sessionId: string, enabled: boolean, key: string) {
  const [session, setSession] = useState<Session | undefined>(undefined);
  useEffect(() => {
    if (!enabled) return;
    let live = true;
    serviceClient(transport)
      .getSession({ sessionId })
      .then(
        (res) => {
          if (live && res.session) setSession(res.session);
        },
        () => {},
      );
    return () => {
      live = false;
    };
  }, [transport, sessionId, enabled, key]);
  return enabled ? session : undefined;
}

/** The totals of the API's SessionUsage. */
function pick(u: SessionUsage): SessionUsageTotals {
  return {
    inputTokens: Number(u.inputTokens),
    outputTokens: Number(u.outputTokens),
    cacheCreationInputTokens: Number(u.cacheCreationInputTokens),
    cacheReadInputTokens: Number(u.cacheReadInputTokens),
    costUsd: u.costUsd,
    contextTokens: Number(u.contextTokens),
    contextWindow: Number(u.contextWindow),
    turns: u.turns,
  };
}

/**
 * What each running tool has printed so far (its live output, by tool_use
 * id): a new map only when some output changed, so typing of the answer
 * does not redraw the timeline.
 */
function useToolOutputs(partial: PartialMessage): ReadonlyMap<string, string> {
  const blocks = partial.blocks.filter((b) => b.blockType === DeltaBlockType.TOOL_OUTPUT);
  const key = JSON.stringify(blocks.map((b) => [b.toolUseId, b.text]));
  // Keyed by the content: the blocks array is new on every delta.
  return useMemo(() => new Map(blocks.map((b) => [b.toolUseId, b.text])), [key]);
}

/**
 * The scrolling timeline. Sticks to the bottom while the reader is there;
 * near the top it fetches the next older page and keeps the reader's place
 * when the page lands above.
 */
function Scroller(props: {
  events: Parameters<typeof Timeline>[0]["events"];
  pending: Parameters<typeof Timeline>[0]["pending"];
  typing: string;
  /** The stream is live; otherwise the typing shown is as far as it got, and running is unknown. */
  live: boolean;
  /** Typing the log never recorded (a restart cut it off), and why. */
  unrecorded: string;
  unrecordedNote: string;
  outputs: ReadonlyMap<string, string>;
  hasMore: boolean;
  ready: boolean;
  fetchOlder: () => Promise<unknown>;
  firstSeq: bigint | undefined;
  headSeq: bigint;
}) {
  const { events, pending, typing, live, unrecorded, unrecordedNote, outputs, hasMore, ready, fetchOlder, firstSeq, headSeq } = props;
  const ref = useRef<HTMLDivElement>(null);
  const stick = useRef(true);
  const prev = useRef<{ firstSeq: bigint | undefined; height: number }>({ firstSeq: undefined, height: 0 });

  useLayoutEffect(() => {
    const el = ref.current;
    if (!el) return;
    const before = prev.current;
    if (before.firstSeq !== undefined && firstSeq !== undefined && firstSeq < before.firstSeq && !stick.current) {
      // An older page landed above: keep what the reader was looking at in place.
      el.scrollTop += el.scrollHeight - before.height;
    } else if (stick.current) {
      el.scrollTop = el.scrollHeight;
    }
    prev.current = { firstSeq, height: el.scrollHeight };
    // Nothing to scroll yet: fetch older pages until the view is full.
    if (el.scrollHeight <= el.clientHeight && hasMore && ready) void fetchOlder();
  }, [events, typing, unrecorded, outputs, firstSeq, hasMore, ready, fetchOlder]);

  const loadOlder = () => {
    if (hasMore && ready) void fetchOlder();
  };
  return (
    <div
      className="timeline"
      data-testid="timeline"
      data-first-seq={String(firstSeq ?? 0n)}
      data-head-seq={String(headSeq)}
      ref={ref}
      onScroll={(ev) => {
        const el = ev.currentTarget;
        stick.current = el.scrollHeight - el.scrollTop - el.clientHeight < 40;
        prev.current.height = el.scrollHeight;
        if (el.scrollTop < NEAR_TOP_PX) loadOlder();
      }}
    >
      {hasMore ? (
        <button type="button" className="older" data-testid="older" onClick={loadOlder}>
          older events
        </button>
      ) : (
        events.length > 0 && <div className="log-start muted">start of the session</div>
      )}
      {!ready && <div className="muted pad">loading…</div>}
      <Timeline events={events} pending={pending} outputs={outputs} live={live} />
      {typing !== "" && (
        <div className={`ev assistant typing${live ? "" : " stale"}`} data-testid="partial">
          <MarkdownText text={typing} />
        </div>
      )}
      {unrecorded !== "" && (
        <div className="ev assistant unrecorded" data-testid="unrecorded">
          <div className="note" data-testid="unrecorded-note">
            {unrecordedNote}
          </div>
          <div className="text">{unrecorded}</div>
        </div>
      )}
      {ready && events.length === 0 && <p className="muted pad">Nothing here yet: send a message to start the session.</p>}
    </div>
  );
}

/** A pending permission prompt: the tool, its input (editable), allow or deny. */
function Permission(props: { p: PendingPermission; onAnswer: (a: { allow: boolean; updatedInput?: JsonObject; message?: string }) => void }) {
  const { p, onAnswer } = props;
  const original = pretty(p.input);
  const [input, setInput] = useState(original);
  const [message, setMessage] = useState("");
  const [error, setError] = useState("");
  const allow = () => {
    if (input === original) return onAnswer({ allow: true });
    try {
      const parsed: unknown = JSON.parse(input);
      if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) throw new Error("not an object");
      onAnswer({ allow: true, updatedInput: parsed as JsonObject });
    } catch (err) {
      setError(`The input must be a JSON object: ${String(err)}`);
    }
  };
  return (
    <div className="card permission" data-testid="permission" data-request-id={p.requestId} data-tool={p.toolName}>
      <div className="perm-head">
        <strong>{p.toolName}</strong> wants to run{p.description ? `: ${p.description}` : ""}
        {p.decisionReason && <span className="muted"> ({p.decisionReason})</span>}
      </div>
      <textarea
        data-testid="permission-input"
        className="mono"
        rows={Math.min(8, original.split("\n").length)}
        value={input}
        onChange={(ev) => setInput(ev.target.value)}
      />
      <div className="row">
        <button type="button" className="allow" data-testid="allow" onClick={allow}>
          {input === original ? "Allow" : "Allow edited"}
        </button>
        <input placeholder="reason (optional)" value={message} onChange={(ev) => setMessage(ev.target.value)} />
        <button type="button" className="deny" data-testid="deny" onClick={() => onAnswer({ allow: false, message: message || "Denied in the console" })}>
          Deny
        </button>
      </div>
      {error && <p className="error">{error}</p>}
    </div>
  );
}

/** The message box: Enter sends (Shift+Enter: new line), images attach. */
function Composer(props: { busy: boolean; onSend: (text: string, blocks: JsonObject[]) => void; onStop: () => void }) {
  const { busy, onSend, onStop } = props;
  const [text, setText] = useState("");
  const [images, setImages] = useState<{ name: string; url: string; block: JsonObject }[]>([]);
  const [error, setError] = useState("");
  const fileRef = useRef<HTMLInputElement>(null);

  const send = () => {
    if (text.trim() === "" && images.length === 0) return;
    onSend(text, images.map((i) => i.block));
    for (const i of images) URL.revokeObjectURL(i.url);
    setText("");
    setImages([]);
  };
  const attach = async (files: FileList | null) => {
    setError("");
    for (const f of Array.from(files ?? [])) {
      if (!/^image\/(png|jpeg|gif|webp)$/.test(f.type)) {
        setError(`${f.name}: only PNG, JPEG, GIF and WebP images`);
        continue;
      }
      if (f.size > MAX_IMAGE_BYTES) {
        setError(`${f.name}: larger than 3 MiB`);
        continue;
      }
      const data = await toBase64(f);
      const block: JsonObject = { type: "image", source: { type: "base64", media_type: f.type, data } };
      setImages((cur) => [...cur, { name: f.name, url: URL.createObjectURL(f), block }]);
    }
  };

  return (
    <form
      className="composer"
      onSubmit={(ev) => {
        ev.preventDefault();
        send();
      }}
    >
      {images.length > 0 && (
        <div className="thumbs" data-testid="attachments">
          {images.map((i, n) => (
            <figure key={i.url}>
              <img src={i.url} alt={i.name} />
              <button type="button" className="x" title="remove" onClick={() => setImages((cur) => cur.filter((_, k) => k !== n))}>
                ×
              </button>
            </figure>
          ))}
        </div>
      )}
      <div className="row">
        <textarea
          data-testid="input"
          rows={1}
          placeholder="Message · Enter sends · Shift+Enter new line · Esc stops"
          value={text}
          onChange={(ev) => setText(ev.target.value)}
          onKeyDown={(ev) => {
            if (ev.key === "Enter" && !ev.shiftKey && !ev.nativeEvent.isComposing) {
              ev.preventDefault();
              send();
            }
          }}
        />
        <input
          ref={fileRef}
          data-testid="attach-input"
          type="file"
          accept="image/png,image/jpeg,image/gif,image/webp"
          multiple
          hidden
          onChange={(ev) => {
            void attach(ev.target.files);
            ev.target.value = "";
          }}
        />
        <button type="button" className="ghost" data-testid="attach" title="attach images" onClick={() => fileRef.current?.click()}>
          + image
        </button>
        <button type="submit" data-testid="send">
          Send
        </button>
        <button type="button" className="stop" data-testid="stop" onClick={onStop} disabled={!busy}>
          Stop
        </button>
      </div>
      {error && <p className="error">{error}</p>}
    </form>
  );
}

function toBase64(f: File): Promise<string> {
  return new Promise((res, rej) => {
    const r = new FileReader();
    r.onload = () => res(String(r.result).replace(/^data:[^,]*,/, ""));
    r.onerror = () => rej(r.error);
    r.readAsDataURL(f);
  });
}

function Tasks({ tasks, onStop }: { tasks: readonly BackgroundTask[]; onStop: (taskId: string) => void }) {
  if (tasks.length === 0) return null;
  return (
    <section className="panel" data-testid="tasks">
      <h3>Background tasks</h3>
      <ul className="tasks">
        {tasks.map((t) => (
          <li key={t.taskId} data-testid="task" data-status={t.status}>
            <span className={`badge ${t.status}`}>{t.status}</span> <span className="mono small">{t.taskId}</span> {t.description}
            {t.summary && <div className="muted small">{t.summary}</div>}
            {t.status === "running" && (
              <button type="button" className="link" data-testid="task-stop" onClick={() => onStop(t.taskId)}>
                stop
              </button>
            )}
          </li>
        ))}
      </ul>
    </section>
  );
}

function Wakeup({ w }: { w: ScheduledWakeup }) {
  const when = w.scheduledForMs
    ? new Date(w.scheduledForMs).toLocaleTimeString([], { hour12: false })
    : w.humanSchedule || w.cron || (w.delaySeconds !== undefined ? `in ${w.delaySeconds}s` : "");
  return (
    <section className="panel" data-testid="wakeup">
      <h3>Scheduled</h3>
      <p>
        <span className="badge">{w.kind}</span> {when}
        {w.recurring ? " (recurring)" : ""}
      </p>
      <p className="small">{w.prompt}</p>
      {w.reason && <p className="muted small">{w.reason}</p>}
    </section>
  );
}
