// The agent-harness web console, served by the server at `/` and calling it
// over grpc-web on the same origin. Two views, routed in the URL fragment so
// the server only ever serves `/`: the session list (#/) and one session
// (#/s/ID). Everything shown about a session comes from @agent-harness/client:
// useSession for one session's log and the state derived from it, the
// generated client for ListSessions.

import { StrictMode, useCallback, useEffect, useMemo, useState } from "react";
import { createRoot } from "react-dom/client";
import { isUnauthenticated, makeTransport, serviceClient, storeToken, storedToken, errorText } from "./api.ts";
import { SessionList } from "./list.tsx";
import { SessionView } from "./session.tsx";
import { Shortcuts } from "./shortcuts.tsx";

/** The route in the fragment: the list, or one session. */
function useRoute(): { session: string | undefined } {
  const read = () => {
    const m = /^#\/s\/(.+)$/.exec(location.hash);
    return m ? decodeURIComponent(m[1]!) : undefined;
  };
  const [session, setSession] = useState(read);
  useEffect(() => {
    const on = () => setSession(read());
    window.addEventListener("hashchange", on);
    return () => window.removeEventListener("hashchange", on);
  }, []);
  return { session };
}

/** Whether this tab may call the API: unknown until the first answer. */
type Gate = "probing" | "open" | "token";

function App() {
  const [token, setToken] = useState(storedToken);
  const transport = useMemo(() => makeTransport(token), [token]);
  const [gate, setGate] = useState<Gate>("probing");
  const { session } = useRoute();

  // One cheap call tells whether the server wants a token (and whether ours is right).
  useEffect(() => {
    let live = true;
    setGate("probing");
    serviceClient(transport)
      .listSessions({ pageSize: 1 })
      .then(
        () => live && setGate("open"),
        (err) => live && setGate(isUnauthenticated(err) ? "token" : "open"),
      );
    return () => {
      live = false;
    };
  }, [transport]);

  const onUnauthenticated = useCallback(() => setGate("token"), []);
  const useToken = (t: string | null) => {
    storeToken(t);
    setToken(t);
  };

  return (
    <div className="app">
      <header className="topbar">
        <a className="brand" href="#/">
          agent-harness
        </a>
        {session !== undefined && (
          <span className="crumb" data-testid="crumb">
            / {session}
          </span>
        )}
        <span className="spacer" />
        <Shortcuts />
        {token && (
          <button type="button" className="link" data-testid="forget-token" onClick={() => useToken(null)}>
            forget token
          </button>
        )}
      </header>
      {gate === "token" ? (
        <TokenForm hadToken={token !== null} onToken={useToken} />
      ) : gate === "probing" ? (
        <p className="muted pad">Connecting…</p>
      ) : session === undefined ? (
        <SessionList transport={transport} onUnauthenticated={onUnauthenticated} />
      ) : (
        <SessionView key={session} sessionId={session} transport={transport} onUnauthenticated={onUnauthenticated} />
      )}
    </div>
  );
}

/** Asks for the server's bearer token; it is kept for this tab only. */
function TokenForm({ hadToken, onToken }: { hadToken: boolean; onToken: (t: string) => void }) {
  const [value, setValue] = useState("");
  const [checking, setChecking] = useState(false);
  const [error, setError] = useState(hadToken ? "The token was not accepted." : "");
  return (
    <form
      className="card token"
      data-testid="token-form"
      onSubmit={(ev) => {
        ev.preventDefault();
        const t = value.trim();
        if (!t) return;
        setChecking(true);
        setError("");
        serviceClient(makeTransport(t))
          .listSessions({ pageSize: 1 })
          .then(
            () => onToken(t),
            (err) => {
              setChecking(false);
              setError(isUnauthenticated(err) ? "The token was not accepted." : errorText(err));
            },
          );
      }}
    >
      <h2>This server needs a token</h2>
      <p className="muted">
        Paste the bearer token from the server's <code>--auth-token-file</code>. It is kept in this tab only
        (sessionStorage) and sent with every call.
      </p>
      <input
        data-testid="token-input"
        type="password"
        autoComplete="off"
        autoFocus
        value={value}
        onChange={(ev) => setValue(ev.target.value)}
        placeholder="token"
      />
      <button data-testid="token-submit" type="submit" disabled={checking}>
        {checking ? "Checking…" : "Use token"}
      </button>
      {error && (
        <p className="error" data-testid="token-error">
          {error}
        </p>
      )}
    </form>
  );
}

createRoot(document.getElementById("root")!).render(
  <StrictMode>
    <App />
  </StrictMode>,
);
