// The session list (ListSessions, polled: the server has no list stream),
// searched, filtered, sorted and grouped by the server (filters.tsx), each
// row with its agent, derived status, activity, process, usage and pending
// permissions, and the form that starts a new session.

import { Fragment, useEffect, useState } from "react";
import type { Transport } from "@connectrpc/connect";
import { SessionStatus, vocab, type AgentInfo, type Session } from "@agent-harness/client/protocol";
import { createSessionHandle } from "@agent-harness/client/client";
import { errorText, isUnauthenticated, serviceClient } from "./api.ts";
import { newSessionId, tokens, usd } from "./format.ts";
import { Conn, type ConnState } from "./widgets.tsx";
import { Known, useNow } from "./stale.tsx";
import { FilterBar, listRequest, NO_FILTERS, SEARCH_DEBOUNCE_MS, useDebounced, type Filters } from "./filters.tsx";

/** How often the list is asked for again. */
const POLL_MS = 1500;

const STATUS: Record<SessionStatus, string> = {
  [SessionStatus.UNSPECIFIED]: "unknown",
  [SessionStatus.IDLE]: "idle",
  [SessionStatus.STARTING]: "starting",
  [SessionStatus.STREAMING]: "streaming",
  [SessionStatus.STOPPING]: "stopping",
};

/**
 * Sessions per page. Only the page shown is asked for again: each poll
 * makes the server fold those sessions' logs (from its cache of recently
 * used ones), so polling every session of a large store would churn it.
 */
const PAGE_SIZE = 100;

export function SessionList(props: { transport: Transport; onUnauthenticated: () => void }) {
  const { transport, onUnauthenticated } = props;
  const [sessions, setSessions] = useState<Session[] | undefined>(undefined);
  // When the rows were last current: while polls fail their status is history.
  const [listedAt, setListedAt] = useState(0);
  const [conn, setConn] = useState<ConnState>("connecting");
  const [error, setError] = useState("");
  const [total, setTotal] = useState(0);
  const [filters, setFilters] = useState<Filters>(NO_FILTERS);
  // The search box is asked for once typing settles; the other choices at once.
  const query = useDebounced(filters.query, SEARCH_DEBOUNCE_MS);
  const asked = listRequest({ ...filters, query });
  const key = JSON.stringify(asked);
  // The page tokens that led to the page shown ("" first), for the filters
  // they were given for: other filters start again from the first page.
  const [paging, setPaging] = useState<{ key: string; pages: string[] }>({ key, pages: [""] });
  const pages = paging.key === key ? paging.pages : [""];
  const setPages = (f: (p: string[]) => string[]) => setPaging({ key, pages: f(pages) });
  const [next, setNext] = useState("");
  const pageToken = pages[pages.length - 1]!;
  const agents = useAgents(transport)
    .choices.filter((a) => a.enabled)
    .map((a) => a.name);

  useEffect(() => {
    let live = true;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const poll = async () => {
      try {
        const res = await serviceClient(transport).listSessions({ ...asked, pageSize: PAGE_SIZE, pageToken });
        if (!live) return;
        setSessions(res.sessions);
        setNext(res.nextPageToken);
        setTotal(Number(res.totalSize));
        setListedAt(Date.now());
        setConn("connected");
        setError("");
      } catch (err) {
        if (!live) return;
        if (isUnauthenticated(err)) return onUnauthenticated();
        setConn("disconnected");
        setError(errorText(err));
      }
      if (live) timer = setTimeout(poll, POLL_MS);
    };
    void poll();
    return () => {
      live = false;
      clearTimeout(timer);
    };
  }, [transport, onUnauthenticated, pageToken, key]);

  // In the server's order: its sort and grouping span every page.
  const rows = sessions ?? [];
  const stale = conn === "connected" ? false : listedAt || undefined;
  const now = useNow(stale !== false);
  // Whether some sessions may be left out (an order leaves none out).
  const filtered = asked.query !== "" || asked.statuses.length > 0 || asked.agent !== "";

  return (
    <main className="list">
      <div className="toolbar">
        <h1>Sessions</h1>
        <span className="spacer" />
        <Conn state={conn} />
      </div>
      <StartForm transport={transport} />
      <FilterBar filters={filters} agents={agents} onChange={setFilters} />
      {sessions !== undefined && (
        <p className="muted small" data-testid="total">
          {total === 1 ? "1 session" : `${total} sessions`}
          {filtered ? " match" : ""}
        </p>
      )}
      {error && (
        <p className="error" data-testid="error">
          {error}
        </p>
      )}
      {sessions === undefined ? (
        <p className="muted">Loading…</p>
      ) : rows.length === 0 ? (
        <p className="muted" data-testid="empty">
          {filtered ? "No session matches." : "No sessions yet. Start one above."}
        </p>
      ) : (
        <table className="sessions" data-testid="sessions">
          <thead>
            <tr>
              <th>session</th>
              <th>agent</th>
              <th>status</th>
              <th className="wide">activity</th>
              <th>process</th>
              <th className="num">turns</th>
              <th className="num">cost</th>
              <th className="num wide">context</th>
              <th className="num wide">events</th>
            </tr>
          </thead>
          <tbody>
            {rows.map((s, i) => {
              const status = STATUS[s.status];
              const u = s.usage;
              const heading = filters.group && (i === 0 || rows[i - 1]!.cwd !== s.cwd);
              return (
                <Fragment key={s.sessionId}>
                  {heading && (
                    <tr className="group">
                      <th colSpan={9} data-testid="group-heading" data-cwd={s.cwd}>
                        {s.cwd || "(the server's directory)"}
                      </th>
                    </tr>
                  )}
                  <tr data-testid="session-row" data-session={s.sessionId} data-status={stale === false ? status : "unknown"} data-cwd={s.cwd} className={stale === false ? undefined : "stale-row"}>
                    <td className="id">
                      <a href={`#/s/${encodeURIComponent(s.sessionId)}`} title={s.sessionId} data-testid="row-title">
                        {s.title || s.sessionId}
                      </a>
                      {s.pendingPermissions > 0 && (
                        <span className="badge warn" title="permission prompts waiting" data-testid="row-pending">
                          {s.pendingPermissions} to answer
                        </span>
                      )}
                    </td>
                    <td data-testid="row-agent">{s.agent || "–"}</td>
                    <td>
                      <RowStatus status={status} stale={stale} now={now} />
                    </td>
                    <td className="wide" data-testid="row-activity">
                      {s.activity}
                    </td>
                    <td>
                      <RowProcess alive={s.processAlive} stale={stale} now={now} />
                    </td>
                    <td className="num">{u?.turns ?? 0}</td>
                    <td className="num" data-testid="row-cost">
                      {usd(u?.costUsd ?? 0)}
                    </td>
                    <td className="num wide">{u && u.contextTokens > 0 ? tokens(Number(u.contextTokens)) : "–"}</td>
                    <td className="num wide">{String(s.headSeq)}</td>
                  </tr>
                </Fragment>
              );
            })}
          </tbody>
        </table>
      )}
      {(pages.length > 1 || next !== "") && (
        <div className="pager">
          <button type="button" className="ghost" disabled={pages.length === 1} onClick={() => setPages((p) => p.slice(0, -1))}>
            ← previous
          </button>
          <span className="muted small">page {pages.length}</span>
          <button type="button" className="ghost" data-testid="next-page" disabled={next === ""} onClick={() => setPages((p) => [...p, next])}>
            next →
          </button>
        </div>
      )}
    </main>
  );
}

/**
 * The built-in agents: offered even when the server does not run one (marked
 * "not enabled"), so that choosing it shows the server's answer naming the
 * flag that enables it.
 */
const BUILT_IN = [vocab.agent.CLAUDE, vocab.agent.CODEX];

/** One choice of the form's agent select. */
type AgentChoice = { name: string; enabled: boolean; kind: string };

/**
 * The agents the server runs (ListAgents), asked for once, then the
 * built-in ones it does not run; until the answer, claude alone. A failed
 * call leaves claude and the built-ins, and says why.
 */
function useAgents(transport: Transport): { choices: AgentChoice[]; fallback: string; error: string } {
  const [listed, setListed] = useState<AgentInfo[] | undefined>(undefined);
  const [error, setError] = useState("");
  useEffect(() => {
    let live = true;
    serviceClient(transport)
      .listAgents({})
      .then(
        (res) => live && setListed(res.agents),
        (err: unknown) => live && !isUnauthenticated(err) && setError(`the agents: ${errorText(err)}`),
      );
    return () => {
      live = false;
    };
  }, [transport]);
  const enabled = listed ?? [{ name: vocab.agent.CLAUDE, kind: vocab.agentKind.CLAUDE, isDefault: true } as AgentInfo];
  const choices: AgentChoice[] = [
    ...enabled.map((a) => ({ name: a.name, enabled: true, kind: a.kind })),
    ...BUILT_IN.filter((b) => !enabled.some((a) => a.name === b)).map((b) => ({ name: b, enabled: false, kind: b })),
  ];
  const fallback = enabled.find((a) => a.isDefault)?.name ?? vocab.agent.CLAUDE;
  return { choices, fallback, error };
}

/**
 * Starts a session: agent, prompt, working directory and model. The agents
 * offered are those the server lists (ListAgents: claude, codex when
 * enabled, the ACP agents the operator configured), then the built-in ones
 * it does not run. The server applies the operator's launch policy
 * (--allowed-cwd, ...) and names what it refuses, an agent it has not
 * enabled included (FAILED_PRECONDITION naming the flag that enables it).
 */
function StartForm({ transport }: { transport: Transport }) {
  const [id, setId] = useState("");
  const [prompt, setPrompt] = useState("");
  const [cwd, setCwd] = useState("");
  const [model, setModel] = useState("");
  const agents = useAgents(transport);
  // The agent chosen; until one is, the server's default.
  const [chosen, setAgent] = useState<string | undefined>(undefined);
  const agent = chosen ?? agents.fallback;
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState("");
  return (
    <form
      className="card start"
      data-testid="start-form"
      onSubmit={(ev) => {
        ev.preventDefault();
        const sessionId = id.trim() || newSessionId();
        setBusy(true);
        setError("");
        // A handle that never subscribes: the client's Start, with its idempotency key and retries.
        const h = createSessionHandle(transport, sessionId, { autoConnect: false });
        h.start({ prompt, cwd: cwd.trim(), model: model.trim(), agent })
          .then(
            () => {
              location.hash = `#/s/${encodeURIComponent(sessionId)}`;
            },
            (err: unknown) => {
              setBusy(false);
              setError(errorText(err));
            },
          )
          .finally(() => h.close());
      }}
    >
      <div className="row">
        <textarea
          data-testid="start-prompt"
          rows={2}
          placeholder="First message (empty: the agent waits for one)"
          value={prompt}
          onChange={(ev) => setPrompt(ev.target.value)}
        />
      </div>
      <div className="row fields">
        <select data-testid="start-agent" aria-label="agent" value={agent} onChange={(ev) => setAgent(ev.target.value)}>
          {agents.choices.map((a) => (
            <option key={a.name} value={a.name} title={`kind: ${a.kind}`}>
              {a.enabled ? a.name : `${a.name} (not enabled)`}
            </option>
          ))}
        </select>
        <input data-testid="start-id" placeholder="session id (optional)" value={id} onChange={(ev) => setId(ev.target.value)} />
        <input data-testid="start-cwd" placeholder="working directory (server's default)" value={cwd} onChange={(ev) => setCwd(ev.target.value)} />
        <input data-testid="start-model" placeholder="model (default)" value={model} onChange={(ev) => setModel(ev.target.value)} />
        <button data-testid="start" type="submit" disabled={busy}>
          {busy ? "Starting…" : "Start session"}
        </button>
      </div>
      {(error || agents.error) && (
        <p className="error" data-testid="start-error">
          {error || agents.error}
        </p>
      )}
    </form>
  );
}

/** A row's process, like its status. */
function RowProcess(props: { alive: boolean; stale: false | number | undefined; now: number }) {
  const { alive, stale, now } = props;
  const word = alive ? "alive" : "gone";
  const value = (
    <>
      <span className={`dot ${word}`} /> {word}
    </>
  );
  return <Known testid="row-process" value={value} last={word} stale={stale} unknown="unknown" now={now} />;
}

/** A row's status: greyed with its age, and "unknown", while the list cannot be refreshed. */
function RowStatus(props: { status: string; stale: false | number | undefined; now: number }) {
  const { status, stale, now } = props;
  return <Known testid="row-status" className={`status ${status}`} value={status} last={status} stale={stale} unknown="unknown" now={now} />;
}
