// The built-in web console (server/web, served by the server at `/`) in
// real Chromium, against the real server running the real claude CLI
// against the scripted Messages API. The page is loaded from the server's
// own port (no other server is involved) and every check compares what it
// shows with what the server says over native gRPC: the log (History), the
// derived status and the session list.
//
// Start a session from the list and watch its answer grow; answer a
// permission prompt with an edited input and see the tool's output; deny
// one with a reason; background tasks and a scheduled prompt in the side
// panel; stop turns (Esc and the Stop button); send an image; a subagent
// nested under its call; a background task stopped from the panel; reload mid-turn; a second tab agrees; the
// connection indicator through a server kill and restart; the CSP enforced;
// page back through history on scroll-up; a server with a token asks for it
// once per tab; change the model and permission mode from the settings
// panel and undo file edits from a message; a Codex command's output live
// under its call until its result; the agent choice from ListAgents and a
// Codex and a Gemini (ACP) session started from it. Writes
// tests/artifacts/console-list.png, console-session.png,
// console-permission.png, console-control.png and console-phone.png.

import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import type { BrowserContext, Page } from "playwright-core";
import { Code, ConnectError } from "@connectrpc/connect";
import { SessionStatus, deriveProcessAlive, deriveStatus, deriveUsage, type Event } from "@agent-harness/client/protocol";
import { ROOT, SERVER_BIN, startHarness, type Harness } from "../ts/support.ts";
import {
  history,
  launchChromium,
  nodeClient,
  ticks,
  typingRecorder,
  untilPage,
  untilTyped,
  untilView,
  type Target,
} from "./chromium.ts";

const ARTIFACTS = join(ROOT, "tests/artifacts");

let h: Harness;
let browser: Awaited<ReturnType<typeof launchChromium>>;
let ctx: BrowserContext;

before(async () => {
  h = await startHarness();
  browser = await launchChromium();
  ctx = browser.ctx;
  mkdirSync(ARTIFACTS, { recursive: true });
});

after(async () => {
  await browser?.close();
  await h?.close();
});

/** What the session view shows, read in one go so its parts agree. */
interface View {
  status: string;
  activity: string;
  process: string;
  connected: string;
  hydration: string;
  conn: string;
  error: string;
  partial: string;
  /** The timeline's events (data-seq, data-kind), in page order. */
  seqs: number[];
  kinds: string[];
  /** The seqs shown inside a subagent (under its Agent call). */
  nested: number[];
  first: number;
  head: number;
  hasOlder: boolean;
  permissions: string[];
  tools: { tool: string; state: string; result: string | null }[];
  cost: string;
  scrollTop: number;
  /** The timeline is taller than its box (it can scroll). */
  overflows: boolean;
}

// Strings, not functions: tsx would wrap a function in helpers that do not
// exist in the page.
const READ_VIEW = `(() => {
  const text = (sel) => document.querySelector(sel)?.textContent ?? "";
  const tl = document.querySelector("[data-testid=timeline]");
  const evs = tl ? [...tl.querySelectorAll(".ev[data-seq]")] : [];
  return {
    status: text("[data-testid=status]"),
    activity: text("[data-testid=activity]"),
    process: text("[data-testid=process]").trim(),
    connected: text("[data-testid=connected]"),
    hydration: text("[data-testid=hydration]"),
    conn: document.querySelector("[data-testid=conn]")?.dataset.state ?? "",
    error: text("[data-testid=error]"),
    partial: text("[data-testid=partial]"),
    seqs: evs.map((e) => Number(e.dataset.seq)),
    kinds: evs.map((e) => e.dataset.kind ?? ""),
    nested: evs.filter((e) => e.closest("[data-testid=subagent]")).map((e) => Number(e.dataset.seq)),
    first: Number(tl?.dataset.firstSeq ?? 0),
    head: Number(tl?.dataset.headSeq ?? 0),
    hasOlder: !!document.querySelector("[data-testid=older]"),
    permissions: [...document.querySelectorAll("[data-testid=permission]")].map((p) => p.dataset.tool ?? ""),
    tools: [...document.querySelectorAll("[data-testid=tool-call]")].map((t) => ({
      tool: t.dataset.tool ?? "",
      state: t.dataset.state ?? "",
      result: t.querySelector("[data-testid=tool-result]")?.textContent ?? null,
    })),
    cost: text("[data-testid=cost]"),
    scrollTop: tl ? tl.scrollTop : 0,
    overflows: tl ? tl.scrollHeight > tl.clientHeight : false,
  };
})()`;

async function view(p: Page): Promise<View> {
  return (await p.evaluate(READ_VIEW)) as View;
}

const until = (p: Page, what: string, pred: (v: View) => boolean, timeoutMs?: number) =>
  untilView<View>(p, READ_VIEW, what, pred, timeoutMs);

const ready = (v: View) => v.hydration === "ready" && v.connected === "connected" && v.conn === "connected";
const idleAfterTurn = (v: View) => v.status === "idle" && v.kinds.at(-1) === "turnEnd";

/**
 * Whether the console shows an event in its timeline: tool results are
 * shown inside their call (and a result without text not at all), task
 * updates only in the side panel.
 */
function shown(e: Event): boolean {
  const p = e.payload;
  if (p.case === "result") return p.value.toolResults.length === 0 && p.value.text !== "";
  return p.case !== undefined && p.case !== "taskUpdated";
}

/**
 * The page holds exactly the server's log from its first held event to its
 * head, shows every event it should once and in order, and shows the status
 * and process state derived from the same events.
 */
async function assertMatchesServer(v: View, t: Target) {
  // In log order, except a subagent's events, which sit inside their Agent call.
  const nested = new Set(v.nested);
  const main = v.seqs.filter((s) => !nested.has(s));
  for (let i = 1; i < main.length; i++) assert.ok(main[i]! > main[i - 1]!, `seqs increase: ${v.seqs.join(",")}`);
  const log = (await history(t)).filter((e) => Number(e.seq) <= v.head);
  assert.equal(Number(log.at(-1)?.seq ?? 0), v.head, "the page's head is the server's");
  const held = log.filter((e) => Number(e.seq) >= v.first).filter(shown);
  const kindOf = new Map(v.seqs.map((s, i) => [s, v.kinds[i]!]));
  assert.equal(kindOf.size, v.seqs.length, `no event twice: ${v.seqs.join(",")}`);
  assert.deepEqual([...v.seqs].sort((a, b) => a - b), held.map((e) => Number(e.seq)), "the page shows the server's History");
  assert.deepEqual(held.map((e) => kindOf.get(Number(e.seq))), held.map((e) => e.payload.case ?? ""));
  for (const e of held) {
    const p = e.payload;
    const sub = (p.case === "content" || p.case === "result") && p.value.parentToolUseId !== "";
    assert.equal(nested.has(Number(e.seq)), sub, `#${e.seq} nested exactly when a subagent's`);
  }
  assert.equal(v.status, deriveStatus(log), "status derived from the same events");
  assert.equal(v.process, deriveProcessAlive(log) ? "alive" : "gone");
  if (v.first <= 1) assert.equal(v.cost, usd(deriveUsage(log).costUsd), "usage derived from the same events");
}

/** Records every state of the answer being typed and of the content event. */
const TYPING_RECORDER = typingRecorder("[data-testid=timeline] .ev[data-kind=content]");

/** Records Content-Security-Policy violations (there must be none). */
const CSP_RECORDER = `document.addEventListener("securitypolicyviolation", (e) =>
  (window.__csp ??= []).push(e.violatedDirective + " " + e.blockedURI));`;

/**
 * A console tab on `base` that records typing and CSP violations, and
 * collects console errors and the URLs it requested (which must all be the
 * server's own).
 */
async function openConsole(base: string, fragment = "") {
  const p = await ctx.newPage();
  const errors: string[] = [];
  const requests: string[] = [];
  p.on("console", (m) => {
    if (m.type() === "error") errors.push(m.text());
  });
  p.on("pageerror", (e) => errors.push(String(e)));
  p.on("request", (r) => requests.push(r.url()));
  await p.addInitScript(TYPING_RECORDER);
  await p.addInitScript(CSP_RECORDER);
  const res = await p.goto(`${base}/${fragment}`);
  assert.equal(res?.status(), 200);
  const headers = res!.headers();
  assert.match(headers["content-security-policy"] ?? "", /default-src 'none'.*frame-ancestors 'none'/);
  assert.equal(headers["x-frame-options"], "DENY");
  assert.equal(headers["x-content-type-options"], "nosniff");
  /** No console error, no CSP violation, nothing fetched from anywhere but the server. */
  const clean = async () => {
    assert.deepEqual(errors, [], "no console errors");
    assert.deepEqual(await p.evaluate("window.__csp ?? []"), [], "no CSP violations");
    const foreign = requests.filter((u) => !u.startsWith(`${base}/`) && !u.startsWith("blob:"));
    assert.deepEqual(foreign, [], "everything from the server's own origin");
  };
  return { p, errors, requests, clean };
}

/** Waits for the hash route the page navigated to. */
async function untilHash(p: Page, hash: string) {
  await untilPage(p, `location.hash ${hash}`, `location.hash === ${JSON.stringify(hash)}`, 15_000);
}

/** Starts a session from the list's form (with the agent chosen there when given). */
async function startFromList(p: Page, id: string, prompt: string, cwd = "", agent = "") {
  await p.waitForSelector("[data-testid=start-form]");
  if (agent) await p.selectOption("[data-testid=start-agent]", agent);
  await p.fill("[data-testid=start-id]", id);
  await p.fill("[data-testid=start-prompt]", prompt);
  if (cwd) await p.fill("[data-testid=start-cwd]", cwd);
  await p.click("[data-testid=start]");
  await untilHash(p, `#/s/${id}`);
}

/** The list's row of `id`: its derived state as shown. */
async function row(p: Page, id: string) {
  return (await p.evaluate(`(() => {
    const r = document.querySelector('[data-testid=session-row][data-session="${id}"]');
    if (!r) return null;
    const t = (s) => r.querySelector("[data-testid=" + s + "]")?.textContent?.trim() ?? "";
    return { status: r.dataset.status, activity: t("row-activity"), process: t("row-process"), cost: t("row-cost"), agent: t("row-agent") };
  })()`)) as { status: string; activity: string; process: string; cost: string; agent: string } | null;
}

async function untilRow(p: Page, id: string, what: string, pred: (r: NonNullable<Awaited<ReturnType<typeof row>>>) => boolean) {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const r = await row(p, id);
    if (r && pred(r)) return r;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}; row ${id} is ${JSON.stringify(r)}`);
    await new Promise((res) => setTimeout(res, 50));
  }
}

const STATUS_NAME: Record<number, string> = {
  [SessionStatus.IDLE]: "idle",
  [SessionStatus.STARTING]: "starting",
  [SessionStatus.STREAMING]: "streaming",
  [SessionStatus.STOPPING]: "stopping",
};

/** The console's cost format (server/web/src/format.ts). */
const usd = (n: number) => (n >= 1 ? `$${n.toFixed(2)}` : `$${n.toFixed(4)}`);

it("starts a session from the list and shows the answer growing, then the list follows it live", async () => {
  const t: Target = { url: h.url, session: "console-typing" };
  const { p, clean } = await openConsole(h.url);
  await p.waitForSelector("[data-testid=empty]");

  const n = 30;
  await startFromList(p, t.session, `SLOW ${n} 100`);
  const states = await untilTyped(p, "the content event", `typed.some((s) => s.content !== null)`);
  const partials = states.filter((s) => s.content === null && s.partial !== "").map((s) => s.partial);
  assert.ok(new Set(partials.map((x) => x.length)).size >= 3, `3+ lengths before the content: ${JSON.stringify(partials)}`);
  for (let i = 1; i < partials.length; i++)
    assert.ok(partials[i]!.startsWith(partials[i - 1]!) && partials[i]!.length > partials[i - 1]!.length, "the text grows");
  const expected = ticks(n);
  assert.ok(expected.startsWith(partials.at(-1)!), "a prefix of the answer");
  for (const s of states.filter((s) => s.content !== null)) {
    assert.equal(s.content, expected, "the content event's text");
    assert.equal(s.partial, "", "the content event supersedes the typed text");
  }
  const done = await until(p, "turn end", (v) => ready(v) && idleAfterTurn(v));
  assert.equal(done.process, "alive");
  await assertMatchesServer(done, t);

  // The list: the session's derived state as the server has it, then live.
  await p.click(".brand");
  await untilHash(p, "#/");
  const idle = await untilRow(p, t.session, "idle in the list", (r) => r.status === "idle");
  const s = (await nodeClient(t).getSession({ sessionId: t.session })).session!;
  assert.equal(idle.cost, usd(s.usage!.costUsd));
  assert.ok(s.usage!.costUsd > 0, "the fake API's usage has a cost");
  assert.equal(idle.process, "alive");
  await nodeClient(t).send({ sessionId: t.session, input: "SLOW 40 100" });
  await untilRow(p, t.session, "streaming in the list", (r) => r.status === "streaming" && r.activity !== "Idle");
  await untilRow(p, t.session, "idle again", (r) => r.status === "idle");
  await clean();
  await p.close();
});

it("answers a permission prompt with an edited input and shows the tool's output", async () => {
  const t: Target = { url: h.url, session: "console-permission" };
  const work = mkdtempSync(join(tmpdir(), "agent-harness-console-cwd-"));
  try {
    const { p, clean } = await openConsole(h.url);
    await startFromList(p, t.session, "WRITE note.txt original-text", work);
    const asked = await until(p, "the permission prompt", (v) => v.permissions.includes("Write"));
    assert.equal(asked.status, "streaming");
    assert.match(asked.activity, /Write/);
    const tool = asked.tools.find((x) => x.tool === "Write");
    assert.equal(tool?.state, "asking", "the call waits for its answer");

    await p.screenshot({ path: join(ARTIFACTS, "console-permission.png") });
    const input = await p.inputValue("[data-testid=permission-input]");
    assert.ok(input.includes("original-text"), input);
    await p.fill("[data-testid=permission-input]", input.replace("original-text", "edited-in-console"));
    await p.click("[data-testid=allow]");

    const ran = await until(p, "the tool's output", (v) => v.tools.some((x) => x.tool === "Write" && x.state === "done"));
    const result = ran.tools.find((x) => x.tool === "Write")!.result ?? "";
    assert.match(result, /note\.txt/, "the tool's output is shown with its call");
    assert.equal(readFileSync(join(work, "note.txt"), "utf8"), "edited-in-console\n", "the tool ran with the edited input");
    const done = await until(p, "turn end", (v) => idleAfterTurn(v));
    assert.deepEqual(done.permissions, [], "answered: the prompt is gone");
    await assertMatchesServer(done, t);
    const resolved = (await history(t)).find((e) => e.payload.case === "permissionResolved");
    assert.ok(resolved?.payload.case === "permissionResolved" && resolved.payload.value.allow);
    assert.equal(resolved.payload.value.by, "user");

    await p.screenshot({ path: join(ARTIFACTS, "console-session.png") });
    await clean();
    await p.close();
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
});

it("changes the model and the permission mode from the settings panel, and undoes file edits from a message", async () => {
  const t: Target = { url: h.url, session: "console-control" };
  const work = mkdtempSync(join(tmpdir(), "agent-harness-console-cwd-"));
  const file = join(work, "note.txt");
  try {
    const { p, clean } = await openConsole(h.url);
    await startFromList(p, t.session, "WRITE note.txt first", work);
    for (const [n, text] of [
      [1, "first"],
      [2, "second"],
    ] as const) {
      if (n === 2) {
        await p.fill("[data-testid=input]", "WRITE note.txt second");
        await p.press("[data-testid=input]", "Enter");
      }
      await until(p, `prompt ${n}`, (v) => v.permissions.includes("Write"));
      await p.click("[data-testid=allow]");
      await until(p, `turn ${n} ends`, (v) => idleAfterTurn(v) && v.permissions.length === 0);
      assert.equal(readFileSync(file, "utf8"), `${text}\n`);
    }

    // Settings: the panel shows what the log says once the server recorded it.
    const mode = () => p.inputValue("[data-testid=setting-mode]");
    assert.equal(await mode(), "default");
    await p.selectOption("[data-testid=setting-mode]", "plan");
    await until(p, "the setting_changed event", (v) => v.kinds.includes("settingChanged"));
    await untilPage(p, "plan mode in the panel", `document.querySelector("[data-testid=setting-mode]").value === "plan"`, 15_000);
    // Beyond the operator's policy: refused, shown, nothing changes.
    await p.selectOption("[data-testid=setting-mode]", "bypassPermissions");
    await untilPage(p, "the refusal", `(document.querySelector("[data-testid=settings-error]")?.textContent ?? "").includes("not allowed")`, 15_000);
    assert.equal(await mode(), "plan", "still plan");
    await p.fill("[data-testid=model-input]", "claude-haiku-4-5");
    await p.click("[data-testid=set-model]");
    await untilPage(p, "the new model", `document.querySelector("[data-testid=setting-model]").textContent === "claude-haiku-4-5"`, 15_000);
    const s = (await nodeClient(t).getSession({ sessionId: t.session })).session!;
    assert.equal(s.permissionMode, "plan");
    assert.equal(s.model, "claude-haiku-4-5");

    // Undo the second turn's edit from its message: a dry run lists the file, then it is restored.
    const second = (await history(t)).find((e) => e.payload.case === "inputSent" && e.payload.value.text === "WRITE note.txt second")!;
    const msg = `.ev[data-kind=inputSent][data-seq="${second.seq}"]`;
    await p.click(`${msg} [data-testid=rewind]`);
    await p.waitForSelector(`${msg} [data-testid=rewind-confirm]`);
    assert.match(await p.textContent(`${msg} [data-testid=rewind-confirm]`) ?? "", /note\.txt/);
    assert.equal(readFileSync(file, "utf8"), "second\n", "a dry run changes nothing");
    await p.click(`${msg} [data-testid=rewind-go]`);
    await until(p, "the files_rewound event", (v) => v.kinds.includes("filesRewound"));
    assert.equal(readFileSync(file, "utf8"), "first\n", "restored to before the second message");
    assert.match(await p.textContent(`${msg} [data-testid=rewind-result]`) ?? "", /restored 1 file/);
    await assertMatchesServer(await until(p, "settled", (v) => ready(v) && v.status === "idle"), t);
    await p.screenshot({ path: join(ARTIFACTS, "console-control.png") });
    await clean();
    await p.close();
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
});

it("stops a turn mid-way with Esc and with the Stop button; Enter sends", async () => {
  const t: Target = { url: h.url, session: "console-typing" };
  const { p, clean } = await openConsole(h.url, `#/s/${t.session}`);
  const start = await until(p, "connected and ready", (v) => ready(v) && idleAfterTurn(v));

  for (const how of ["Escape", "button"] as const) {
    const before = await view(p);
    await p.fill("[data-testid=input]", "SLOW 100 100");
    await p.press("[data-testid=input]", "Enter");
    await until(p, "typing mid-turn", (v) => v.status === "streaming" && v.partial.includes("tick 2 "));
    assert.equal(await p.inputValue("[data-testid=input]"), "", "Enter sent the message");
    if (how === "Escape") await p.keyboard.press("Escape");
    else await p.click("[data-testid=stop]");
    const stopped = await until(
      p,
      `idle after stopping with ${how}`,
      (v) => {
        const rest = v.kinds.slice(before.kinds.length);
        return v.status === "idle" && rest.includes("stopRequested") && rest.includes("turnEnd");
      },
      20_000,
    );
    assert.equal(stopped.process, "alive", "the interrupt keeps the interactive CLI alive");
    assert.equal(stopped.partial, "", "no typed text left behind");
    await assertMatchesServer(stopped, t);
  }
  assert.ok((await view(p)).seqs.length > start.seqs.length);
  await clean();
  await p.close();
});

it("sends an image attachment, and nests a subagent's output under its Agent call", async () => {
  const t: Target = { url: h.url, session: "console-typing" };
  const { p, clean } = await openConsole(h.url, `#/s/${t.session}`);
  await until(p, "connected and ready", (v) => ready(v) && v.status === "idle");

  // A 1×1 PNG, attached through the file picker's input.
  const png = Buffer.from(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGP4z8DwHwAFAAH/iZk9HQAAAABJRU5ErkJggg==",
    "base64",
  );
  await p.setInputFiles("[data-testid=attach-input]", { name: "dot.png", mimeType: "image/png", buffer: png });
  await p.waitForSelector("[data-testid=attachments] img");
  await p.fill("[data-testid=input]", "TEXT saw the image");
  const before = await view(p);
  await p.press("[data-testid=input]", "Enter");
  await until(p, "the turn with the image", (v) => v.seqs.length > before.seqs.length && idleAfterTurn(v));
  assert.equal(await p.$("[data-testid=attachments]"), null, "attachments cleared once sent");
  const sent = (await history(t)).filter((e) => e.payload.case === "inputSent").at(-1)!;
  assert.ok(sent.payload.case === "inputSent");
  assert.equal(sent.payload.value.text, "TEXT saw the image");
  const block = sent.payload.value.contentBlocks[0]!;
  assert.equal(block["type"], "image");
  assert.deepEqual(block["source"], { type: "base64", media_type: "image/png", data: png.toString("base64") });
  assert.ok((await p.textContent(`.ev[data-seq="${sent.seq}"]`))?.includes("1 image"));

  // A subagent: its own messages are shown inside the Agent call, not in the turn.
  const mid = await view(p);
  await p.fill("[data-testid=input]", "AGENT CHILDTASK reply hi");
  await p.press("[data-testid=input]", "Enter");
  const done = await until(p, "the subagent's turn", (v) => v.seqs.length > mid.seqs.length && idleAfterTurn(v));
  await assertMatchesServer(done, t);
  const agent = done.tools.find((x) => x.tool === "Agent");
  assert.equal(agent?.state, "done");
  assert.match(agent?.result ?? "", /child says hi/, "the subagent's answer is the call's result");
  const children = (await history(t)).filter((e) => {
    const p = e.payload;
    return (p.case === "content" || p.case === "result") && p.value.parentToolUseId !== "";
  });
  assert.ok(children.length > 0, "the CLI logged the subagent's own messages");
  assert.ok(done.nested.length > 0);
  const nested = await p.textContent(`[data-testid=tool-call][data-tool=Agent] [data-testid=subagent]`);
  assert.ok(nested?.includes("CHILDTASK reply hi"), `the subagent's prompt, nested: ${nested}`);
  await clean();
  await p.close();
});

it("denies a prompt with a reason, and shows background tasks and a scheduled prompt", async () => {
  const t: Target = { url: h.url, session: "console-tasks" };
  const work = mkdtempSync(join(tmpdir(), "agent-harness-console-cwd-"));
  const { p, clean } = await openConsole(h.url);
  try {
    await startFromList(p, t.session, "WRITE denied.txt nope", work);
    await until(p, "the permission prompt", (v) => v.permissions.includes("Write"));
    await p.fill("[data-testid=permission] input", "not in this folder");
    await p.click("[data-testid=deny]");
    const denied = await until(p, "turn end after the denial", (v) => idleAfterTurn(v) && v.permissions.length === 0);
    assert.equal(denied.tools.find((x) => x.tool === "Write")?.state, "error", "the call failed: denied");
    const resolved = (await history(t)).find((e) => e.payload.case === "permissionResolved");
    assert.ok(resolved?.payload.case === "permissionResolved" && !resolved.payload.value.allow);
    assert.equal(resolved.payload.value.message, "not in this folder");
    await assertMatchesServer(denied, t);

    // A background Bash: in the side panel while it runs, completed after its notification.
    await p.fill("[data-testid=input]", "BGBASH sleep 2; echo bg-done");
    await p.press("[data-testid=input]", "Enter");
    const task = async () => p.getAttribute("[data-testid=task]", "data-status", { timeout: 1000 }).catch(() => null);
    for (const want of ["running", "completed"]) {
      for (const deadline = Date.now() + 30_000; ; ) {
        const v = await view(p);
        if (v.permissions.length > 0) await p.click("[data-testid=allow]");
        if ((await task()) === want) break;
        if (Date.now() > deadline) throw new Error(`timed out waiting for a ${want} task; page shows ${JSON.stringify(v)}`);
        await new Promise((r) => setTimeout(r, 50));
      }
    }
    await until(p, "the notification turn ends", (v) => idleAfterTurn(v) && v.kinds.includes("taskNotification"));

    // A long one, stopped from the panel (StopTask): the process stays.
    await p.fill("[data-testid=input]", "BGBASH sleep 300");
    await p.press("[data-testid=input]", "Enter");
    const running = "[data-testid=task][data-status=running]";
    for (const deadline = Date.now() + 30_000; !(await p.$(running)); ) {
      const v = await view(p);
      if (v.permissions.length > 0) await p.click("[data-testid=allow]");
      if (Date.now() > deadline) throw new Error(`timed out waiting for the long task; page shows ${JSON.stringify(v)}`);
      await new Promise((r) => setTimeout(r, 50));
    }
    await until(p, "its turn ends", idleAfterTurn);
    await p.click(`${running} [data-testid=task-stop]`);
    await untilPage(p, "the task stopped", `[...document.querySelectorAll("[data-testid=task]")].filter((t) => t.dataset.status === "stopped").length === 1 && !document.querySelector(${JSON.stringify(running)})`, 30_000);
    const stopped = (await history(t)).filter((e) => e.payload.case === "taskNotification" && e.payload.value.status === "stopped");
    assert.equal(stopped.length, 1, "the CLI reported the task stopped");
    assert.equal((await view(p)).process, "alive", "the process stays");

    // A session-only cron (CronCreate; this CLI refuses ScheduleWakeup outside /loop):
    // the panel shows it until it fires.
    await p.fill("[data-testid=input]", "CRONME");
    await p.press("[data-testid=input]", "Enter");
    for (const deadline = Date.now() + 30_000; !(await p.$("[data-testid=wakeup]")); ) {
      const v = await view(p);
      if (v.permissions.length > 0) await p.click("[data-testid=allow]");
      if (Date.now() > deadline) throw new Error(`timed out waiting for the wakeup; page shows ${JSON.stringify(v)}`);
      await new Promise((r) => setTimeout(r, 50));
    }
    assert.match((await p.textContent("[data-testid=wakeup]")) ?? "", /CRONFIRED ping/);
    const done = await until(p, "turn end", idleAfterTurn);
    await assertMatchesServer(done, t);
    await clean();
  } finally {
    await p.close();
    rmSync(work, { recursive: true, force: true });
  }
});

it("a reload mid-turn shows the same state at once, and a second tab agrees with the first", async () => {
  const t: Target = { url: h.url, session: "console-reload" };
  const { p, clean } = await openConsole(h.url, `#/s/${t.session}`);
  await until(p, "an empty session, ready", (v) => ready(v) && v.seqs.length === 0);
  // A session never started: the first message starts it.
  await p.fill("[data-testid=input]", "SLOW 60 100");
  await p.press("[data-testid=input]", "Enter");
  const before = await until(p, "mid-message", (v) => v.status === "streaming" && v.partial.includes("tick 4 "));
  await assertMatchesServer(before, t);

  await p.reload();
  const typed = await untilTyped(p, "typed text after the reload", `typed.some((s) => s.partial !== "")`);
  const first = typed.find((s) => s.partial !== "")!;
  assert.equal(first.content, null, "still mid-message");
  assert.ok(first.partial.length >= before.partial.length, `at once, what was shown before: ${JSON.stringify(first.partial)}`);
  const reloaded = await until(p, "re-hydrated", (v) => ready(v));
  assert.deepEqual(reloaded.seqs.slice(0, before.seqs.length), before.seqs, "the same events after the reload");
  assert.equal(reloaded.status, "streaming", "still mid-turn after the reload");
  await assertMatchesServer(reloaded, t);

  // A second tab on the same session, opened mid-turn.
  const second = await openConsole(h.url, `#/s/${t.session}`);
  const other = await until(second.p, "second tab ready", (v) => ready(v));
  assert.equal(other.status, "streaming");
  const a = await until(p, "turn end (first tab)", idleAfterTurn);
  const b = await until(second.p, "turn end (second tab)", (v) => idleAfterTurn(v) && v.head === a.head);
  for (const k of ["seqs", "kinds", "status", "process", "cost", "head", "partial"] as const)
    assert.deepEqual(b[k], a[k], `the tabs agree on ${k}`);
  const text = (q: Page) => q.innerText("[data-testid=timeline]");
  assert.equal(await text(second.p), await text(p), "the tabs show the same conversation");
  await assertMatchesServer(a, t);
  await second.clean();
  await second.p.close();
  await clean();
  await p.close();
});

it("starts a Codex session from the form and shows its answer, and the agent in the header and the list", async () => {
  const t: Target = { url: h.url, session: "console-codex" };
  const { p, clean } = await openConsole(h.url);
  await startFromList(p, t.session, "TEXT hello from codex in the console", "", "codex");
  const done = await until(p, "the Codex turn's end", (v) => ready(v) && idleAfterTurn(v), 60_000);
  assert.equal(done.process, "alive", "the codex app-server stays between turns");
  const answer = await p.evaluate(`document.querySelector(".ev[data-kind=content]")?.textContent ?? ""`);
  assert.match(String(answer), /hello from codex in the console/);
  assert.equal(await p.textContent("[data-testid=agent]"), "codex", "the header names the agent");
  assert.equal(await p.textContent("[data-testid=agent-detail]"), "codex");
  await assertMatchesServer(done, t);
  await p.screenshot({ path: join(ARTIFACTS, "console-codex.png") });

  await p.click(".brand");
  await untilHash(p, "#/");
  const listed = await untilRow(p, t.session, "idle in the list", (r) => r.status === "idle");
  assert.equal(listed.agent, "codex", "the list names the agent");
  // A claude session's row names claude.
  assert.equal((await row(p, "console-typing"))?.agent, "claude");
  await clean();
  await p.close();
});

/** The Bash call's live output ("" when none shown) and result (null when none yet). */
interface Call {
  live: string;
  result: string | null;
}
const READ_BASH_CALL = `(() => {
  const call = document.querySelector("[data-testid=tool-call][data-tool=Bash]");
  return {
    live: call?.querySelector("[data-testid=tool-output]")?.textContent ?? "",
    result: call?.querySelector("[data-testid=tool-result]")?.textContent ?? null,
  };
})()`;

it("shows a Codex command's output live under its call while it runs, then its result instead", async () => {
  const t: Target = { url: h.url, session: "console-codex-output" };
  const { p, clean } = await openConsole(h.url);
  await startFromList(p, t.session, "BASH for i in 1 2 3 4; do echo line$i; sleep 0.5; done", "", "codex");
  await until(p, "the command's permission prompt", (v) => v.permissions.includes("Bash"), 60_000);
  await p.click("[data-testid=allow]");
  // Codex streams what the command prints after its first moments, so the
  // live output shows from line2 on, under the call, before any result.
  const seen = await untilView<Call>(p, READ_BASH_CALL, "the live output under the call", (c) => c.live.includes("line2"));
  assert.equal(seen.result, null, "no result yet: the command still runs");
  await p.screenshot({ path: join(ARTIFACTS, "console-codex-output.png") });
  const done = await until(p, "the Codex turn's end", (v) => ready(v) && idleAfterTurn(v), 60_000);
  const after = (await p.evaluate(READ_BASH_CALL)) as Call;
  assert.equal(after.live, "", "the result replaces the live output");
  assert.match(after.result ?? "", /line1\nline2\nline3\nline4/, "the result holds every line");
  await assertMatchesServer(done, t);
  await clean();
  await p.close();
});

/** The start form's agent choices as shown: value and label of each option. */
async function agentOptions(p: Page) {
  return (await p.evaluate(
    `[...document.querySelectorAll("[data-testid=start-agent] option")].map((o) => [o.value, o.textContent])`,
  )) as [string, string][];
}

it("offers the agents ListAgents lists, starts a Gemini (ACP) session from the form and shows its answer and agent", async () => {
  const t: Target = { url: h.url, session: "console-gemini" };
  const { p, clean } = await openConsole(h.url);
  await p.waitForSelector("[data-testid=start-agent] option[value=gemini]", { state: "attached" });
  assert.deepEqual(
    await agentOptions(p),
    [
      ["claude", "claude"],
      ["codex", "codex"],
      ["gemini", "gemini"],
    ],
    "the server's agents, claude first and chosen",
  );
  assert.equal(await p.inputValue("[data-testid=start-agent]"), "claude");
  await startFromList(p, t.session, "TEXT hello from gemini in the console", "", "gemini");
  const done = await until(p, "the Gemini turn's end", (v) => ready(v) && idleAfterTurn(v), 60_000);
  assert.equal(done.process, "alive", "the ACP agent stays between turns");
  const answer = await p.evaluate(`document.querySelector(".ev[data-kind=content]")?.textContent ?? ""`);
  assert.match(String(answer), /hello from gemini in the console/);
  assert.equal(await p.textContent("[data-testid=agent]"), "gemini", "the header names the agent");
  assert.equal(await p.textContent("[data-testid=agent-detail]"), "gemini");
  await assertMatchesServer(done, t);
  await p.screenshot({ path: join(ARTIFACTS, "console-gemini.png") });

  await p.click(".brand");
  await untilHash(p, "#/");
  const listed = await untilRow(p, t.session, "idle in the list", (r) => r.status === "idle");
  assert.equal(listed.agent, "gemini", "the list names the agent");
  await clean();
  await p.close();
});

it("the list shows every session with the server's derived state, at laptop and phone widths", async () => {
  const { p, clean } = await openConsole(h.url);
  const client = nodeClient({ url: h.url });
  const sessions = (await client.listSessions({})).sessions;
  assert.ok(sessions.length >= 4);
  for (const { sessionId } of sessions) {
    // A session may move on meanwhile (a scheduled prompt firing): compare
    // the row with what the server says at the same moment.
    const row = async () => {
      const s = (await client.getSession({ sessionId })).session!;
      return { status: STATUS_NAME[s.status], cost: usd(s.usage?.costUsd ?? 0), process: s.processAlive ? "alive" : "gone" };
    };
    let want = await row();
    await untilRow(p, sessionId, "the row as the server has it", (r) => {
      const same = r.status === want.status && r.cost === want.cost && r.process === want.process;
      if (!same) void row().then((w) => (want = w));
      return same;
    });
  }
  await p.screenshot({ path: join(ARTIFACTS, "console-list.png") });
  await p.setViewportSize({ width: 390, height: 800 });
  await p.goto(`${h.url}/#/s/console-permission`);
  // Idle, whether its process waits (turn_end last) or was since ended to
  // keep the idle processes under --max-idle-runs (run_end IDLE_EVICTED last).
  await until(p, "ready at phone width", (v) => ready(v) && v.status === "idle");
  const overflow = await p.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth");
  assert.equal(overflow, 0, "nothing wider than the phone's screen");
  await p.screenshot({ path: join(ARTIFACTS, "console-phone.png") });
  await clean();
  await p.close();
});

it("enforces its Content-Security-Policy: nothing from elsewhere, no HTML from strings", async () => {
  // The control for every test's clean(): a violation is reported, and a
  // string assigned to innerHTML throws (Trusted Types, no policy).
  const { p } = await openConsole(h.url);
  await p.waitForSelector("[data-testid=start-form]");
  await p.evaluate(`(() => { const i = document.createElement("img"); i.src = "http://example.invalid/x.png"; document.body.append(i); })()`);
  await untilPage(p, "the image reported as a violation", `(window.__csp ?? []).some((v) => v.startsWith("img-src"))`);
  const thrown = await p.evaluate(`(() => { try { document.body.innerHTML = "<b>x</b>"; return ""; } catch (e) { return String(e); } })()`);
  assert.match(String(thrown), /TrustedHTML/);
  await p.close();
});

it("the connection indicator follows the server: down, back, and caught up", async () => {
  // A session of its own, started now: its process is the newest idle one. An older session's
  // may already have been ended (run_end IDLE_EVICTED) to keep the idle processes under
  // --max-idle-runs, as the tests since it started sessions of their own.
  const t: Target = { url: h.url, session: "console-connection" };
  await nodeClient(t).start({ sessionId: t.session, config: { prompt: "TEXT here until the server goes" } });
  const { p } = await openConsole(h.url, `#/s/${t.session}`);
  const before = await until(p, "ready after the turn, process alive", (v) => ready(v) && v.process === "alive" && v.kinds.at(-1) === "turnEnd");
  await h.kill();
  await until(p, "disconnected", (v) => v.conn === "disconnected" && v.connected === "disconnected");
  await h.start();
  // Recovery ends the run the killed server left live (run_end SERVER_RESTART); the page
  // reconnects from its cursor and shows it.
  const back = await until(p, "reconnected and caught up", (v) => v.conn === "connected" && v.process === "gone" && v.kinds.at(-1) === "runEnd");
  assert.deepEqual(back.seqs.slice(0, before.seqs.length), before.seqs, "no event lost or repeated");
  await assertMatchesServer(back, t);
  // Failed requests while the server was down are console errors; CSP must still be clean.
  assert.deepEqual(await p.evaluate("window.__csp ?? []"), []);
  await p.close();
});

describe("a server without Codex", () => {
  let hn: Harness;
  before(async () => {
    hn = await startHarness({ codex: false });
  });
  after(async () => {
    await hn?.close();
  });

  it("a Start of Codex shows the server's FAILED_PRECONDITION, naming the flag, and stays on the list", async () => {
    const { p } = await openConsole(hn.url);
    await p.waitForSelector("[data-testid=start-form]");
    // Codex is offered all the same, marked, so the server's answer can say how to enable it.
    await p.waitForSelector("[data-testid=start-agent] option[value=gemini]", { state: "attached" });
    assert.deepEqual(await agentOptions(p), [
      ["claude", "claude"],
      ["gemini", "gemini"],
      ["codex", "codex (not enabled)"],
    ]);
    await p.selectOption("[data-testid=start-agent]", "codex");
    await p.fill("[data-testid=start-prompt]", "TEXT never answered");
    await p.click("[data-testid=start]");
    await untilPage(p, "the start error", `!!document.querySelector("[data-testid=start-error]")`);
    const shown = String(await p.textContent("[data-testid=start-error]"));
    assert.match(shown, /--codex-bin/, `the error names the fix: ${shown}`);
    assert.ok(!String(await p.evaluate("location.hash")).startsWith("#/s/"), "no session view opened");
    assert.deepEqual((await nodeClient({ url: hn.url }).listSessions({})).sessions, [], "nothing recorded");
    await p.close();
  });
});

describe("history paging", () => {
  let hh: Harness;
  const TURNS = 20;

  before(async () => {
    // A new Subscribe (after_seq 0) further back than --max-replay gets a
    // reset and the newest --window events: the page opens on the last 8
    // and must page back through History for the rest.
    // --idle-timeout ends the process between the turns and the last one,
    // whose Send starts a new run near the tail.
    hh = await startHarness({ serverArgs: ["--max-replay", "8", "--window", "8", "--idle-timeout", "2s"] });
  });
  after(async () => {
    await hh?.close();
  });

  it("pages back through history on scroll-up, keeping the reader's place, to the start", async () => {
    const t: Target = { url: hh.url, session: "console-history" };
    const client = nodeClient(t);
    const untilLast = async (what: string, pred: (e: Event) => boolean, after: number) => {
      for (const deadline = Date.now() + 30_000; ; ) {
        const last = (await history(t)).at(-1);
        if (last && Number(last.seq) > after && pred(last)) return Number(last.seq);
        if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
        await new Promise((r) => setTimeout(r, 50));
      }
    };
    let head = 0;
    for (let i = 0; i <= TURNS; i++) {
      const input = `SLOW 60 1`;
      if (i === 0) await client.start({ sessionId: t.session, config: { prompt: input } });
      else await client.send({ sessionId: t.session, input });
      head = await untilLast("turn end", (e) => e.payload.case === "turnEnd", head);
      // Before the last turn the process ends (idle), so the last turn runs in a new run.
      if (i === TURNS - 1) head = await untilLast("idle run end", (e) => e.payload.case === "runEnd", head);
    }
    const log = await history(t);
    assert.equal(log.filter((e) => e.payload.case === "runStart").length, 2);

    const { p, requests, clean } = await openConsole(hh.url, `#/s/${t.session}`);
    // Ready, and the view filled (older pages are fetched until it overflows).
    const opened = await until(p, "the tail, ready", (v) => ready(v) && v.head === Number(log.at(-1)!.seq) && v.overflows);
    assert.ok(opened.first > 1, `opened on the tail (from #${opened.first})`);
    assert.ok(opened.hasOlder, "older events to fetch");
    assert.ok(opened.kinds.includes("runStart"), "hydrated back to the current run");
    await assertMatchesServer(opened, t);
    // Usage sums every turn: with the tail held, the panel shows the server's totals.
    const s = (await client.getSession({ sessionId: t.session })).session!;
    await until(p, "the server's cost", (v) => v.cost === usd(s.usage!.costUsd));

    let pages = 0;
    for (let v = opened; v.hasOlder; ) {
      const first = v.first;
      await p.evaluate(`(() => { const tl = document.querySelector("[data-testid=timeline]"); tl.scrollTop = 0; })()`);
      v = await until(p, "an older page", (x) => x.first < first);
      pages++;
      assert.ok(v.scrollTop > 0, `page ${pages} landed above and kept the reader's place (not stuck at the top)`);
      await assertMatchesServer(v, t);
    }
    const all = await view(p);
    assert.equal(all.first, 1, "paged back to the first event");
    assert.equal(all.cost, usd(s.usage!.costUsd), "the whole log held: the same totals derived in the page");
    assert.ok(pages >= 1, `scrolled back ${pages} pages`);
    assert.ok(requests.filter((u) => u.endsWith("/History")).length >= pages);
    assert.ok(await p.isVisible("text=start of the session"));
    await clean();
    await p.close();
  });
});

describe("a server with a token", () => {
  let ht: Harness;
  let token: string;
  let tokenDir: string;

  before(async () => {
    tokenDir = mkdtempSync(join(tmpdir(), "agent-harness-token-"));
    const file = join(tokenDir, "harness.token");
    execFileSync(SERVER_BIN(), ["token", "--out", file]);
    token = readFileSync(file, "utf8").trim();
    // And a launch policy: sessions may only work under tokenDir.
    ht = await startHarness({ serverArgs: ["--auth-token-file", file, "--allowed-cwd", tokenDir] });
  });
  after(async () => {
    await ht?.close();
    if (tokenDir) rmSync(tokenDir, { recursive: true, force: true });
  });

  it("serves the page without it, asks for it once per tab, sends it with every call; the start form keeps to the launch policy", async () => {
    const t: Target = { url: ht.url, session: "console-token", token };
    const { p, clean } = await openConsole(ht.url);
    const calls: { url: string; auth: string | undefined }[] = [];
    p.on("request", (r) => {
      if (r.method() === "POST") calls.push({ url: r.url(), auth: r.headers()["authorization"] });
    });
    await p.waitForSelector("[data-testid=token-form]");
    assert.equal(await p.$("[data-testid=sessions], [data-testid=empty]"), null, "nothing shown without the token");

    await p.fill("[data-testid=token-input]", "not-the-token");
    await p.click("[data-testid=token-submit]");
    await p.waitForSelector("[data-testid=token-error]");
    assert.equal(await p.evaluate("sessionStorage.length"), 0, "a wrong token is not kept");

    await p.fill("[data-testid=token-input]", token);
    const mark = calls.length;
    await p.click("[data-testid=token-submit]");
    await p.waitForSelector("[data-testid=empty]");
    assert.equal(await p.evaluate(`sessionStorage.getItem("agent-harness-token")`), token);
    assert.equal(await p.evaluate("localStorage.length"), 0, "kept for the tab only");
    assert.equal((await ctx.cookies()).length, 0, "no cookie");

    // The start form stays within the operator's policy: a cwd outside it is refused, and says why.
    await p.fill("[data-testid=start-id]", t.session);
    await p.fill("[data-testid=start-prompt]", "TEXT hello with a token");
    await p.fill("[data-testid=start-cwd]", "/");
    await p.click("[data-testid=start]");
    await p.waitForSelector("[data-testid=start-error]");
    assert.match((await p.textContent("[data-testid=start-error]")) ?? "", /PermissionDenied.*cwd/i);
    assert.equal(await p.evaluate("location.hash"), "", "still on the list");
    await assert.rejects(nodeClient(t).getSession({ sessionId: t.session }), (e) => ConnectError.from(e).code === Code.NotFound);
    await startFromList(p, t.session, "TEXT hello with a token", tokenDir);
    const done = await until(p, "turn end", (v) => ready(v) && idleAfterTurn(v));
    await assertMatchesServer(done, t);
    const apiCalls = calls.slice(mark).filter((c) => c.url.includes("/agentharness.v1.SessionService/"));
    assert.ok(apiCalls.some((c) => c.url.endsWith("/Start")) && apiCalls.some((c) => c.url.endsWith("/Subscribe")));
    for (const c of apiCalls) assert.equal(c.auth, `Bearer ${token}`, c.url);

    // A reload keeps it; a new tab asks again.
    await p.reload();
    await until(p, "ready after a reload, no question", (v) => ready(v));
    const other = await openConsole(ht.url, `#/s/${t.session}`);
    await other.p.waitForSelector("[data-testid=token-form]");
    assert.equal(await other.p.evaluate("sessionStorage.length"), 0);
    await other.p.close();

    // The server refuses a call without it, whatever the page does.
    await assert.rejects(
      nodeClient({ url: ht.url }).getSession({ sessionId: t.session }),
      (e) => ConnectError.from(e).code === Code.Unauthenticated,
    );
    await clean();
    await p.close();
  });
});
