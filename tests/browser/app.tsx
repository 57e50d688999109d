// The browser proof page: useSession over grpc-web against the real server.
// One <li> per event (data-seq, data-kind), the derived status, Send and Stop,
// and under the events the answer being typed (live typing: the main
// thread's partial text blocks, until their content event lands).
// Query: ?server=http://127.0.0.1:PORT&session=ID
// Fragment: #token=TOKEN for a server started with --auth-token-file (a
// fragment is never sent in a request, so the token stays out of the page
// server's logs and Referer headers). With a token the page makes its own
// grpc-web transport whose interceptor adds `authorization: Bearer TOKEN` to
// every call; without one useSession makes the transport from the URL.

import { StrictMode, useState } from "react";
import { createRoot } from "react-dom/client";
import { Code, ConnectError, type Interceptor } from "@connectrpc/connect";
import { createGrpcWebTransport } from "@connectrpc/connect-web";
import { useSession } from "@agent-harness/client/react";
import { partialMainText, type Event } from "@agent-harness/client/protocol";

const params = new URLSearchParams(location.search);
const server = params.get("server") ?? "http://127.0.0.1:50051";
const sessionId = params.get("session") ?? "browser-demo";
const token = new URLSearchParams(location.hash.slice(1)).get("token");

const bearer: Interceptor = (next) => (req) => {
  req.header.set("authorization", `Bearer ${token}`);
  return next(req);
};
// Module scope: one transport for the page's lifetime (useSession reconnects
// when it changes).
const where = token
  ? { transport: createGrpcWebTransport({ baseUrl: server, interceptors: [bearer] }) }
  : { baseUrl: server };

/** One line of text for an event. */
function summary(e: Event): string {
  const p = e.payload;
  switch (p.case) {
    case "content":
      return p.value.blocks
        .map((b) => (b.type === "text" ? b.text : b.type === "tool_use" ? `[${b.toolName}]` : `[${b.type}]`))
        .join(" ");
    case "inputSent":
      return p.value.text;
    case "turnEnd":
      return `${p.value.subtype}${p.value.isError ? " (error)" : ""} ${p.value.durationMs}ms $${p.value.costUsd.toFixed(4)}`;
    case "runReady":
      return `${p.value.model} cli ${p.value.cliVersion}`;
    case "runEnd":
      return `reason ${p.value.reason}${p.value.inferred ? " (inferred)" : ""}`;
    case "runStart":
      return `${p.value.adapter} (${p.value.trigger})`;
    case "stopRequested":
      return p.value.source;
    case "result":
      return p.value.text || p.value.toolResults.map((r) => r.text).join(" ");
    default:
      return "";
  }
}

function App() {
  const s = useSession(sessionId, where);
  const [input, setInput] = useState("");
  const [lastError, setLastError] = useState("");
  const act = (f: () => Promise<unknown>) => () => {
    setLastError("");
    f().catch((err: unknown) => setLastError(String(err)));
  };
  return (
    <main>
      <header>
        <h1>agent-harness · {sessionId}</h1>
        <dl>
          <dt>status</dt>
          <dd data-testid="status" className={`status ${s.status}`}>
            {s.status}
          </dd>
          <dt>activity</dt>
          <dd data-testid="activity">{s.activity.label}</dd>
          <dt>process</dt>
          <dd data-testid="process">{s.processAlive ? "alive" : "gone"}</dd>
          <dt>stream</dt>
          <dd data-testid="connected">{s.connected ? "connected" : "disconnected"}</dd>
          <dt>hydration</dt>
          <dd data-testid="hydration">{s.hydrationPhase}</dd>
          <dt>usage</dt>
          <dd data-testid="usage">
            {s.usage.turns} turns · {s.usage.outputTokens} out · context {s.usage.contextTokens}
          </dd>
        </dl>
      </header>
      <ol data-testid="events" className="events">
        {s.events.map((e) => (
          <li key={String(e.seq)} className="event" data-seq={String(e.seq)} data-kind={e.payload.case}>
            <span className="seq">#{String(e.seq)}</span> <span className="kind">{e.payload.case}</span>{" "}
            <span className="text">{summary(e)}</span>
          </li>
        ))}
      </ol>
      <p data-testid="partial" className="partial">
        {partialMainText(s.partial)}
      </p>
      <form
        onSubmit={(ev) => {
          ev.preventDefault();
          const text = input;
          setInput("");
          // Send needs a started session: the first message starts it.
          act(() =>
            s.send(text).catch((err: unknown) => {
              if (ConnectError.from(err).code === Code.NotFound) return s.start({ prompt: text });
              throw err;
            }),
          )();
        }}
      >
        <input
          data-testid="input"
          value={input}
          placeholder="Message (try: SLOW 40 100)"
          onChange={(ev) => setInput(ev.target.value)}
        />
        <button data-testid="send" type="submit">
          Send
        </button>
        <button data-testid="stop" type="button" onClick={act(() => s.stop())} disabled={s.status === "idle"}>
          Stop
        </button>
      </form>
      <p data-testid="error" className="error">
        {lastError || (s.error ? String(s.error) : "")}
      </p>
    </main>
  );
}

createRoot(document.getElementById("root")!).render(
  <StrictMode>
    <App />
  </StrictMode>,
);
