// Small pieces shared by the views.

import type { SessionUsageTotals } from "@agent-harness/client/client";
import { tokens, usd } from "./format.ts";

/** The state of the page's link to the server. */
export type ConnState = "connecting" | "connected" | "disconnected";

/** The connection indicator: a dot and a word. */
export function Conn({ state }: { state: ConnState }) {
  return (
    <span className={`conn ${state}`} data-testid="conn" data-state={state} title={`server: ${state}`}>
      <span className="dot" /> {state}
    </span>
  );
}

/** Token totals, cost and how full the context window is. */
export function UsagePanel({ usage, fromServer }: { usage: SessionUsageTotals; fromServer: boolean }) {
  const pct = usage.contextWindow > 0 ? Math.min(100, (usage.contextTokens / usage.contextWindow) * 100) : 0;
  return (
    <section className="panel usage" data-testid="usage">
      <h3>Usage</h3>
      {fromServer && <p className="muted small">Totals from the server: older events are not loaded.</p>}
      <dl>
        <dt>cost</dt>
        <dd data-testid="cost">{usd(usage.costUsd)}</dd>
        <dt>turns</dt>
        <dd data-testid="turns">{usage.turns}</dd>
        <dt>tokens</dt>
        <dd>
          {tokens(usage.inputTokens)} in · {tokens(usage.outputTokens)} out
        </dd>
        <dt>cache</dt>
        <dd>
          {tokens(usage.cacheReadInputTokens)} read · {tokens(usage.cacheCreationInputTokens)} written
        </dd>
      </dl>
      <div className="ctx" title="context window: tokens in the latest main-thread call">
        <div className="ctx-label">
          context {tokens(usage.contextTokens)}
          {usage.contextWindow > 0 ? ` / ${tokens(usage.contextWindow)} (${pct.toFixed(0)}%)` : ""}
        </div>
        <div className="bar" data-testid="context-bar" data-pct={pct.toFixed(1)}>
          <div className={`fill ${pct > 85 ? "hot" : pct > 60 ? "warm" : ""}`} style={{ width: `${pct}%` }} />
        </div>
      </div>
    </section>
  );
}
