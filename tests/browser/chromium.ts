// Shared by the browser suites (browser.test.ts: the proof page;
// console.test.ts: the built-in web console): headless Chromium with a
// throwaway profile, and native gRPC clients that read the server's own
// view of a session to check the page against.

import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { chromium, type BrowserContext, type Page } from "playwright-core";
import { createClient, type Interceptor } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { SessionService, type Event } from "@agent-harness/client/protocol";

/** Debian's chromium unless CHROMIUM_BIN names another. */
export const CHROMIUM = process.env.CHROMIUM_BIN ?? "/usr/bin/chromium";

/** Headless Chromium on a fresh profile; `close()` also removes the profile. */
export async function launchChromium(opts: { hostRules?: string; viewport?: { width: number; height: number } } = {}) {
  const profile = mkdtempSync(join(tmpdir(), "agent-harness-chromium-"));
  const ctx: BrowserContext = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    viewport: opts.viewport ?? { width: 1000, height: 760 },
    args: [
      "--headless",
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
      ...(opts.hostRules ? [`--host-resolver-rules=${opts.hostRules}`] : []),
    ],
  });
  return {
    ctx,
    async close() {
      await ctx.close();
      rmSync(profile, { recursive: true, force: true });
    },
  };
}

/** A server, one of its sessions, and the token its RPCs need (if any). */
export interface Target {
  url: string;
  session: string;
  token?: string;
}

/** Adds `authorization: Bearer TOKEN` to every call. */
export const bearer =
  (token: string): Interceptor =>
  (next) =>
  (req) => {
    req.header.set("authorization", `Bearer ${token}`);
    return next(req);
  };

/** A native gRPC (HTTP/2, no Origin) client of the target's server. */
export function nodeClient(t: Pick<Target, "url" | "token">) {
  return createClient(
    SessionService,
    createGrpcTransport({ baseUrl: t.url, interceptors: t.token ? [bearer(t.token)] : [] }),
  );
}

/** The target session's whole log, as the server has it. */
export async function history(t: Target): Promise<Event[]> {
  const res = await nodeClient(t).history({ sessionId: t.session, beforeSeq: 0n, limit: 1000 });
  assert.equal(res.hasMore, false);
  return res.events;
}

/**
 * Reads the page with `read` (an expression: a string, since tsx would wrap
 * a function in helpers that do not exist in the page) until `pred` holds;
 * the error says what the page showed last.
 */
export async function untilView<V>(
  p: Page,
  read: string,
  what: string,
  pred: (v: V) => boolean,
  timeoutMs = 30_000,
): Promise<V> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = (await p.evaluate(read)) as V;
    if (pred(v)) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}; page shows ${JSON.stringify(v)}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/**
 * Polls the page until the expression `expr` is truthy. Not
 * page.waitForFunction: that evaluates strings with eval inside the page,
 * which a strict Content-Security-Policy (the console's) forbids.
 */
export async function untilPage(p: Page, what: string, expr: string, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await p.evaluate(expr))) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

/** The text `SLOW n` makes the fake model write. */
export const ticks = (n: number) => Array.from({ length: n }, (_, i) => `tick ${i} `).join("");

/** One state of the page as the typing recorder saw it. */
export interface Typed {
  /** The partial text shown (data-testid=partial). */
  partial: string;
  /** The text of the content event in the events list; null while there is none. */
  content: string | null;
}

/**
 * An init script (it runs again on every reload): a MutationObserver that
 * records every DOM state whose partial text (data-testid=partial) or
 * content event (the first `contentSelector`, its `.text`) differs from the
 * last one, so no state the page rendered is missed, however brief.
 */
export const typingRecorder = (contentSelector: string) => `(() => {
  const rec = (window.__typed = []);
  const read = () => {
    const partial = document.querySelector("[data-testid=partial]")?.textContent ?? "";
    const li = document.querySelector(${JSON.stringify(contentSelector)});
    const content = li ? (li.querySelector(".text")?.textContent ?? "") : null;
    const last = rec[rec.length - 1];
    if (!last || last.partial !== partial || last.content !== content) rec.push({ partial, content });
  };
  new MutationObserver(read).observe(document, { subtree: true, childList: true, characterData: true });
})()`;

/** The states recorded since the last load. */
export async function typed(p: Page): Promise<Typed[]> {
  return (await p.evaluate("window.__typed ?? []")) as Typed[];
}

/** Waits until the states recorded since the last load pass `pred` (a page-side expression over `typed`). */
export async function untilTyped(p: Page, what: string, pred: string, timeoutMs = 30_000): Promise<Typed[]> {
  try {
    await untilPage(p, what, `((typed) => ${pred})(window.__typed ?? [])`, timeoutMs);
  } catch (err) {
    throw new Error(`${String(err)}; recorded ${JSON.stringify(await typed(p))}`);
  }
  return typed(p);
}
