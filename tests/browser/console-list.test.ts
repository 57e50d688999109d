// The console's session list searched, filtered, sorted and grouped by the
// server (ListSessions' query, statuses, agent and order), in real
// Chromium against the real server running the real claude CLI against the
// scripted Messages API. Three sessions in two working directories are
// started over native gRPC; the page must show exactly what ListSessions
// answers for each choice. Writes tests/artifacts/console-list-filters.png
// and console-list-grouped.png.

import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, it } from "node:test";
import type { Page } from "playwright-core";
import { SessionOrder, SessionStatus } from "@agent-harness/client/protocol";
import { ROOT, startHarness, type Harness } from "../ts/support.ts";
import { launchChromium, nodeClient, untilPage } from "./chromium.ts";

const ARTIFACTS = join(ROOT, "tests/artifacts");

let h: Harness;
let browser: Awaited<ReturnType<typeof launchChromium>>;
let dirs: string[] = [];

before(async () => {
  h = await startHarness();
  browser = await launchChromium();
  mkdirSync(ARTIFACTS, { recursive: true });
  // Two projects; sorted, so the grouped order is known.
  dirs = [mkdtempSync(join(tmpdir(), "list-proj-")), mkdtempSync(join(tmpdir(), "list-proj-"))].sort();
});

after(async () => {
  await browser?.close();
  await h?.close();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

/** The rows shown: id, title shown and cwd, in page order; the headings; the total line. */
const READ_LIST = `(() => ({
  rows: [...document.querySelectorAll("[data-testid=session-row]")].map((r) => ({
    id: r.dataset.session,
    shown: r.querySelector("td.id a")?.textContent?.trim() ?? "",
    cwd: r.dataset.cwd,
  })),
  headings: [...document.querySelectorAll("[data-testid=group-heading]")].map((g) => g.dataset.cwd),
  total: document.querySelector("[data-testid=total]")?.textContent ?? "",
  empty: !!document.querySelector("[data-testid=empty]"),
}))()`;

interface List {
  rows: { id: string; shown: string; cwd: string }[];
  headings: string[];
  total: string;
  empty: boolean;
}

async function untilList(p: Page, what: string, pred: (l: List) => boolean): Promise<List> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const l = (await p.evaluate(READ_LIST)) as List;
    if (pred(l)) return l;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}: ${JSON.stringify(l)}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

const ids = (l: List) => l.rows.map((r) => r.id);

it("searches, filters, sorts and groups the list on the server", async () => {
  const c = nodeClient({ url: h.url });
  const [one, two] = dirs as [string, string];
  const started = [
    { id: "list-a", cwd: one, prompt: "TEXT fix the parser" },
    { id: "list-b", cwd: two, prompt: "TEXT write the release notes" },
    { id: "list-c", cwd: one, prompt: "TEXT fix the flaky test" },
  ];
  for (const s of started) {
    await c.start({ sessionId: s.id, config: { prompt: s.prompt, cwd: s.cwd } });
  }
  // Each turn ends (idle), so the status filter has something to tell apart.
  const deadline = Date.now() + 60_000;
  for (;;) {
    const idle = await c.listSessions({ statuses: [SessionStatus.IDLE] });
    if (Number(idle.totalSize) === 3) break;
    if (Date.now() > deadline) throw new Error("the three turns did not end");
    await new Promise((r) => setTimeout(r, 100));
  }

  const p = await browser.ctx.newPage();
  const errors: string[] = [];
  p.on("pageerror", (e) => errors.push(String(e)));
  p.on("console", (m) => m.type() === "error" && errors.push(m.text()));
  await p.goto(`${h.url}/`);
  // Recent activity first by default: the last one started leads.
  let l = await untilList(p, "three sessions", (l) => l.rows.length === 3);
  assert.equal(l.total, "3 sessions");
  const recent = (await c.listSessions({ order: SessionOrder.RECENT_ACTIVITY })).sessions.map((s) => s.sessionId);
  assert.deepEqual(ids(l), recent, "in the server's recent-activity order");
  // A row shows its title (from the first prompt).
  assert.equal(l.rows.find((r) => r.id === "list-a")?.shown, "TEXT fix the parser");

  // Search (debounced): title, then cwd, case-insensitive.
  await p.fill("[data-testid=search]", "FIX");
  l = await untilList(p, "the two fixes", (l) => l.rows.length === 2 && l.total.includes("2 sessions"));
  assert.deepEqual(ids(l).sort(), ["list-a", "list-c"]);
  await p.fill("[data-testid=search]", two.slice(-8));
  l = await untilList(p, "the session in the second project", (l) => l.rows.length === 1);
  assert.deepEqual(ids(l), ["list-b"]);
  await p.screenshot({ path: join(ARTIFACTS, "console-list-filters.png") });
  await p.fill("[data-testid=search]", "");
  await untilList(p, "all three again", (l) => l.rows.length === 3);

  // Status and agent filters.
  await p.selectOption("[data-testid=filter-status]", String(SessionStatus.STREAMING));
  l = await untilList(p, "none streaming", (l) => l.empty);
  assert.match(l.total, /^0 sessions/);
  await p.selectOption("[data-testid=filter-status]", String(SessionStatus.IDLE));
  await untilList(p, "three idle", (l) => l.rows.length === 3);
  await p.selectOption("[data-testid=filter-agent]", "claude");
  await untilList(p, "three of claude", (l) => l.rows.length === 3 && l.total.includes("3 sessions"));
  await p.selectOption("[data-testid=filter-agent]", "");
  await p.selectOption("[data-testid=filter-status]", String(SessionStatus.UNSPECIFIED));

  // Sort by id.
  await p.selectOption("[data-testid=sort]", "id");
  await untilList(p, "by id", (l) => ids(l).join() === "list-a,list-b,list-c");

  // Group by project: a heading per cwd, its sessions under it.
  await p.check("[data-testid=group]");
  l = await untilList(p, "grouped", (l) => l.headings.length === 2);
  assert.deepEqual(l.headings, [one, two]);
  assert.deepEqual(
    l.rows.map((r) => r.cwd),
    [one, one, two],
  );
  await untilPage(p, "headings before their rows", `document.querySelectorAll("tr.group + tr[data-testid=session-row]").length === 2`);
  await p.screenshot({ path: join(ARTIFACTS, "console-list-grouped.png") });
  assert.deepEqual(errors, [], "no console errors");
  await p.close();
});
