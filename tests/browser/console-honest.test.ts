// The console is honest in every state, in real Chromium against the real
// server running the real claude CLI against the scripted Messages API:
// while the answer types the activity says "Writing"; with the server killed
// (SIGKILL) mid-answer the session view and the list say the status is
// unknown within seconds, showing the last known state greyed with its age,
// and never a live "streaming" or "alive" while the server is down; the
// server restarted on the same store, the page recovers on its own and shows
// the truth (the run ended, SERVER_RESTART; the process gone), and the text
// it saw being typed that the log never recorded stays, greyed, as "not
// recorded (server restarted)" until the next message replaces it. A tool
// call in flight: "Running Bash" while it runs, its state unknown (not
// "running") while the server is down, and "no result" once the restart
// ended its run. Writes tests/artifacts/console-disconnected.png.

import assert from "node:assert/strict";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { after, before, it } from "node:test";
import type { Page } from "playwright-core";
import { RunEndReason } from "@agent-harness/client/protocol";
import { ROOT, startHarness, type Harness } from "../ts/support.ts";
import { history, launchChromium, nodeClient, ticks, untilView, type Target } from "./chromium.ts";

const ARTIFACTS = join(ROOT, "tests/artifacts");

let h: Harness;
let browser: Awaited<ReturnType<typeof launchChromium>>;

before(async () => {
  h = await startHarness();
  browser = await launchChromium();
  mkdirSync(ARTIFACTS, { recursive: true });
});

after(async () => {
  await browser?.close();
  await h?.close();
});

/** What the session view shows of the session's state, read in one go. */
interface Honest {
  status: string;
  /** The greyed last known status with its age ("" while the status is known). */
  stale: string;
  activity: string;
  process: string;
  spinner: boolean;
  conn: string;
  partial: string;
  partialStale: boolean;
  unrecorded: string;
  note: string;
  kinds: string[];
  /** Each row's status cell on the list page. */
  rows: string[];
  rowsStale: string[];
  /** Each row's process cell on the list page. */
  rowProcs: string[];
  /** Each tool call's state (data-state) and the word shown for it. */
  tools: { state: string; shown: string }[];
}

// A function body (a string: tsx would wrap a function in helpers that do
// not exist in the page), shared by the reader and the recorder.
const READ = `const text = (sel) => document.querySelector(sel)?.textContent ?? "";
  return {
    status: text("[data-testid=status]"),
    stale: text("[data-testid=status-stale]"),
    activity: text("[data-testid=activity]"),
    process: text("[data-testid=process]").trim(),
    spinner: !!document.querySelector("[data-testid=spinner]"),
    conn: document.querySelector("[data-testid=conn]")?.dataset.state ?? "",
    partial: text("[data-testid=partial]"),
    partialStale: !!document.querySelector("[data-testid=partial].stale"),
    unrecorded: text("[data-testid=unrecorded] .text"),
    note: text("[data-testid=unrecorded-note]"),
    kinds: [...document.querySelectorAll("[data-testid=timeline] .ev[data-seq]")].map((e) => e.dataset.kind ?? ""),
    rows: [...document.querySelectorAll("[data-testid=row-status]")].map((e) => e.textContent),
    rowsStale: [...document.querySelectorAll("[data-testid=row-status-stale]")].map((e) => e.textContent),
    rowProcs: [...document.querySelectorAll("[data-testid=row-process]")].map((e) => e.textContent.trim()),
    tools: [...document.querySelectorAll("[data-testid=tool-call]")].map((t) => ({ state: t.dataset.state ?? "", shown: t.querySelector(".tool-state")?.textContent ?? "" })),
  };`;
const READ_VIEW = `(() => { ${READ} })()`;

/**
 * An init script: a MutationObserver that records every distinct state the
 * page renders (however brief), so a "streaming" shown for a moment while
 * the server is down cannot slip between two polls.
 */
const RECORDER = `(() => {
  const rec = (window.__states = []);
  const read = () => { ${READ} };
  let last = "";
  new MutationObserver(() => {
    const v = read();
    const key = JSON.stringify(v);
    if (key !== last) { last = key; rec.push(v); }
  }).observe(document, { subtree: true, childList: true, characterData: true, attributes: true });
})()`;

const until = (p: Page, what: string, pred: (v: Honest) => boolean, timeoutMs?: number) =>
  untilView<Honest>(p, READ_VIEW, what, pred, timeoutMs);

/** The states recorded since `from` (an index of `window.__states`). */
async function recorded(p: Page, from = 0): Promise<Honest[]> {
  return ((await p.evaluate("window.__states ?? []")) as Honest[]).slice(from);
}

/** A state that claims to know the session is at work: what must never show while the server is down. */
const claimsLive = (v: Honest) =>
  v.status === "streaming" ||
  v.process.includes("alive") ||
  v.spinner ||
  v.activity !== "" ||
  v.rows.some((r) => r !== "unknown") ||
  v.rowProcs.some((r) => r !== "unknown");

it("says Writing while the answer types, status unknown while the server is down, and the truth after its restart", async () => {
  const t: Target = { url: h.url, session: "console-honest" };
  const n = 400;
  await nodeClient(t).start({ sessionId: t.session, config: { prompt: `SLOW ${n} 100` } });

  const page = await browser.ctx.newPage();
  const errors: string[] = [];
  page.on("pageerror", (e) => errors.push(String(e)));
  await page.addInitScript(RECORDER);
  await page.goto(`${h.url}/#/s/${t.session}`);
  const list = await browser.ctx.newPage();
  await list.addInitScript(RECORDER);
  await list.goto(`${h.url}/#/`);

  // The answer types: "Writing" (not "Thinking"), the spinner turns.
  const typing = await until(page, "the answer typing", (v) => v.partial.length > 40 && v.activity === "Writing");
  assert.equal(typing.status, "streaming");
  assert.ok(typing.spinner, "the activity spinner turns while at work");
  await until(list, "the list shows it streaming", (v) => v.rows.includes("streaming"));

  // Kill the server mid-answer.
  const seenBeforeKill = (await until(page, "more typed", (v) => v.partial.length > typing.partial.length)).partial;
  const mark = (await recorded(page)).length;
  const listMark = (await recorded(list)).length;
  const killedAt = Date.now();
  await h.kill();

  const down = await until(page, "status unknown", (v) => v.status === "status unknown" && v.conn === "disconnected", 5_000);
  const noticedMs = Date.now() - killedAt;
  assert.match(down.stale, /^streaming \d+ s ago$/, "the last known status, greyed, with its age");
  assert.equal(down.process, "unknown");
  assert.equal(down.activity, "", "no activity claimed");
  assert.ok(!down.spinner, "the spinner stops");
  assert.ok(down.partialStale, "the text typed so far is kept, greyed");
  assert.ok(ticks(n).startsWith(down.partial) && down.partial.startsWith(seenBeforeKill), "as far as it got");
  await until(list, "the list's status unknown", (v) => v.rows.length > 0 && v.rows.every((r) => r === "unknown") && v.rowsStale.some((s) => /^streaming \d+ s ago$/.test(s)), 5_000);

  // Down for a while: the page keeps saying it cannot know, and the age grows.
  await until(page, "the age grows", (v) => /^streaming [3-9] s ago$/.test(v.stale), 10_000);
  await page.screenshot({ path: join(ARTIFACTS, "console-disconnected.png") });
  const whileDown = (await recorded(page, mark)).filter((_, i, all) => all.slice(0, i + 1).some((v) => v.status === "status unknown"));
  assert.deepEqual(whileDown.filter(claimsLive), [], "nothing live shown once the page noticed");
  const listDown = (await recorded(list, listMark)).filter((_, i, all) => all.slice(0, i + 1).some((v) => v.rows.every((r) => r === "unknown")));
  assert.deepEqual(listDown.filter(claimsLive), [], "the list never shows a stale status or process as live");
  const downMark = (await recorded(page)).length;

  // Restart on the same store: recovery ends the killed run, the page
  // reconnects on its own and shows it.
  await h.start();
  const back = await until(page, "recovered", (v) => v.conn === "connected" && v.status === "idle" && v.kinds.at(-1) === "runEnd");
  assert.equal(back.process, "gone");
  assert.equal(back.stale, "");
  assert.ok(!back.spinner);
  const log = await history(t);
  const end = log.at(-1)!.payload;
  assert.ok(end.case === "runEnd" && end.value.reason === RunEndReason.SERVER_RESTART, "the run ended: SERVER_RESTART");
  assert.ok(!log.some((e) => e.payload.case === "content"), "the answer was never recorded");
  // Between the kill and the recovery no state claimed the session at work.
  const afterKill = await recorded(page, downMark);
  assert.deepEqual(afterKill.filter((v) => v.status === "streaming" || v.process.includes("alive")), [], "never streaming or alive after the kill");

  // The text the reader saw typed stays, labelled as never recorded.
  assert.equal(back.partial, "", "no live typing left");
  assert.equal(back.note, "not recorded (server restarted)");
  assert.equal(back.unrecorded, down.partial, "exactly what the page had shown");
  await until(list, "the list live again", (v) => v.rows.includes("idle") && v.rowsStale.length === 0);

  // The next message replaces it.
  await page.fill("[data-testid=input]", "TEXT after the restart");
  await page.press("[data-testid=input]", "Enter");
  await until(page, "the unrecorded text gone with the next input", (v) => v.unrecorded === "" && v.kinds.includes("inputSent"));
  await until(page, "the answer", (v) => v.status === "idle" && v.kinds.at(-1) === "turnEnd", 60_000);
  console.log(`noticed the kill in ${noticedMs} ms`);
  assert.deepEqual(errors, [], "no page errors");
  await list.close();
  await page.close();
});

it("a tool call in flight: Running Bash, unknown while the server is down, no result once the restart ended its run", async () => {
  const t: Target = { url: h.url, session: "console-honest-tool" };
  await nodeClient(t).start({ sessionId: t.session, config: { prompt: "SLOWBASH 60" } });
  const page = await browser.ctx.newPage();
  await page.addInitScript(RECORDER);
  await page.goto(`${h.url}/#/s/${t.session}`);
  // The CLI may ask before running it: allow it if so.
  const running = await until(page, "the tool running", (v) => {
    if (v.tools.some((x) => x.state === "asking")) void page.click("[data-testid=allow]").catch(() => {});
    return v.tools.some((x) => x.state === "running");
  });
  assert.equal(running.activity, "Running Bash");
  assert.ok(running.spinner);

  const mark = (await recorded(page)).length;
  await h.kill();
  const down = await until(page, "status unknown", (v) => v.status === "status unknown", 5_000);
  assert.deepEqual(down.tools.map((x) => x.state), ["unknown"], "not claimed running");
  assert.equal(down.activity, "");
  const whileDown = (await recorded(page, mark)).filter((_, i, all) => all.slice(0, i + 1).some((v) => v.status === "status unknown"));
  assert.deepEqual(whileDown.filter((v) => claimsLive(v) || v.tools.some((x) => x.state === "running")), [], "nothing live shown once the page noticed");

  await h.start();
  const back = await until(page, "recovered", (v) => v.conn === "connected" && v.status === "idle" && v.kinds.at(-1) === "runEnd");
  assert.deepEqual(back.tools, [{ state: "ended", shown: "no result" }], "the run ended without the tool's result");
  assert.equal(back.process, "gone");
  await page.close();
});
