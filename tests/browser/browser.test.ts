// Browser proof: the React page (useSession over grpc-web, HTTP/1.1, CORS)
// in real Chromium against the real server running the real claude CLI
// against the fake Messages API. Sends a slow turn, reloads mid-turn, stops
// a turn, and checks the DOM against the server's History every time.
// Live typing: the answer being written grows on the page before its
// content event, and a reload mid-message shows the text so far at once.
// Then the same page from a non-loopback origin against a server started with
// a token and --allowed-origin: the allowed origin streams a turn with the
// token, another origin reaches nothing.

import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, statSync } from "node:fs";
import { request as httpRequest } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import type { BrowserContext, Page, Request } from "playwright-core";
import { Code, ConnectError } from "@connectrpc/connect";
import { deriveProcessAlive, deriveStatus } from "@agent-harness/client/protocol";
import { ROOT, SERVER_BIN, startHarness, type Harness } from "../ts/support.ts";
import {
  history as historyOf,
  launchChromium,
  nodeClient,
  ticks,
  typingRecorder,
  untilTyped,
  untilView,
  type Target,
  type Typed,
} from "./chromium.ts";
import { serveStatic } from "./serve.ts";

const SESSION = "browser-proof";
// Names for the page's non-loopback origins; Chromium resolves both to the
// static server on 127.0.0.1 (--host-resolver-rules), the page still calls
// the server at http://127.0.0.1:PORT.
const APP_HOST = "app.test";
const EVIL_HOST = "evil.test";

let h: Harness;
let page: { url: string; close: () => Promise<void> };
let browser: Awaited<ReturnType<typeof launchChromium>>;
let ctx: BrowserContext;

before(async () => {
  h = await startHarness();
  page = await serveStatic();
  browser = await launchChromium({ hostRules: `MAP ${APP_HOST} 127.0.0.1, MAP ${EVIL_HOST} 127.0.0.1` });
  ctx = browser.ctx;
});

after(async () => {
  await browser?.close();
  await page?.close();
  await h?.close();
});

/** What the page shows, read in one go so status and events agree. */
interface View {
  status: string;
  process: string;
  connected: string;
  hydration: string;
  error: string;
  seqs: number[];
  kinds: string[];
}

// A string, not a function: tsx would wrap a function in helpers that do
// not exist in the page.
const READ_VIEW = `(() => {
  const text = (id) => document.querySelector("[data-testid=" + id + "]")?.textContent ?? "";
  const items = [...document.querySelectorAll("li.event")];
  return {
    status: text("status"),
    process: text("process"),
    connected: text("connected"),
    hydration: text("hydration"),
    error: text("error"),
    seqs: items.map((li) => Number(li.dataset.seq)),
    kinds: items.map((li) => li.dataset.kind ?? ""),
  };
})()`;

async function view(p: Page): Promise<View> {
  return (await p.evaluate(READ_VIEW)) as View;
}

const until = (p: Page, what: string, pred: (v: View) => boolean, timeoutMs?: number) =>
  untilView<View>(p, READ_VIEW, what, pred, timeoutMs);

/** The first scenario's server and session. */
const proof = (): Target => ({ url: h.url, session: SESSION });

const history = (t: Target = proof()) => historyOf(t);

/**
 * The page holds exactly the server's log up to its newest event, with no
 * duplicate, and shows the status and process state derived from it.
 */
async function assertMatchesServer(v: View, t: Target = proof()) {
  for (let i = 1; i < v.seqs.length; i++) assert.ok(v.seqs[i]! > v.seqs[i - 1]!, `seqs increase: ${v.seqs.join(",")}`);
  const last = v.seqs[v.seqs.length - 1] ?? 0;
  const log = (await history(t)).filter((e) => Number(e.seq) <= last);
  assert.deepEqual(v.seqs, log.map((e) => Number(e.seq)), "the page's events are the server's History");
  assert.deepEqual(v.kinds, log.map((e) => e.payload.case ?? ""));
  assert.equal(v.status, deriveStatus(log), "status derived from the same events");
  assert.equal(v.process, deriveProcessAlive(log) ? "alive" : "gone");
}

it("streams, survives a reload mid-turn, and stops a turn in Chromium", async () => {
  const p = await ctx.newPage();
  const consoleErrors: string[] = [];
  p.on("console", (m) => {
    if (m.type() === "error") consoleErrors.push(m.text());
  });
  const url = `${page.url}/?server=${encodeURIComponent(h.url)}&session=${SESSION}`;
  const t0 = Date.now();
  await p.goto(url);
  await until(p, "connected and ready", (v) => v.connected === "connected" && v.hydration === "ready");
  const tReady = Date.now() - t0;

  // A slow turn: 60 chunks 100 ms apart.
  await p.fill("[data-testid=input]", "SLOW 60 100");
  const tSend = Date.now();
  await p.click("[data-testid=send]");
  const streaming = await until(p, "streaming", (v) => v.status === "streaming");
  const tStreaming = Date.now() - tSend;
  assert.ok(streaming.kinds.includes("runStart") && streaming.kinds.includes("inputSent"));
  const grown = await until(p, "run_ready arrives", (v) => v.kinds.includes("runReady"));
  assert.ok(grown.seqs.length > 2, "events arrived one by one");

  // Reload mid-turn: the replay shows the same events, no duplicates, still streaming.
  const beforeReload = await view(p);
  assert.equal(beforeReload.status, "streaming", "reloading mid-turn");
  const tReload = Date.now();
  await p.reload();
  const reloaded = await until(p, "re-hydrated", (v) => v.hydration === "ready" && v.connected === "connected");
  const tRehydrate = Date.now() - tReload;
  assert.deepEqual(reloaded.seqs.slice(0, beforeReload.seqs.length), beforeReload.seqs, "same events after reload");
  assert.equal(reloaded.status, "streaming", "still mid-turn after the reload");
  await assertMatchesServer(reloaded);

  // The turn finishes on its own: idle, process alive.
  const finished = await until(p, "turn end", (v) => v.kinds.includes("turnEnd") && v.status === "idle", 30_000);
  assert.equal(finished.process, "alive");
  await assertMatchesServer(finished);

  // A second slow turn, stopped mid-way: stopping/idle, process still alive.
  await p.fill("[data-testid=input]", "SLOW 100 100");
  await p.click("[data-testid=send]");
  await until(p, "second turn streaming", (v) => v.status === "streaming" && v.seqs.length > finished.seqs.length);
  const tStop = Date.now();
  await p.click("[data-testid=stop]");
  const stopped = await until(p, "idle after stop", (v) => v.status === "idle" && v.kinds.includes("stopRequested"), 20_000);
  const tIdle = Date.now() - tStop;
  assert.equal(stopped.process, "alive", "the interrupt keeps the interactive CLI alive");
  await assertMatchesServer(stopped);

  mkdirSync(join(ROOT, "tests/artifacts"), { recursive: true });
  await p.screenshot({ path: join(ROOT, "tests/artifacts/browser.png"), fullPage: true });
  assert.deepEqual(consoleErrors, [], "no console errors");
  console.log(
    `figures: first load to ready ${tReady} ms; send to streaming ${tStreaming} ms; ` +
      `reload to ready ${tRehydrate} ms (${reloaded.seqs.length} events); stop to idle ${tIdle} ms; ` +
      `${stopped.seqs.length} events in the log`,
  );
});

const TYPING_RECORDER = typingRecorder("li.event[data-kind=content]");

/** The non-empty partial texts shown before the content event, in order. */
const partialsBeforeContent = (states: Typed[]) =>
  states.filter((s) => s.content === null && s.partial !== "").map((s) => s.partial);

/** Each text extends the one before it. */
function assertGrows(texts: string[]) {
  for (let i = 1; i < texts.length; i++) {
    assert.ok(
      texts[i]!.length > texts[i - 1]!.length && texts[i]!.startsWith(texts[i - 1]!),
      `partial text grows: ${JSON.stringify(texts[i - 1])} then ${JSON.stringify(texts[i])}`,
    );
  }
}

/**
 * The last partial text shown is a prefix of the answer: all of it unless
 * the last delta and the content event reached the page together, and
 * React rendered them in one update (the content then supersedes the
 * partial text before it is painted). The stream's own fragments join to
 * the whole answer; tests/ts/session.test.ts checks that exactly.
 */
function assertPrefixOfAnswer(partials: string[], expected: string) {
  const last = partials[partials.length - 1]!;
  assert.ok(expected.startsWith(last), `a prefix of the answer: ${JSON.stringify(last)}`);
  if (last !== expected) console.log(`note: rendered together with the content event, ${JSON.stringify(expected.slice(last.length))} was never painted as partial text`);
}

/** The content event's state: partial text gone (superseded), the final text, equal to the server's. */
async function assertContentSupersedes(states: Typed[], expected: string, t: Target) {
  const withContent = states.filter((s) => s.content !== null);
  assert.ok(withContent.length > 0, "the content event showed up");
  for (const s of withContent) {
    assert.equal(s.content, expected, "the content event's text");
    assert.equal(s.partial, "", "the content event supersedes the partial text");
  }
  const logged = (await history(t)).filter((e) => e.payload.case === "content");
  assert.equal(logged.length, 1);
  const c = logged[0]!.payload;
  assert.ok(c.case === "content");
  assert.equal(c.value.blocks.map((b) => b.text).join(""), expected, "the server's content event");
}

/** A page on `t`'s session that records every typed state, connected and hydrated. */
async function openTypingPage(t: Target) {
  const p = await ctx.newPage();
  const consoleErrors: string[] = [];
  p.on("console", (m) => {
    if (m.type() === "error") consoleErrors.push(m.text());
  });
  await p.addInitScript(TYPING_RECORDER);
  await p.goto(`${page.url}/?server=${encodeURIComponent(h.url)}&session=${t.session}`);
  await until(p, "connected and ready", (v) => v.connected === "connected" && v.hydration === "ready");
  return { p, consoleErrors };
}

describe("live typing", () => {
  it("shows the answer growing before its content event, which supersedes it", async () => {
    const t: Target = { url: h.url, session: "browser-typing" };
    const { p, consoleErrors } = await openTypingPage(t);

    const n = 30;
    await p.fill("[data-testid=input]", `SLOW ${n} 100`);
    await p.click("[data-testid=send]");
    // Mid-message: a screenshot of the page typing.
    await untilTyped(p, "a few ticks typed", `typed.some((s) => s.content === null && s.partial.includes("tick 5 "))`);
    mkdirSync(join(ROOT, "tests/artifacts"), { recursive: true });
    await p.screenshot({ path: join(ROOT, "tests/artifacts/browser-typing.png"), fullPage: true });
    const states = await untilTyped(p, "the content event", `typed.some((s) => s.content !== null)`);

    const partials = partialsBeforeContent(states);
    assert.ok(new Set(partials.map((x) => x.length)).size >= 3, `3+ lengths before the content: ${JSON.stringify(partials)}`);
    assertGrows(partials);
    const expected = ticks(n);
    assertPrefixOfAnswer(partials, expected);
    await assertContentSupersedes(states, expected, t);

    const finished = await until(p, "turn end", (v) => v.kinds.includes("turnEnd") && v.status === "idle");
    await assertMatchesServer(finished, t);
    assert.equal(await p.textContent("[data-testid=partial]"), "");
    assert.deepEqual(consoleErrors, [], "no console errors");
    console.log(`typing: ${partials.length} partial states shown before the content event`);
    await p.close();
  });

  it("after a reload mid-message shows the text so far at once, then grows to the end", async () => {
    const t: Target = { url: h.url, session: "browser-typing-reload" };
    const { p, consoleErrors } = await openTypingPage(t);

    const n = 60;
    const expected = ticks(n);
    await p.fill("[data-testid=input]", `SLOW ${n} 100`);
    await p.click("[data-testid=send]");
    const before = await untilTyped(
      p,
      "some ticks typed",
      `typed.some((s) => s.content === null && s.partial.includes("tick 4 "))`,
    );
    assert.ok(before.every((s) => s.content === null), "mid-message");
    // The longest text shown before the reload (more may come until it happens).
    const shown = partialsBeforeContent(before).at(-1)!;
    assert.ok(expected.startsWith(shown));

    await p.reload();
    const after = await untilTyped(p, "partial text after the reload", `typed.some((s) => s.partial !== "")`);
    const first = after.find((s) => s.partial !== "")!;
    assert.equal(first.content, null, "shown before the turn ends");
    assert.ok(
      first.partial.length >= shown.length,
      `at once, at least what was shown before the reload (${shown.length} chars): ${JSON.stringify(first.partial)}`,
    );
    assert.ok(first.partial.length < expected.length, "mid-message");
    assert.ok(expected.startsWith(first.partial), `a prefix of the answer: ${JSON.stringify(first.partial)}`);
    assert.ok(
      after.every((s) => s.partial === "" || expected.startsWith(s.partial)),
      "every text shown is a prefix of the answer",
    );

    const states = await untilTyped(p, "the content event", `typed.some((s) => s.content !== null)`);
    const partials = partialsBeforeContent(states);
    assert.equal(partials[0], first.partial);
    assert.ok(partials.length >= 2, `grew after the reload: ${JSON.stringify(partials)}`);
    assertGrows(partials);
    assertPrefixOfAnswer(partials, expected);
    await assertContentSupersedes(states, expected, t);

    const finished = await until(p, "turn end", (v) => v.kinds.includes("turnEnd") && v.status === "idle");
    await assertMatchesServer(finished, t);
    assert.deepEqual(consoleErrors, [], "no console errors");
    console.log(`typing after reload: first shown ${first.partial.length} chars (before it ${shown.length})`);
    await p.close();
  });
});

/** A raw HTTP/1.1 request to the server as a browser would send it. */
function rawRequest(
  url: string,
  method: "POST" | "OPTIONS",
  headers: Record<string, string>,
): Promise<{ status: number; headers: Record<string, string | string[] | undefined> }> {
  return new Promise((res, rej) => {
    const req = httpRequest(`${url}/agentharness.v1.SessionService/ListSessions`, { method, headers }, (r) => {
      r.resume();
      r.on("end", () => res({ status: r.statusCode ?? 0, headers: r.headers }));
    });
    req.on("error", rej);
    req.end(method === "POST" ? Buffer.alloc(5) : undefined); // one empty grpc-web frame
  });
}

/** Resolves once `pred()` holds, polling. */
async function waitFor(what: string, pred: () => boolean, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!pred()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe("a server with a token and a non-loopback --allowed-origin", () => {
  let h2: Harness;
  let token: string;
  let tokenDir: string;
  let port: number;
  let appOrigin: string;
  let evilOrigin: string;

  before(async () => {
    // The token as an operator makes it: `agent-harness token --out FILE`.
    tokenDir = mkdtempSync(join(tmpdir(), "agent-harness-token-"));
    const file = join(tokenDir, "harness.token");
    const usage = execFileSync(SERVER_BIN(), ["token", "--out", file], { encoding: "utf8" });
    assert.ok(usage.includes(`--auth-token-file ${file}`), usage);
    assert.equal(statSync(file).mode & 0o777, 0o600, "token file mode");
    token = readFileSync(file, "utf8").trim();
    assert.match(token, /^[0-9a-f]{64}$/);
    port = Number(new URL(page.url).port);
    appOrigin = `http://${APP_HOST}:${port}`;
    evilOrigin = `http://${EVIL_HOST}:${port}`;
    h2 = await startHarness({ serverArgs: ["--auth-token-file", file, "--allowed-origin", appOrigin] });
  });

  after(async () => {
    await h2?.close();
    if (tokenDir) rmSync(tokenDir, { recursive: true, force: true });
  });

  const pageUrl = (origin: string, session: string, withToken: boolean) =>
    `${origin}/?server=${encodeURIComponent(h2.url)}&session=${session}` + (withToken ? `#token=${token}` : "");

  it("the allowed origin needs the token, and with it streams a turn", async () => {
    const t: Target = { url: h2.url, session: "browser-token", token };

    // Without the token: CORS lets the page read the answer, and it is UNAUTHENTICATED.
    const anon = await ctx.newPage();
    await anon.goto(pageUrl(appOrigin, t.session, false));
    const refused = await until(anon, "unauthenticated", (v) => /unauthenticated/i.test(v.error));
    assert.equal(refused.connected, "disconnected");
    assert.deepEqual(refused.seqs, []);
    await anon.close();

    // With the token (the page's interceptor adds it).
    const p = await ctx.newPage();
    const consoleErrors: string[] = [];
    p.on("console", (m) => {
      if (m.type() === "error") consoleErrors.push(m.text());
    });
    const calls: Request[] = [];
    p.on("request", (r) => {
      if (r.url().startsWith(h2.url) && r.method() === "POST") calls.push(r);
    });
    await p.goto(pageUrl(appOrigin, t.session, true));
    assert.equal(await p.evaluate("location.origin"), appOrigin);
    await until(p, "connected and ready", (v) => v.connected === "connected" && v.hydration === "ready");
    await p.fill("[data-testid=input]", "SLOW 20 50");
    await p.click("[data-testid=send]");
    const streaming = await until(p, "streaming", (v) => v.status === "streaming");
    assert.ok(!streaming.kinds.includes("turnEnd"), "the page saw the turn in progress");
    const finished = await until(p, "turn end", (v) => v.kinds.includes("turnEnd") && v.status === "idle", 30_000);
    assert.equal(finished.process, "alive");
    for (const k of ["runStart", "inputSent", "runReady", "content", "turnEnd"]) assert.ok(finished.kinds.includes(k), k);
    assert.ok(finished.seqs.length > streaming.seqs.length, "events arrived live");
    await assertMatchesServer(finished, t);

    // The calls really were cross-origin from app.test and carried the token.
    assert.ok(calls.length >= 3, `${calls.length} calls`);
    for (const c of calls) {
      const hdrs = await c.allHeaders();
      assert.equal(hdrs["origin"], appOrigin, c.url());
      assert.equal(hdrs["authorization"], `Bearer ${token}`, c.url());
    }
    assert.deepEqual(consoleErrors, [], "no console errors");
    await p.close();
  });

  it("another origin reaches nothing, even with the token", async () => {
    const t: Target = { url: h2.url, session: "browser-evil", token };
    const p = await ctx.newPage();
    const failed: string[] = [];
    p.on("requestfailed", (r) => {
      if (r.url().startsWith(h2.url)) failed.push(r.url());
    });
    const consoleErrors: string[] = [];
    p.on("console", (m) => {
      if (m.type() === "error") consoleErrors.push(m.text());
    });
    await p.goto(pageUrl(evilOrigin, t.session, true));
    assert.equal(await p.evaluate("location.origin"), evilOrigin);
    const v = await until(p, "a connection error", (v) => v.error !== "");
    assert.equal(v.connected, "disconnected");
    assert.deepEqual(v.seqs, []);

    // A message typed into the page (Send, then Start if the session were
    // missing) does not get through either.
    await p.fill("[data-testid=input]", "TEXT from evil");
    await p.click("[data-testid=send]");
    await waitFor("the page's Send to fail", () => failed.some((u) => u.endsWith("/Send")));
    const after = await view(p);
    assert.deepEqual(after.seqs, []);
    assert.notEqual(after.error, "");
    assert.ok(
      consoleErrors.some((e) => e.includes(evilOrigin) && /CORS/.test(e)),
      `Chromium blames CORS: ${consoleErrors.join(" | ")}`,
    );
    await p.close();

    // The server has no such session (asked with the token over native gRPC).
    const client = nodeClient(t);
    await assert.rejects(client.getSession({ sessionId: t.session }), (e) => ConnectError.from(e).code === Code.NotFound);
    const listed = await client.listSessions({});
    assert.ok(!listed.sessions.some((x) => x.sessionId === t.session), "not listed");

    // The refusal is the server's: no CORS allow headers on a preflight from
    // that origin, and PERMISSION_DENIED (trailers-only) on a call from it,
    // token or not; the allowed origin gets its preflight answered.
    const preflight = (origin: string) =>
      rawRequest(h2.url, "OPTIONS", {
        origin,
        "access-control-request-method": "POST",
        "access-control-request-headers": "authorization,content-type,x-grpc-web",
      });
    const evilPre = await preflight(evilOrigin);
    assert.equal(evilPre.headers["access-control-allow-origin"], undefined, "no CORS for the evil origin");
    const appPre = await preflight(appOrigin);
    assert.equal(appPre.headers["access-control-allow-origin"], appOrigin);
    assert.match(String(appPre.headers["access-control-allow-headers"]), /authorization/i);
    const call = await rawRequest(h2.url, "POST", {
      origin: evilOrigin,
      authorization: `Bearer ${token}`,
      "content-type": "application/grpc-web+proto",
      "x-grpc-web": "1",
    });
    assert.equal(call.headers["grpc-status"], String(Code.PermissionDenied), JSON.stringify(call.headers));
    assert.equal(call.headers["access-control-allow-origin"], undefined);
  });
});
