// Session titles in the built-in web console, in real Chromium against the
// real server (real claude CLI, scripted Messages API): a session started
// from the list is named by the first line of its first prompt in the header
// and in its list row; clicking the title renames it (Enter saves through
// SetTitle, Esc cancels without stopping anything); the name survives a
// reload and is what GetSession says. Writes tests/artifacts/console-title.png.

import assert from "node:assert/strict";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { after, before, it } from "node:test";
import type { Page } from "playwright-core";
import { ROOT, startHarness, type Harness } from "../ts/support.ts";
import { launchChromium, nodeClient, untilPage } from "./chromium.ts";

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

const text = (sel: string) => `(document.querySelector(${JSON.stringify(sel)})?.textContent ?? "")`;

/** Waits until the header's title reads `want`. */
const untilTitle = (p: Page, want: string) =>
  untilPage(p, `the title ${JSON.stringify(want)}`, `${text("[data-testid=session-title]")} === ${JSON.stringify(want)}`, 30_000);

it("names a session by its first prompt, renames it from the header, and keeps the name across a reload and in the list", async () => {
  const session = "console-title";
  const p = await browser.ctx.newPage();
  const errors: string[] = [];
  p.on("pageerror", (e) => errors.push(String(e)));
  p.on("console", (m) => {
    if (m.type() === "error") errors.push(m.text());
  });
  await p.goto(`${h.url}/`);
  await p.waitForSelector("[data-testid=start-form]");
  await p.fill("[data-testid=start-id]", session);
  await p.fill("[data-testid=start-prompt]", "TEXT Plan the   release\nwith every detail");
  await p.click("[data-testid=start]");
  await untilPage(p, "the session page", `location.hash === "#/s/${session}"`, 15_000);

  // Derived: the first line, whitespace collapsed; the id beside it.
  await untilTitle(p, "TEXT Plan the release");
  assert.equal(await p.evaluate(text("[data-testid=session-id]")), session);
  await untilPage(p, "the turn's end", `${text("[data-testid=status]")} === "idle"`, 60_000);

  // Esc cancels: nothing recorded, the turn state untouched.
  const before = (await nodeClient({ url: h.url }).getSession({ sessionId: session })).session!;
  await p.click("[data-testid=session-title]");
  await p.fill("[data-testid=title-input]", "not this");
  await p.press("[data-testid=title-input]", "Escape");
  await untilTitle(p, "TEXT Plan the release");
  const unchanged = (await nodeClient({ url: h.url }).getSession({ sessionId: session })).session!;
  assert.equal(unchanged.headSeq, before.headSeq, "Esc recorded nothing");

  // Enter saves through SetTitle; the server trims it.
  await p.click("[data-testid=session-title]");
  await p.fill("[data-testid=title-input]", "  Release plan  ");
  await p.press("[data-testid=title-input]", "Enter");
  await untilTitle(p, "Release plan");
  const named = (await nodeClient({ url: h.url }).getSession({ sessionId: session })).session!;
  assert.equal(named.title, "Release plan");
  assert.equal(named.headSeq, before.headSeq + 1n, "one titleSet");
  assert.equal(await p.evaluate(text("[data-testid=status]")), "idle", "a rename changes no status");
  await p.screenshot({ path: join(ARTIFACTS, "console-title.png") });

  // Kept across a reload, and in the list row.
  await p.reload();
  await untilTitle(p, "Release plan");
  await p.evaluate(`location.hash = "#/"`);
  const rowTitle = `[data-testid=session-row][data-session="${session}"] [data-testid=row-title]`;
  await untilPage(p, "the list row's title", `${text(rowTitle)} === "Release plan"`, 15_000);
  assert.deepEqual(errors, [], "no console errors");
  await p.close();
});
