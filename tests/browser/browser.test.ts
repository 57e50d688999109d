// Browser proof: the React page (useSession over grpc-web, HTTP/1.1, CORS)
// in real Chromium against the real server running the real claude CLI
// against the fake Messages API. Sends a slow turn, reloads mid-turn, stops
// a turn, and checks the DOM against the server's History every time.

import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, it } from "node:test";
import { chromium, type BrowserContext, type Page } from "playwright-core";
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { SessionService, deriveProcessAlive, deriveStatus, type Event } from "@agent-harness/client/protocol";
import { ROOT, startHarness, type Harness } from "../ts/support.ts";
import { serveStatic } from "./serve.ts";

const CHROMIUM = process.env.CHROMIUM_BIN ?? "/usr/bin/chromium";
const SESSION = "browser-proof";

let h: Harness;
let page: { url: string; close: () => Promise<void> };
let ctx: BrowserContext;
let profile: string;

before(async () => {
  h = await startHarness();
  page = await serveStatic();
  profile = mkdtempSync(join(tmpdir(), "agent-harness-chromium-"));
  ctx = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    viewport: { width: 1000, height: 760 },
    args: [
      "--headless",
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
    ],
  });
});

after(async () => {
  await ctx?.close();
  await page?.close();
  await h?.close();
  if (profile) rmSync(profile, { recursive: true, force: true });
});

/** What the page shows, read in one go so status and events agree. */
interface View {
  status: string;
  process: string;
  connected: string;
  hydration: string;
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
    seqs: items.map((li) => Number(li.dataset.seq)),
    kinds: items.map((li) => li.dataset.kind ?? ""),
  };
})()`;

async function view(p: Page): Promise<View> {
  return (await p.evaluate(READ_VIEW)) as View;
}

async function until(p: Page, what: string, pred: (v: View) => boolean, timeoutMs = 30_000): Promise<View> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await view(p);
    if (pred(v)) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}; page shows ${JSON.stringify(v)}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

async function history(): Promise<Event[]> {
  const client = createClient(SessionService, createGrpcTransport({ baseUrl: h.url }));
  const res = await client.history({ sessionId: SESSION, beforeSeq: 0n, limit: 1000 });
  assert.equal(res.hasMore, false);
  return res.events;
}

/**
 * The page holds exactly the server's log up to its newest event, with no
 * duplicate, and shows the status and process state derived from it.
 */
async function assertMatchesServer(v: View) {
  for (let i = 1; i < v.seqs.length; i++) assert.ok(v.seqs[i]! > v.seqs[i - 1]!, `seqs increase: ${v.seqs.join(",")}`);
  const last = v.seqs[v.seqs.length - 1] ?? 0;
  const log = (await history()).filter((e) => Number(e.seq) <= last);
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
