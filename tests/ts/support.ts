// Test support: the real agent-harness server (release binary) running the
// real claude CLI against the scripted fake Messages API, the real codex CLI
// against the Responses API the same fake serves and the real Gemini CLI (the
// ACP agent "gemini") against its Gemini API, all on loopback.
// Shared by tests/ts and tests/browser.

import { spawn, type ChildProcess } from "node:child_process";
import { createHash } from "node:crypto";
import { createWriteStream, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

/** The repository root. */
export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "../..");

/** A binary from an env var (set by .tools/env.sh), else the first existing default. */
function bin(env: string, ...defaults: string[]): string {
  const fromEnv = process.env[env];
  if (fromEnv) return fromEnv;
  const found = defaults.find((p) => existsSync(p));
  if (!found) throw new Error(`${env} not set and none of ${defaults.join(", ")} exists`);
  return found;
}

/** The release server binary (`cargo build --release -p agent-harness-server`). */
export const SERVER_BIN = () => bin("AGENT_HARNESS_BIN", join(ROOT, "target/release/agent-harness"));
/** The fake Messages API (`cargo build --release -p agent-harness-fake-api`). */
export const FAKE_API_BIN = () => bin("FAKE_MESSAGES_API_BIN", join(ROOT, "target/release/fake-messages-api"));
/** The real claude CLI from tests/tools (the native binary when present). */
export const CLAUDE_BIN = () =>
  bin(
    "CLAUDE_BIN",
    join(ROOT, "tests/tools/node_modules/@anthropic-ai/claude-code-linux-x64/claude"),
    join(ROOT, "tests/tools/node_modules/@anthropic-ai/claude-code-linux-arm64/claude"),
    join(ROOT, "tests/tools/node_modules/.bin/claude"),
  );

/**
 * The real codex CLI from tests/tools (the platform package's native binary,
 * else the npm bin). Missing, every harness fails to start: each client must
 * see Codex sessions.
 */
export const CODEX_BIN = () =>
  bin(
    "CODEX_BIN",
    join(ROOT, "tests/tools/node_modules/@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex"),
    join(ROOT, "tests/tools/node_modules/@openai/codex-linux-arm64/vendor/aarch64-unknown-linux-musl/bin/codex"),
    join(ROOT, "tests/tools/node_modules/.bin/codex"),
  );

/**
 * The real Gemini CLI from tests/tools. Missing, every harness fails to
 * start: each client must see ACP sessions.
 */
export const GEMINI_BIN = () => bin("GEMINI_BIN", join(ROOT, "tests/tools/node_modules/.bin/gemini"));

/** A free loopback port (bound and released; the server binds it next). */
export async function freePort(): Promise<number> {
  return new Promise((res, rej) => {
    const s = createServer();
    s.once("error", rej);
    s.listen(0, "127.0.0.1", () => {
      const addr = s.address();
      s.close(() => (typeof addr === "object" && addr ? res(addr.port) : rej(new Error("no port"))));
    });
  });
}

/** Resolves when `child` has exited (at once if it already has). */
function exited(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((res) => child.once("exit", () => res()));
}

/** Polls until a TCP connect to 127.0.0.1:port succeeds. */
async function waitForPort(port: number, child: ChildProcess, timeoutMs: number): Promise<void> {
  const { connect } = await import("node:net");
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (child.exitCode !== null || child.signalCode !== null) {
      throw new Error(`server exited (${child.exitCode ?? child.signalCode}) before listening`);
    }
    const ok = await new Promise<boolean>((res) => {
      const sock = connect(port, "127.0.0.1");
      sock.once("connect", () => {
        sock.destroy();
        res(true);
      });
      sock.once("error", () => res(false));
    });
    if (ok) return;
    if (Date.now() > deadline) throw new Error(`server did not listen on ${port} within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** The server, the fake API and their temp dirs, for one test file. */
export interface Harness {
  /** The server's base URL, e.g. http://127.0.0.1:PORT. */
  readonly url: string;
  /** The server's port (stable across restarts). */
  readonly port: number;
  /** The fake API's URL (ANTHROPIC_BASE_URL of the CLI). */
  readonly fakeApiUrl: string;
  /** The temp dir holding data/, home/ and logs. */
  readonly dir: string;
  /** SIGKILLs the server (its CLI children are left for recovery to reap). */
  kill(): Promise<void>;
  /** Starts the server again on the same port and data dir. */
  start(): Promise<void>;
  /**
   * Every Messages API request the CLI made so far, oldest first (only with
   * `recordApiRequests`; the fake API's FAKE_MESSAGES_API_DUMP_DIR).
   */
  apiRequests(): ApiRequest[];
  /** Stops everything and removes the temp dir. */
  close(): Promise<void>;
}

/** One request to the fake Messages API, as it dumped it. */
export interface ApiRequest {
  /** E.g. /v1/messages. */
  path: string;
  /** What the script made of it (TEXT, -, ...). */
  scenario: string;
  /** The JSON body (model, messages, thinking, ...). */
  body: { model?: string; messages?: unknown[]; [k: string]: unknown };
}

/** Options of {@link startHarness}. */
export interface HarnessOptions {
  /** The server's --adapter (default interactive). */
  adapter?: string;
  /** More `serve` flags, after the defaults (e.g. --auth-token-file, --allowed-origin). */
  serverArgs?: string[];
  /** Have the fake API dump every request, for {@link Harness.apiRequests}. */
  recordApiRequests?: boolean;
  /**
   * Enable Codex (--codex-bin, --codex-home); default true. False: a server
   * on a machine without codex (no flag, and no directory of PATH holding
   * one for its discovery to find).
   */
  codex?: boolean;
}

/** Starts the fake API and the server with the interactive adapter. */
export async function startHarness(opts: HarnessOptions = {}): Promise<Harness> {
  const dir = mkdtempSync(join(tmpdir(), "agent-harness-ts-"));
  const home = join(dir, "home");
  const dataDir = join(dir, "data");
  mkdirSync(home);
  const log = createWriteStream(join(dir, "server.log"), { flags: "a" });
  const dumpDir = join(dir, "api-requests");
  if (opts.recordApiRequests) mkdirSync(dumpDir);
  // Written by the fake (--codex-home): its config.toml points Codex at the
  // fake's Responses API.
  const codexHome = join(dir, "codex-home");
  const codexBin = CODEX_BIN();
  const geminiBin = GEMINI_BIN();

  // --gemini-home: a HOME whose settings point Gemini at the fake's Gemini
  // API; the fake prints the environment Gemini needs as its second line.
  const fake = spawn(FAKE_API_BIN(), ["--port", "0", "--codex-home", codexHome, "--gemini-home", join(dir, "gemini-home")], {
    stdio: ["ignore", "pipe", "pipe"],
    env: opts.recordApiRequests ? { ...process.env, FAKE_MESSAGES_API_DUMP_DIR: dumpDir } : process.env,
  });
  fake.stderr!.pipe(createWriteStream(join(dir, "fake-api.log")));
  const [fakeApiUrl, geminiEnv] = await new Promise<[string, string]>((res, rej) => {
    let buf = "";
    const timer = setTimeout(() => rej(new Error("fake-messages-api did not print its address and gemini-env")), 15_000);
    fake.once("exit", (code) => rej(new Error(`fake-messages-api exited ${code}`)));
    fake.stdout!.on("data", (d: Buffer) => {
      buf += d.toString();
      const m = /listening (http:\/\/\S+)\n/.exec(buf);
      const g = /gemini-env (.*)\n/.exec(buf);
      if (m && g) {
        clearTimeout(timer);
        res([m[1]!, g[1]!]);
      }
    });
  });

  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  let server: ChildProcess | undefined;

  const start = async () => {
    const child = spawn(
      SERVER_BIN(),
      [
        "serve",
        "--listen",
        `127.0.0.1:${port}`,
        "--data-dir",
        dataDir,
        "--adapter",
        opts.adapter ?? "interactive",
        "--claude-bin",
        CLAUDE_BIN(),
        ...(opts.codex === false ? [] : ["--codex-bin", codexBin, "--codex-home", codexHome]),
        "--acp-agent",
        `gemini=env ${geminiEnv} ${geminiBin} --acp`,
        ...pgStoreArgs(dataDir),
        ...(opts.serverArgs ?? []),
      ],
      {
        stdio: ["ignore", "pipe", "pipe"],
        env: {
          PATH: opts.codex === false ? pathWithoutCodex() : (process.env.PATH ?? "/usr/bin:/bin"),
          HOME: home,
          CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1",
          ANTHROPIC_API_KEY: "test",
          ANTHROPIC_BASE_URL: fakeApiUrl,
          // The key variable the fake's Codex provider names (any value is accepted).
          FAKE_API_KEY: "test",
          RUST_LOG: process.env.RUST_LOG ?? "info",
        },
      },
    );
    child.stdout!.pipe(log, { end: false });
    child.stderr!.pipe(log, { end: false });
    server = child;
    await waitForPort(port, child, 30_000);
  };

  const kill = async () => {
    if (!server) return;
    const s = server;
    server = undefined;
    s.kill("SIGKILL");
    await exited(s);
  };

  await start();
  return {
    url,
    port,
    fakeApiUrl,
    dir,
    kill,
    start,
    apiRequests() {
      if (!opts.recordApiRequests) throw new Error("startHarness({ recordApiRequests: true }) to see API requests");
      // Files are <port>-<n>.json, n counting up from 1.
      const n = (f: string) => Number(/-(\d+)\.json$/.exec(f)?.[1] ?? 0);
      return readdirSync(dumpDir)
        .filter((f) => f.endsWith(".json"))
        .sort((a, b) => n(a) - n(b))
        .map((f) => {
          const doc = JSON.parse(readFileSync(join(dumpDir, f), "utf8")) as { path: string; scenario: string; body: unknown };
          const body = typeof doc.body === "string" ? (JSON.parse(doc.body || "{}") as ApiRequest["body"]) : (doc.body as ApiRequest["body"]);
          return { path: doc.path, scenario: doc.scenario, body };
        });
    },
    async close() {
      if (server) {
        const s = server;
        server = undefined;
        s.kill("SIGTERM");
        const t = setTimeout(() => s.kill("SIGKILL"), 10_000);
        await exited(s);
        clearTimeout(t);
      }
      fake.kill("SIGTERM");
      await exited(fake);
      log.end();
      if (!process.env.KEEP_TEST_DIRS) rmSync(dir, { recursive: true, force: true });
      else console.error(`kept ${dir}`);
    },
  };
}

/** This PATH without the directories that hold a `codex`. */
function pathWithoutCodex(): string {
  const dirs = (process.env.PATH ?? "/usr/bin:/bin").split(":");
  return dirs.filter((d) => d !== "" && !existsSync(join(d, "codex"))).join(":");
}

/** Resolves with the first value of `get()` that passes `pred`, polling. */
export async function eventually<T>(
  what: string,
  get: () => T,
  pred: (v: T) => boolean,
  timeoutMs = 30_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = get();
    if (pred(v)) return v;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

/**
 * `--store-url` of the server whose data dir is `dataDir` when the suite runs
 * on PostgreSQL (tests/run-all.sh sets AGENT_HARNESS_TEST_PG_URL): a schema of
 * its own in the shared database, named after the data dir, so a restarted
 * server finds its log again.
 */
function pgStoreArgs(dataDir: string): string[] {
  const base = process.env.AGENT_HARNESS_TEST_PG_URL;
  if (!base) return [];
  const schema = "t_" + createHash("sha1").update(dataDir).digest("hex").slice(0, 16);
  return ["--store-url", `${base}?options=-c%20search_path%3D${schema}`];
}
