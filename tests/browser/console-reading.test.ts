// Reading the work in the built-in console (server/web), in real Chromium
// against the real server running the real claude CLI against the scripted
// Messages API: an answer's markdown rendered (heading, list, table,
// highlighted code, a safe link), raw HTML and a javascript: link in it
// inert, file edits (Edit, MultiEdit, Write) shown as diffs, folded when
// long; dark mode, the keyboard shortcuts and a phone width. Also, without a
// browser page: the block splitter and the diff model, and the time Chromium
// takes to render a 200 KB answer, whole and while it is typed (printed;
// BENCHMARKS.md keeps the figures). Writes tests/artifacts/console-markdown.png,
// console-diff.png, console-dark.png and console-phone.png.

import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { build } from "esbuild";
import type { Page } from "playwright-core";
import { ROOT, startHarness, type Harness } from "../ts/support.ts";
import { launchChromium, nodeClient, untilPage, type Target } from "./chromium.ts";
import { appendBlocks, splitBlocks, type Split } from "../../server/web/src/md-blocks.ts";
import { lineDiff, parseUnified, toolDiffs } from "../../server/web/src/diff.ts";

const ARTIFACTS = join(ROOT, "tests/artifacts");
const WEB = join(ROOT, "server/web");

/** The console's Content-Security-Policy, as it was before markdown rendering came. */
const CSP =
  "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' blob:; connect-src 'self'; " +
  "base-uri 'none'; form-action 'none'; frame-ancestors 'none'; require-trusted-types-for 'script'; trusted-types 'none'";

describe("the markdown block splitter", () => {
  const cases: [string, string[]][] = [
    ["one paragraph", ["one paragraph"]],
    ["# Title\n\npara one\nstill one\n\npara two", ["# Title\n\n", "para one\nstill one\n\n", "para two"]],
    ["```js\na\n\nb\n```\n\nafter", ["```js\na\n\nb\n```\n\n", "after"]],
    ["~~~\nx\n\n```\ny\n~~~\nz", ["~~~\nx\n\n```\ny\n~~~\nz"]],
    ["- a\n\n- b\n\n  more of b\n\nnext", ["- a\n\n- b\n\n  more of b\n\n", "next"]],
    ["1. one\n2. two\n\n| a | b |\n|---|---|\n| 1 | 2 |", ["1. one\n2. two\n\n", "| a | b |\n|---|---|\n| 1 | 2 |"]],
    ["tick 0 tick 1 ", ["tick 0 tick 1 "]],
    ["", [""]],
  ];
  for (const [text, want] of cases)
    it(`splits ${JSON.stringify(text).slice(0, 40)}`, () => {
      const got = splitBlocks(text);
      assert.deepEqual(got, want);
      assert.equal(got.join(""), text, "the blocks joined are the text");
    });

  it("keeps every block but the last while text is appended", () => {
    const full = "# A\n\ntext\n\n```\ncode\n\nmore\n```\n\n- x\n- y\n\nend";
    let prev: string[] = [];
    for (let n = 1; n <= full.length; n++) {
      const now = splitBlocks(full.slice(0, n));
      // A block before the previous last one never changes.
      for (let i = 0; i < prev.length - 1; i++) assert.equal(now[i], prev[i], `block ${i} at ${n}`);
      prev = now;
    }
  });

  it("splits appended text as it splits the whole", () => {
    const full = "# A\n\ntext\n\n```\ncode\n\nmore\n```\n\n- x\n- y\n\n  still y\n\nend\n\n| a |\n|---|\n| 1 |";
    let prev: Split = { text: "", blocks: [] };
    for (let n = 0; n <= full.length; n++) {
      const text = full.slice(0, n);
      const blocks = appendBlocks(prev, text);
      assert.deepEqual(blocks, splitBlocks(text), `at ${n}`);
      prev = { text, blocks };
    }
    assert.deepEqual(appendBlocks(prev, "other"), ["other"], "not an append: split again");
  });
});

describe("the diff model", () => {
  it("diffs an Edit's strings line by line", () => {
    const d = toolDiffs("Edit", { file_path: "/w/a.rs", old_string: "a\nb\nc\n", new_string: "a\nB\nc\nd\n" })!;
    assert.equal(d.length, 1);
    assert.equal(d[0]!.path, "/w/a.rs");
    assert.deepEqual(
      d[0]!.lines.map((l) => `${l.kind}:${l.text}`),
      ["hunk:@@", "ctx:a", "del:b", "add:B", "ctx:c", "add:d"],
    );
    assert.equal(d[0]!.added, 2);
    assert.equal(d[0]!.removed, 1);
  });
  it("shows a Write as the whole file added, and a MultiEdit edit by edit", () => {
    const w = toolDiffs("Write", { file_path: "new.txt", content: "x\ny\n" })!;
    assert.deepEqual(w[0]!.lines, [
      { kind: "add", text: "x" },
      { kind: "add", text: "y" },
    ]);
    assert.equal(w[0]!.note, "written");
    const m = toolDiffs("MultiEdit", {
      file_path: "m.txt",
      edits: [
        { old_string: "1", new_string: "one" },
        { old_string: "2", new_string: "two" },
      ],
    })!;
    assert.deepEqual(
      m[0]!.lines.map((l) => `${l.kind}:${l.text}`),
      ["hunk:@@ edit 1 of 2", "del:1", "add:one", "hunk:@@ edit 2 of 2", "del:2", "add:two"],
    );
  });
  it("reads Codex's fileChange and an ACP agent's diff content", () => {
    const codex = toolDiffs("Edit", {
      changes: [
        { path: "/w/a.txt", kind: { type: "add" }, diff: "+hi\n" },
        { path: "/w/b.txt", kind: { type: "update", move_path: null }, diff: "--- a/b.txt\n+++ b/b.txt\n@@ -1,2 +1,2 @@\n keep\n-old\n+new\n" },
        { path: "/w/c.txt", kind: { type: "delete" }, diff: "gone\n" },
      ],
    })!;
    assert.deepEqual(
      codex.map((f) => [f.path, f.note, f.lines.map((l) => `${l.kind}:${l.text}`)]),
      [
        ["/w/a.txt", "new file", ["add:hi"]],
        ["/w/b.txt", "", ["hunk:@@ -1,2 +1,2 @@", "ctx:keep", "del:old", "add:new"]],
        ["/w/c.txt", "deleted", ["del:gone"]],
      ],
    );
    const acp = toolDiffs("Edit", { file_path: "/w/a.txt" }, {
      status: "completed",
      content: [
        { type: "diff", path: "/w/a.txt", oldText: "x\n", newText: "y\n" },
        { type: "diff", path: "/w/n.txt", oldText: null, newText: "fresh\n" },
      ],
    })!;
    assert.deepEqual(
      acp.map((f) => [f.path, f.note, f.lines.map((l) => `${l.kind}:${l.text}`)]),
      [
        ["/w/a.txt", "", ["hunk:@@ -1,1 +1,1 @@", "del:x", "add:y"]],
        ["/w/n.txt", "new file", ["add:fresh"]],
      ],
    );
    assert.equal(toolDiffs("Bash", { command: "ls" }), undefined, "not a file edit");
    assert.deepEqual(parseUnified("@@ -1 +1 @@\n-a\n\\ No newline at end of file\n+b\n", "update").length, 3);
    assert.deepEqual(lineDiff("same\n", "same\n"), [], "no change, no lines");
  });
});

/** A markdown answer of about `bytes` bytes: headings, prose, lists, tables and code. */
function bigAnswer(bytes: number, title = "Section"): string {
  const parts: string[] = [];
  for (let i = 0; parts.join("").length < bytes; i++)
    parts.push(
      `## ${title} ${i}\n\nSome **bold** prose with \`inline code\`, *emphasis* and a [link](https://example.com/${i}).\n\n` +
        `- item one of ${i}\n- item two\n  - nested\n\n| key | value |\n|---|---|\n| a${i} | ${i * 7} |\n| b | text |\n\n` +
        "```ts\n" +
        `export function f${i}(x: number): number {\n  // a comment\n  return x * ${i} + "s".length;\n}\n` +
        "```\n\n",
    );
  return parts.join("");
}

/** Bundles the console's markdown view with a tiny driver for timing it in a page. */
async function benchScript(): Promise<string> {
  const out = await build({
    stdin: {
      contents: `
        import { createRoot } from "react-dom/client";
        import { flushSync } from "react-dom";
        import { MarkdownText } from "./markdown.tsx";
        const mount = () => { const el = document.createElement("div"); el.className = "ev assistant"; document.body.append(el); return { el, root: createRoot(el) }; };
        const paint = (el) => el.getBoundingClientRect().height;
        window.__bench = (text, step) => {
          const a = mount();
          let t = performance.now();
          flushSync(() => a.root.render(<MarkdownText text={text} />));
          paint(a.el);
          const whole = performance.now() - t;
          a.root.unmount(); a.el.remove();
          const b = mount();
          const deltas = [];
          for (let n = step; n < text.length + step; n += step) {
            t = performance.now();
            flushSync(() => b.root.render(<MarkdownText text={text.slice(0, n)} />));
            paint(b.el);
            deltas.push(performance.now() - t);
          }
          const blocks = b.el.querySelectorAll(".md > *").length;
          // The content event: the whole answer in another element, as the timeline shows it.
          const c = mount();
          t = performance.now();
          flushSync(() => c.root.render(<MarkdownText text={text} />));
          paint(c.el);
          const final = performance.now() - t;
          b.root.unmount(); b.el.remove();
          c.root.unmount(); c.el.remove();
          return { whole, deltas, blocks, final };
        };`,
      resolveDir: join(WEB, "src"),
      loader: "tsx",
    },
    bundle: true,
    write: false,
    format: "iife",
    jsx: "automatic",
    minify: true,
    define: { "process.env.NODE_ENV": '"production"' },
    logLevel: "warning",
  });
  return out.outputFiles[0]!.text;
}

let h: Harness;
let browser: Awaited<ReturnType<typeof launchChromium>>;

before(async () => {
  h = await startHarness({ codex: false });
  browser = await launchChromium();
  mkdirSync(ARTIFACTS, { recursive: true });
});

after(async () => {
  await browser?.close();
  await h?.close();
});

it("renders a 200 KB markdown answer in Chromium, whole and while it is typed (timed)", async () => {
  const p = await browser.ctx.newPage();
  await p.addStyleTag({ content: readFileSync(join(WEB, "static/console.css"), "utf8") });
  await p.addScriptTag({ content: await benchScript() });
  const text = bigAnswer(200_000);
  const step = 2_000;
  // A first run (on other text: nothing of it is kept for the measured one) warms the JIT.
  await p.evaluate(`window.__bench(${JSON.stringify(bigAnswer(20_000, "Warm-up"))}, 5000)`);
  const r = (await p.evaluate(`window.__bench(${JSON.stringify(text)}, ${step})`)) as { whole: number; deltas: number[]; blocks: number; final: number };
  const sorted = [...r.deltas].sort((a, b) => a - b);
  const median = sorted[Math.floor(sorted.length / 2)]!;
  const last10 = r.deltas.slice(-10).reduce((a, b) => a + b, 0) / 10;
  console.log(
    `markdown bench: ${(text.length / 1024).toFixed(0)} KB, ${r.blocks} elements: whole answer ${r.whole.toFixed(0)} ms; ` +
      `typed in ${r.deltas.length} deltas of ${step} chars: median ${median.toFixed(1)} ms, mean of the last 10 (near 200 KB) ${last10.toFixed(1)} ms, max ${sorted.at(-1)!.toFixed(1)} ms; ` +
      `the finished answer replacing its typed text ${r.final.toFixed(0)} ms`,
  );
  assert.ok(r.blocks > 1000, "the answer rendered");
  // Per block memoized: a delta near the end costs far less than rendering the whole answer.
  assert.ok(last10 < r.whole / 4, `a delta (${last10.toFixed(1)} ms) re-renders the growing block, not the answer (${r.whole.toFixed(0)} ms)`);
  assert.ok(r.final < r.whole / 2, `the finished answer (${r.final.toFixed(0)} ms) reuses the typed blocks (whole: ${r.whole.toFixed(0)} ms)`);
  await p.close();
});

/** Opens the console at `fragment`; collects console errors and CSP violations. */
async function openConsole(fragment: string) {
  const p = await browser.ctx.newPage();
  const errors: string[] = [];
  p.on("console", (m) => {
    if (m.type() === "error") errors.push(m.text());
  });
  p.on("pageerror", (e) => errors.push(String(e)));
  await p.addInitScript(`document.addEventListener("securitypolicyviolation", (e) =>
    (window.__csp ??= []).push(e.violatedDirective + " " + e.blockedURI));`);
  const res = await p.goto(`${h.url}/${fragment}`);
  assert.equal(res?.status(), 200);
  assert.equal(res!.headers()["content-security-policy"], CSP, "the CSP is what it was");
  const clean = async () => {
    assert.deepEqual(errors, [], "no console errors");
    assert.deepEqual(await p.evaluate("window.__csp ?? []"), [], "no CSP violations");
  };
  return { p, clean };
}

/** Waits until the session is idle after its `turns`th turn's end (counted from the start of the log). */
async function settled(p: Page, what: string, turns: number) {
  await untilPage(
    p,
    what,
    `(() => {
      const evs = [...document.querySelectorAll("[data-testid=timeline] .ev[data-kind]")];
      return document.querySelector("[data-testid=status]")?.textContent === "idle" && evs.at(-1)?.dataset.kind === "turnEnd" &&
        evs.filter((e) => e.dataset.kind === "turnEnd").length >= ${turns};
    })()`,
    60_000,
  );
}

/**
 * Waits until the `tool` call asks for permission or is over (the CLI may
 * refuse an input before asking), and denies it if it asks.
 */
async function denyIfAsked(p: Page, tool: string) {
  await untilPage(
    p,
    `the ${tool} call asking or over`,
    `!!document.querySelector("[data-testid=permission]") || ["done", "error"].includes(document.querySelector("[data-testid=tool-call][data-tool=${tool}]")?.dataset.state)`,
    60_000,
  );
  if (await p.$("[data-testid=permission]")) await p.click("[data-testid=deny]");
}

/** Sends `text` from the composer. */
async function send(p: Page, text: string) {
  await p.fill("[data-testid=input]", text);
  await p.press("[data-testid=input]", "Enter");
}

const MARKDOWN = [
  "# Plan of the change",
  "",
  "Some **bold** and *emphasis*, `inline code` and a [docs link](https://example.com/docs).",
  "",
  "- first item",
  "- second item",
  "",
  "| file | lines |",
  "|---|---|",
  "| a.rs | 12 |",
  "",
  "```rust",
  'fn main() { println!("hi"); }',
  "```",
  "",
  "<script>window.__pwned = 1</script>",
  "",
  'Inline <img src="x" onerror="window.__pwned = 2"> html.',
  "",
  "[bad link](javascript:window.__pwned=3) and [relative](foo.md)",
].join("\n");

/** What the rendered answer holds, read in the page. */
const READ_ANSWER = `(() => {
  const md = [...document.querySelectorAll("[data-testid=timeline] .ev[data-kind=content] .md")].at(-1);
  if (!md) return null;
  const links = [...md.querySelectorAll("a")].map((a) => ({ href: a.getAttribute("href"), target: a.target, rel: a.rel, text: a.textContent }));
  return {
    h1: md.querySelector("h1")?.textContent ?? "",
    strong: md.querySelector("strong")?.textContent ?? "",
    em: md.querySelector("em")?.textContent ?? "",
    inlineCode: md.querySelector("p code")?.textContent ?? "",
    items: [...md.querySelectorAll("ul > li")].map((li) => li.textContent),
    cells: [...md.querySelectorAll("table th, table td")].map((c) => c.textContent),
    code: md.querySelector("pre code")?.textContent ?? "",
    codeClass: md.querySelector("pre code")?.className ?? "",
    keywords: [...md.querySelectorAll("pre code .hljs-keyword")].map((k) => k.textContent),
    links,
    nolinks: [...md.querySelectorAll(".md-nolink")].map((s) => s.textContent),
    text: md.textContent,
    scripts: document.querySelectorAll("[data-testid=timeline] script").length,
    imgs: document.querySelectorAll("[data-testid=timeline] img").length,
    pwned: window.__pwned ?? null,
  };
})()`;

/** Every diff shown: its path, note, folded state and lines (kind and text). */
const READ_DIFFS = `[...document.querySelectorAll("[data-testid=tool-call]")].map((t) => ({
  tool: t.dataset.tool,
  state: t.dataset.state,
  diffs: [...t.querySelectorAll("[data-testid=diff]")].map((d) => ({
    path: d.dataset.path,
    folded: d.dataset.folded === "true",
    note: d.querySelector(".badge")?.textContent ?? "",
    lines: [...d.querySelectorAll(".dl")].map((l) => l.dataset.kind + ":" + l.textContent),
  })),
}))`;
type Shown = { tool: string; state: string; diffs: { path: string; folded: boolean; note: string; lines: string[] }[] }[];

it("renders an answer's markdown, inert where it must be, and file edits as diffs; dark, shortcuts, phone", async () => {
  const t: Target = { url: h.url, session: "reading-markdown" };
  const work = mkdtempSync(join(tmpdir(), "agent-harness-reading-"));
  try {
    await nodeClient(t).start({ sessionId: t.session, config: { prompt: `TEXT ${MARKDOWN}`, cwd: work } });
    const { p, clean } = await openConsole(`#/s/${t.session}`);
    await settled(p, "the markdown turn's end", 1);

    const a = (await p.evaluate(READ_ANSWER)) as Record<string, unknown> & { links: { href: string; target: string; rel: string; text: string }[] };
    assert.equal(a["h1"], "Plan of the change");
    assert.equal(a["strong"], "bold");
    assert.equal(a["em"], "emphasis");
    assert.equal(a["inlineCode"], "inline code");
    assert.deepEqual(a["items"], ["first item", "second item"]);
    assert.deepEqual(a["cells"], ["file", "lines", "a.rs", "12"]);
    assert.equal(a["code"], 'fn main() { println!("hi"); }\n');
    assert.match(String(a["codeClass"]), /hljs language-rust/);
    assert.deepEqual(a["keywords"], ["fn"], "the code block is highlighted");
    assert.deepEqual(a.links, [{ href: "https://example.com/docs", target: "_blank", rel: "noopener noreferrer", text: "docs link" }], "only the https link is a link");
    assert.deepEqual(a["nolinks"], ["bad link", "relative"], "javascript: and relative links are text");
    // Raw HTML is shown as the characters it is, and never runs.
    assert.match(String(a["text"]), /<script>window\.__pwned = 1<\/script>/);
    assert.match(String(a["text"]), /<img src="x" onerror="window\.__pwned = 2">/);
    assert.equal(a["scripts"], 0);
    assert.equal(a["imgs"], 0);
    await p.click(".md-nolink");
    assert.equal(a["pwned"], null);
    assert.equal(await p.evaluate("window.__pwned ?? null"), null, "nothing in the answer ran, clicked or not");
    await p.screenshot({ path: join(ARTIFACTS, "console-markdown.png") });

    // A code block's copy button puts its source on the clipboard.
    await browser.ctx.grantPermissions(["clipboard-read", "clipboard-write"], { origin: h.url });
    await p.click("[data-testid=timeline] .ev[data-kind=content] [data-testid=copy-code]");
    await untilPage(p, "copied", `document.querySelector("[data-testid=copy-code]")?.textContent === "copied"`);
    assert.equal(await p.evaluate("navigator.clipboard.readText()"), 'fn main() { println!("hi"); }\n');

    // Thinking: folded, and markdown too once opened.
    await send(p, "THINK **deeply** considered");
    await settled(p, "the thinking turn's end", 2);
    const thinking = (await p.evaluate(`(() => {
      const d = [...document.querySelectorAll("[data-testid=timeline] details.thinking")].at(-1);
      return d ? { open: d.open, strong: [...d.querySelectorAll(".md strong")].map((s) => s.textContent) } : null;
    })()`)) as { open: boolean; strong: string[] } | null;
    assert.ok(thinking, "a thinking block is shown");
    assert.equal(thinking.open, false, "folded by default");
    assert.ok(thinking.strong.includes("deeply"), `rendered as markdown: ${JSON.stringify(thinking)}`);

    // An Edit (of a file the CLI has not read: refused, or asked and denied): its diff.
    const edit = { file_path: join(work, "a.rs"), old_string: "fn a() {\n    1\n}\n", new_string: "fn a() {\n    2\n}\n" };
    await send(p, `TOOL Edit ${JSON.stringify(edit)}`);
    await untilPage(p, "the Edit call", `!!document.querySelector("[data-testid=tool-call][data-tool=Edit] [data-testid=diff]")`, 60_000);
    let shown = (await p.evaluate(READ_DIFFS)) as Shown;
    const editCall = shown.find((c) => c.tool === "Edit")!;
    assert.deepEqual(editCall.diffs, [
      { path: edit.file_path, folded: false, note: "", lines: ["hunk:@@", "ctx: fn a() {", "del:-    1", "add:+    2", "ctx: }"] },
    ]);
    await denyIfAsked(p, "Edit");
    await settled(p, "the Edit turn's end", 3);

    // A long MultiEdit opens folded; "show all" unfolds it.
    const long = Array.from({ length: 60 }, (_, i) => `line ${i}`).join("\n");
    const multi = { file_path: join(work, "b.txt"), edits: [{ old_string: "x", new_string: long }, { old_string: "y", new_string: "z" }] };
    await send(p, `TOOL MultiEdit ${JSON.stringify(multi)}`);
    await untilPage(p, "the MultiEdit call", `!!document.querySelector("[data-testid=tool-call][data-tool=MultiEdit] [data-testid=diff]")`, 60_000);
    shown = (await p.evaluate(READ_DIFFS)) as Shown;
    const folded = shown.find((c) => c.tool === "MultiEdit")!.diffs[0]!;
    assert.equal(folded.folded, true);
    assert.equal(folded.lines.length, 40, "folded to its first 40 lines");
    await p.click("[data-testid=tool-call][data-tool=MultiEdit] [data-testid=diff-show-all]");
    shown = (await p.evaluate(READ_DIFFS)) as Shown;
    const open = shown.find((c) => c.tool === "MultiEdit")!.diffs[0]!;
    assert.equal(open.folded, false);
    assert.equal(open.lines.length, 1 + 1 + 60 + 1 + 1 + 1, "every line: 2 hunks, 2 removed, 61 added");
    await denyIfAsked(p, "MultiEdit");
    await settled(p, "the MultiEdit turn's end", 4);

    // A Write of a new file: every line added.
    await send(p, "WRITE new.txt hello from the console");
    await p.waitForSelector("[data-testid=permission]");
    await p.click("[data-testid=allow]");
    await settled(p, "the Write turn's end", 5);
    shown = (await p.evaluate(READ_DIFFS)) as Shown;
    const write = shown.find((c) => c.tool === "Write")!;
    assert.equal(write.state, "done");
    assert.deepEqual(write.diffs, [{ path: join(work, "new.txt"), folded: false, note: "written", lines: ["add:+hello from the console"] }]);
    assert.equal(readFileSync(join(work, "new.txt"), "utf8"), "hello from the console\n");
    await p.evaluate(`document.querySelector("[data-testid=tool-call][data-tool=Edit]").scrollIntoView()`);
    await p.screenshot({ path: join(ARTIFACTS, "console-diff.png") });

    // Dark mode follows the system.
    const colors = `(() => ({
      bg: getComputedStyle(document.body).backgroundColor,
      add: getComputedStyle(document.querySelector(".dl.dl-add")).backgroundColor,
      code: getComputedStyle(document.querySelector(".md pre")).backgroundColor,
    }))()`;
    await p.emulateMedia({ colorScheme: "light" });
    const light = (await p.evaluate(colors)) as Record<string, string>;
    await p.emulateMedia({ colorScheme: "dark" });
    const dark = (await p.evaluate(colors)) as Record<string, string>;
    assert.equal(light["bg"], "rgb(246, 247, 249)");
    assert.equal(dark["bg"], "rgb(17, 20, 24)");
    for (const k of ["add", "code"]) assert.notEqual(dark[k], light[k], `${k} follows the scheme`);
    await p.evaluate(`document.querySelector(".ev[data-kind=content] .md").scrollIntoView()`);
    await p.screenshot({ path: join(ARTIFACTS, "console-dark.png") });

    // Shortcuts: ? lists them, Esc closes the list (and stops nothing), n opens the start form, j/k move, Enter opens.
    await p.click("[data-testid=timeline]");
    await p.keyboard.press("?");
    await p.waitForSelector("[data-testid=help]");
    assert.match((await p.textContent("[data-testid=help]")) ?? "", /focus|search/);
    await p.keyboard.press("Escape");
    await untilPage(p, "the help closed", `!document.querySelector("[data-testid=help]")`);
    await p.keyboard.press("/");
    assert.equal(await p.evaluate("document.activeElement?.dataset.testid"), "input", "/ in a session: the message box");
    await p.locator("[data-testid=input]").blur();
    await p.keyboard.press("n");
    await untilPage(p, "the start form focused", `document.activeElement?.dataset.testid === "start-prompt"`);
    assert.equal(await p.evaluate("location.hash"), "#/");
    await p.locator("[data-testid=start-prompt]").blur();
    await p.waitForSelector(`[data-testid=session-row][data-session="${t.session}"]`);
    await p.keyboard.press("j");
    const focused = await p.evaluate(`document.activeElement?.closest("[data-testid=session-row]")?.dataset.session ?? ""`);
    assert.ok(focused !== "", "j selects a session row");
    await p.keyboard.press("k");
    await p.keyboard.press("Enter");
    await untilPage(p, "the session opened", `location.hash === ${JSON.stringify(`#/s/${focused}`)}`);
    await p.emulateMedia({ colorScheme: "light" });
    await clean();
    await p.close();

    // A phone: nothing wider than the screen, the answer and the diffs readable.
    const phone = await openConsole(`#/s/${t.session}`);
    await phone.p.setViewportSize({ width: 375, height: 760 });
    await settled(phone.p, "the session at phone width", 1);
    const overflow = await phone.p.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth");
    assert.equal(overflow, 0, "nothing wider than the phone's screen");
    await phone.p.evaluate(`document.querySelector("[data-testid=tool-call][data-tool=Edit]").scrollIntoView()`);
    await phone.p.screenshot({ path: join(ARTIFACTS, "console-phone.png") });
    await phone.clean();
    await phone.p.close();
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
});
