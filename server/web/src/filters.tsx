// The session list's search, filters, sort and grouping: what the list
// asks ListSessions for. Everything is done by the server (filtered,
// sorted and paged over every stored session), never over the page shown.

import { useEffect, useState } from "react";
import { SessionOrder, SessionStatus } from "@agent-harness/client/protocol";

/** How long typing in the search box settles before the list is asked again. */
export const SEARCH_DEBOUNCE_MS = 300;

/** What the user chose. */
export interface Filters {
  query: string;
  /** One status, or UNSPECIFIED for any. */
  status: SessionStatus;
  /** One agent, or "" for any. */
  agent: string;
  sort: "recent" | "id";
  /** Grouped by working directory (project): ordered by cwd, a heading per cwd. */
  group: boolean;
}

export const NO_FILTERS: Filters = { query: "", status: SessionStatus.UNSPECIFIED, agent: "", sort: "recent", group: false };

/** `value`, once it has not changed for `ms`. */
export function useDebounced<T>(value: T, ms: number): T {
  const [settled, setSettled] = useState(value);
  useEffect(() => {
    const t = setTimeout(() => setSettled(value), ms);
    return () => clearTimeout(t);
  }, [value, ms]);
  return settled;
}

/** The filters and order of a ListSessions request. */
export interface ListAsk {
  query: string;
  statuses: SessionStatus[];
  agent: string;
  order: SessionOrder;
}

/** The ListSessions request of `f` (its page left to the caller). */
export function listRequest(f: Filters): ListAsk {
  return {
    query: f.query.trim(),
    statuses: f.status === SessionStatus.UNSPECIFIED ? [] : [f.status],
    agent: f.agent,
    order: f.group ? SessionOrder.CWD : f.sort === "recent" ? SessionOrder.RECENT_ACTIVITY : SessionOrder.SESSION_ID,
  };
}

const STATUSES: [SessionStatus, string][] = [
  [SessionStatus.UNSPECIFIED, "any status"],
  [SessionStatus.IDLE, "idle"],
  [SessionStatus.STARTING, "starting"],
  [SessionStatus.STREAMING, "streaming"],
  [SessionStatus.STOPPING, "stopping"],
];

/** The bar above the list: search box, status, agent, sort, group. */
export function FilterBar(props: { filters: Filters; agents: string[]; onChange: (f: Filters) => void }) {
  const { filters: f, agents, onChange } = props;
  const set = (part: Partial<Filters>) => onChange({ ...f, ...part });
  return (
    <div className="filters" data-testid="filters">
      <input
        type="search"
        data-testid="search"
        aria-label="search sessions"
        placeholder="Search title, id or directory"
        maxLength={200}
        value={f.query}
        onChange={(ev) => set({ query: ev.target.value })}
      />
      <select data-testid="filter-status" aria-label="status" value={f.status} onChange={(ev) => set({ status: Number(ev.target.value) })}>
        {STATUSES.map(([s, label]) => (
          <option key={s} value={s}>
            {label}
          </option>
        ))}
      </select>
      <select data-testid="filter-agent" aria-label="agent" value={f.agent} onChange={(ev) => set({ agent: ev.target.value })}>
        <option value="">any agent</option>
        {agents.map((a) => (
          <option key={a} value={a}>
            {a}
          </option>
        ))}
      </select>
      <select
        data-testid="sort"
        aria-label="sort"
        value={f.sort}
        disabled={f.group}
        onChange={(ev) => set({ sort: ev.target.value === "id" ? "id" : "recent" })}
      >
        <option value="recent">recent activity</option>
        <option value="id">session id</option>
      </select>
      <label className="check">
        <input type="checkbox" data-testid="group" checked={f.group} onChange={(ev) => set({ group: ev.target.checked })} /> group by
        project
      </label>
    </div>
  );
}
