// The session's name in its header: the title (the latest SetTitle, else the
// first line of the first prompt), or the session id before there is one.
// Clicking it renames: Enter saves through SetTitle (an empty title goes
// back to the derived one), Esc cancels without stopping the turn.

import { useState } from "react";

export function SessionTitle(props: { sessionId: string; title: string; onRename: (title: string) => Promise<unknown> }) {
  const { sessionId, title, onRename } = props;
  const [draft, setDraft] = useState<string | undefined>(undefined);
  const [saving, setSaving] = useState(false);
  const [error, setError] = useState("");
  if (draft === undefined) {
    return (
      <>
        <h1
          className={title ? "title" : "title sid"}
          data-testid="session-title"
          title="click to rename"
          tabIndex={0}
          onClick={() => setDraft(title)}
          onKeyDown={(ev) => {
            if (ev.key === "Enter") setDraft(title);
          }}
        >
          {title || sessionId}
        </h1>
        {title && (
          <span className="sid muted small" data-testid="session-id">
            {sessionId}
          </span>
        )}
        {error && (
          <span className="error small" data-testid="title-error">
            {error}
          </span>
        )}
      </>
    );
  }
  const save = () => {
    setSaving(true);
    setError("");
    onRename(draft).then(
      () => {
        setSaving(false);
        setDraft(undefined);
      },
      (err: unknown) => {
        setSaving(false);
        setDraft(undefined);
        setError(String(err instanceof Error ? err.message : err));
      },
    );
  };
  return (
    <input
      className="title-input"
      data-testid="title-input"
      aria-label="session title"
      autoFocus
      maxLength={200}
      disabled={saving}
      placeholder="title (empty: from the first message)"
      value={draft}
      onChange={(ev) => setDraft(ev.target.value)}
      onBlur={() => !saving && setDraft(undefined)}
      onKeyDown={(ev) => {
        if (ev.key === "Enter") {
          ev.preventDefault();
          save();
        } else if (ev.key === "Escape") {
          // Esc here cancels the rename; it must not reach the page's stop-the-turn key.
          ev.preventDefault();
          ev.stopPropagation();
          ev.nativeEvent.stopImmediatePropagation();
          setDraft(undefined);
        }
      }}
    />
  );
}
