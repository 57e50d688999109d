// Control of a running session in the console: the settings in
// force (model, permission mode, thinking budget) with a way to change
// each, and "undo file edits from here" on the user's messages.
//
// Every change goes through the session handle's retry-safe actions; what
// the panel shows is derived from the log (`settings`), so it changes only
// once the server recorded the change (or the CLI reported it).

import { createContext, useContext, useState } from "react";
import type { RewindFilesResponse, Settings } from "@agent-harness/client/protocol";
import { errorText } from "./api.ts";

/** The modes the CLI knows; the server refuses those its policy does not allow. */
const MODES = ["default", "plan", "dontAsk", "acceptEdits", "auto", "bypassPermissions"];

export function SettingsPanel(props: {
  settings: Settings;
  setModel: (model: string) => Promise<unknown>;
  setPermissionMode: (mode: string) => Promise<unknown>;
  setMaxThinkingTokens: (n: number | undefined) => Promise<unknown>;
}) {
  const { settings } = props;
  const [model, setModel] = useState("");
  const [thinking, setThinking] = useState("");
  const [error, setError] = useState("");
  const [busy, setBusy] = useState(false);
  const run = (f: () => Promise<unknown>) => {
    setError("");
    setBusy(true);
    f()
      .catch((err: unknown) => setError(errorText(err)))
      .finally(() => setBusy(false));
  };
  const mode = settings.permissionMode ?? "default";
  return (
    <section className="panel settings" data-testid="settings">
      <h3>Settings</h3>
      <dl>
        <dt>model</dt>
        <dd className="mono small" data-testid="setting-model">
          {settings.model ?? "CLI default"}
        </dd>
        <dt>mode</dt>
        <dd>
          <select
            data-testid="setting-mode"
            value={mode}
            disabled={busy}
            onChange={(ev) => {
              const next = ev.currentTarget.value;
              run(() => props.setPermissionMode(next));
            }}
          >
            {(MODES.includes(mode) ? MODES : [mode, ...MODES]).map((m) => (
              <option key={m} value={m}>
                {m}
              </option>
            ))}
          </select>
        </dd>
        <dt>thinking</dt>
        <dd data-testid="setting-thinking">
          {settings.maxThinkingTokens === undefined ? "CLI default" : `${settings.maxThinkingTokens} tokens`}
        </dd>
      </dl>
      <form
        className="row"
        onSubmit={(ev) => {
          ev.preventDefault();
          const next = model.trim();
          run(() => props.setModel(next).then(() => setModel("")));
        }}
      >
        <input
          data-testid="model-input"
          placeholder="model (empty: CLI default)"
          value={model}
          onChange={(ev) => setModel(ev.currentTarget.value)}
        />
        <button type="submit" data-testid="set-model" disabled={busy}>
          set
        </button>
      </form>
      <form
        className="row"
        onSubmit={(ev) => {
          ev.preventDefault();
          const t = thinking.trim();
          run(() => props.setMaxThinkingTokens(t === "" ? undefined : Number(t)).then(() => setThinking("")));
        }}
      >
        <input
          data-testid="thinking-input"
          inputMode="numeric"
          placeholder="thinking tokens (empty: default)"
          value={thinking}
          onChange={(ev) => setThinking(ev.currentTarget.value)}
        />
        <button type="submit" disabled={busy}>
          set
        </button>
      </form>
      <p className="muted small">Applied to the live process, or to the next one when none runs.</p>
      {error && (
        <p className="error" data-testid="settings-error">
          {error}
        </p>
      )}
    </section>
  );
}

/** How the timeline reaches RewindFiles (a dry run first, then the rewind). */
export type Rewind = (toSeq: bigint, dryRun: boolean) => Promise<RewindFilesResponse>;

export const RewindContext = createContext<Rewind | undefined>(undefined);

/**
 * "Undo file edits from here" on a user message: a dry run lists what would
 * be restored, then the rewind itself on confirmation.
 */
export function RewindButton({ seq }: { seq: bigint }) {
  const rewind = useContext(RewindContext);
  const [state, setState] = useState<
    | { step: "idle" }
    | { step: "asking" }
    | { step: "confirm"; preview: RewindFilesResponse }
    | { step: "done"; text: string }
  >({ step: "idle" });
  if (!rewind) return null;
  const fail = (err: unknown) => setState({ step: "done", text: errorText(err) });
  switch (state.step) {
    case "idle":
      return (
        <button
          type="button"
          className="link small"
          data-testid="rewind"
          title="restore the files the agent changed since this message"
          onClick={() => {
            setState({ step: "asking" });
            rewind(seq, true)
              .then((preview) =>
                preview.filesChanged.length === 0
                  ? setState({ step: "done", text: "no file edits to undo" })
                  : setState({ step: "confirm", preview }),
              )
              .catch(fail);
          }}
        >
          undo file edits from here
        </button>
      );
    case "asking":
      return <span className="muted small">checking…</span>;
    case "confirm": {
      const p = state.preview;
      return (
        <div className="rewind-confirm small" data-testid="rewind-confirm">
          restore {p.filesChanged.length === 1 ? "1 file" : `${p.filesChanged.length} files`} (+{String(p.insertions)} −
          {String(p.deletions)}): <span className="mono">{p.filesChanged.join(", ")}</span>{" "}
          <button
            type="button"
            data-testid="rewind-go"
            onClick={() => {
              setState({ step: "asking" });
              rewind(seq, false)
                .then((r) => setState({ step: "done", text: `restored ${r.filesChanged.length} file(s)` }))
                .catch(fail);
            }}
          >
            restore
          </button>{" "}
          <button type="button" onClick={() => setState({ step: "idle" })}>
            cancel
          </button>
        </div>
      );
    }
    case "done":
      return (
        <span className="muted small" data-testid="rewind-result">
          {state.text}
        </span>
      );
  }
}
