// Shared by the browser suites (browser.test.ts: the proof page;
// console.test.ts: the built-in web console): headless Chromium with a
// throwaway profile, and native gRPC clients that read the server's own
// view of a session to check the page against.

import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { chromium, type BrowserContext } from "playwright-core";
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
