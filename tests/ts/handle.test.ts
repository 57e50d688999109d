// The session helper's derived state, without a server: a scripted
// SessionService client feeds SessionHandle streams and History pages, and
// every published snapshot must carry exactly what deriveAll gives over its
// events, with the incremental Fold applying each streamed event once (a
// refold only on reset, History prepends and injects in the middle). And
// live typing: deltas folded into `partial`, dropped by a new stream.

import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, describe, it } from "node:test";
import { clone, create, fromJson, type MessageInitShape } from "@bufbuild/protobuf";
import {
  DeltaBlockType,
  EMPTY_PARTIAL,
  EventSchema,
  Fold,
  HistoryResponseSchema,
  RunEndReason,
  SubscribeResponseSchema,
  deriveAll,
  partialMainText,
  unrecordedNote,
  unrecordedText,
  type Event,
  type SubscribeResponse,
} from "@agent-harness/client/protocol";
import { Code, ConnectError } from "@connectrpc/connect";
import {
  SESSION_HEADER,
  SessionHandle,
  sessionRouting,
  newIdempotencyKey,
  type SessionServiceClient,
  type SessionSnapshot,
} from "@agent-harness/client/client";
import { ROOT } from "./support.ts";

/** Every vector's events, one after another, renumbered 1..n: a long log with every kind of change. */
function allVectorEvents(): Event[] {
  const dir = join(ROOT, "tests/vectors");
  const out: Event[] = [];
  for (const f of readdirSync(dir).filter((f) => f.endsWith(".json")).sort()) {
    const v = JSON.parse(readFileSync(join(dir, f), "utf8")) as { events: unknown[] };
    for (const j of v.events) {
      const e = clone(EventSchema, fromJson(EventSchema, j as never));
      e.seq = BigInt(out.length + 1);
      e.sessionId = "s";
      out.push(e);
    }
  }
  return out;
}
const LOG = allVectorEvents();

/** A stream the test writes to; ends (as aborted) when the handle aborts it. */
class Stream implements AsyncIterable<SubscribeResponse> {
  private queue: SubscribeResponse[] = [];
  private wake: (() => void) | undefined;
  private failure: Error | undefined;
  constructor(signal: AbortSignal | undefined) {
    signal?.addEventListener("abort", () => this.fail(new Error("aborted")));
  }
  send(kind: MessageInitShape<typeof SubscribeResponseSchema>["kind"]): void {
    this.queue.push(create(SubscribeResponseSchema, { kind }));
    this.wake?.();
  }
  replay(reset = false, fromSeq = 0n): void {
    this.send({ case: "replay", value: { reset, fromSeq } });
  }
  event(e: Event): void {
    this.send({ case: "event", value: e });
  }
  caughtUp(): void {
    this.send({ case: "caughtUp", value: {} });
  }
  delta(messageId: string, fragment: string, snapshot = false): void {
    this.send({
      case: "delta",
      value: { runId: "run-1", messageId, blockType: DeltaBlockType.TEXT, fragment, snapshot },
    });
  }
  fail(err: Error): void {
    this.failure = err;
    this.wake?.();
  }
  async *[Symbol.asyncIterator](): AsyncIterator<SubscribeResponse> {
    for (;;) {
      if (this.failure) throw this.failure;
      const next = this.queue.shift();
      if (next) {
        yield next;
        continue;
      }
      await new Promise<void>((r) => (this.wake = r));
      this.wake = undefined;
    }
  }
}

/** A client whose Subscribe streams the test drives and whose History serves `log`. */
function scriptedClient(log: Event[]) {
  const streams: { afterSeq: bigint; includeDeltas: boolean; stream: Stream }[] = [];
  const client = {
    subscribe(req: { afterSeq?: bigint; includeDeltas?: boolean }, opts?: { signal?: AbortSignal }) {
      const stream = new Stream(opts?.signal);
      streams.push({ afterSeq: req.afterSeq ?? 0n, includeDeltas: req.includeDeltas ?? false, stream });
      return stream;
    },
    async history(req: { beforeSeq?: bigint; limit?: number }) {
      const before = req.beforeSeq || BigInt(log.length + 1);
      const older = log.filter((e) => e.seq < before);
      const page = older.slice(Math.max(0, older.length - (req.limit ?? 50)));
      return create(HistoryResponseSchema, { events: page, hasMore: page.length < older.length });
    },
  } as unknown as SessionServiceClient;
  return { client, streams };
}

/**
 * Counts Fold.apply calls made by the handle (its fold is the class the
 * protocol entry exports); the test's own deriveAll calls are not counted.
 */
let applied = 0;
let counting = true;
/** Every handle opened by the current test, closed after it. */
const handles: SessionHandle[] = [];
const realApply = Fold.prototype.apply;
beforeEach(() => {
  applied = 0;
  Fold.prototype.apply = function (this: Fold, e: Event) {
    if (counting) applied++;
    realApply.call(this, e);
  };
});
afterEach(() => {
  Fold.prototype.apply = realApply;
  for (const h of handles.splice(0)) h.close();
});

/** A handle and every snapshot it publishes; `next()` waits for the next one. */
function open(client: SessionServiceClient, autoConnect = true, includeDeltas?: boolean) {
  const handle = new SessionHandle(client, "s", {
    autoConnect,
    includeDeltas,
    idleTimeoutMs: 0,
    backoff: { initialMs: 5, maxMs: 20 },
  });
  handles.push(handle);
  const seen: SessionSnapshot[] = [];
  let waiter: (() => void) | undefined;
  handle.subscribe((s) => {
    seen.push(s);
    waiter?.();
  });
  const next = () => new Promise<SessionSnapshot>((r) => (waiter = () => r(handle.getSnapshot())));
  const until = async (pred: (s: SessionSnapshot) => boolean) => {
    let s = handle.getSnapshot();
    while (!pred(s)) s = await next();
    return s;
  };
  return { handle, seen, next, until };
}

function seqs(events: readonly Event[]): bigint[] {
  return events.map((e) => e.seq);
}

/** The snapshot's derived state is what deriveAll gives over its events, and its flat fields agree. */
function assertDerived(s: SessionSnapshot, ctx: string): void {
  counting = false;
  const want = deriveAll(s.events);
  counting = true;
  assert.deepEqual(s.derived, want, `${ctx}: derived`);
  assert.equal(s.status, want.status, ctx);
  assert.equal(s.processAlive, want.processAlive, ctx);
  assert.deepEqual(s.usage, want.usage, ctx);
  assert.deepEqual(s.activity, want.activity, ctx);
  assert.equal(s.usage, s.derived.usage, ctx);
  assert.equal(s.activity, s.derived.activity, ctx);
  assert.equal(s.settings, s.derived.settings, ctx);
}

describe("SessionHandle keeps its derived state with a Fold", () => {
  it("applies each live event once; every snapshot equals deriveAll and is a new object", async () => {
    const { client, streams } = scriptedClient(LOG);
    const { handle, next, until } = open(client);
    await until(() => streams.length === 1);
    const { stream } = streams[0]!;
    stream.replay();
    stream.caughtUp();
    let prev = await until((s) => s.hydrationPhase === "ready");
    assertDerived(prev, "empty");
    assert.equal(prev.activity.label, "Idle");
    let usageKept = 0;
    for (const e of LOG) {
      const prevEvents = prev.events;
      const prevLen = prevEvents.length;
      stream.event(e);
      const s = await next();
      const ctx = `after seq ${e.seq}`;
      assert.notEqual(s, prev, `${ctx}: a new snapshot`);
      assert.notEqual(s.events, prevEvents, `${ctx}: a new events array`);
      assert.equal(prevEvents.length, prevLen, `${ctx}: the previous snapshot's events did not grow`);
      assert.equal(s.events.at(-1), e, ctx);
      assertDerived(s, ctx);
      if (s.usage === prev.usage) usageKept++;
      else assert.notDeepEqual(s.usage, prev.usage, `${ctx}: usage changed identity without changing value`);
      prev = s;
    }
    assert.equal(applied, LOG.length, "one Fold.apply per streamed event, no refold");
    assert.ok(usageKept > LOG.length / 2, `usage kept its identity while unchanged (${usageKept}/${LOG.length})`);
    handle.close();
  });

  it("a long replay while hydrating costs one apply per event and few snapshots", async () => {
    const { client, streams } = scriptedClient(LOG);
    const { handle, seen, until } = open(client);
    await until(() => streams.length === 1);
    const { stream } = streams[0]!;
    stream.replay();
    for (const e of LOG) stream.event(e);
    stream.caughtUp();
    const s = await until((s) => s.hydrationPhase === "ready");
    assert.deepEqual(seqs(s.events), seqs(LOG));
    assertDerived(s, "after replay");
    assert.equal(applied, LOG.length);
    assert.ok(seen.length < LOG.length / 10, `${seen.length} snapshots for ${LOG.length} events`);
    for (const snap of seen) assertDerived(snap, `snapshot of ${snap.events.length}`);
    handle.close();
  });

  it("ReplayStart.reset starts a new fold over the replayed tail", async () => {
    const { client, streams } = scriptedClient(LOG);
    const { handle, until } = open(client);
    await until(() => streams.length === 1);
    const first = streams[0]!.stream;
    first.replay();
    for (const e of LOG.slice(0, 300)) first.event(e);
    first.caughtUp();
    await until((s) => s.hydrationPhase === "ready" && s.events.length === 300);
    handle.reconnect();
    await until(() => streams.length === 2);
    assert.equal(streams[1]!.afterSeq, 300n);
    const second = streams[1]!.stream;
    const tail = LOG.slice(200, 400);
    second.replay(true, 200n);
    for (const e of tail) second.event(e);
    second.caughtUp();
    const s = await until((s) => s.lastSeq === 400n && s.connected);
    assert.deepEqual(seqs(s.events), seqs(tail));
    assertDerived(s, "after reset");
    // The reset replaced the fold: the replayed tail was applied once, nothing refolded.
    assert.equal(applied, 300 + tail.length);
    handle.close();
  });

  it("History pages prepended and events injected in the middle refold, then appends apply again", async () => {
    const { client, streams } = scriptedClient(LOG);
    const { handle, until } = open(client, false);
    handle.injectEvent(LOG[99]!);
    assert.equal(applied, 1);
    await handle.fetchHistory({ limit: 40 });
    let s = handle.getSnapshot();
    assert.deepEqual(seqs(s.events), seqs(LOG.slice(59, 100)));
    assertDerived(s, "after a page");
    assert.equal(applied, 1 + 41, "one refold of the list after the page");
    while ((await handle.fetchHistory({ limit: 40 })).hasMore);
    s = handle.getSnapshot();
    assert.deepEqual(seqs(s.events), seqs(LOG.slice(0, 100)));
    assertDerived(s, "after every page");
    assert.equal(s.hasMoreHistory, false);

    // An inject in the middle of a hole refolds too (the list stays in seq order).
    const { handle: h2, until: until2 } = open(client, false);
    h2.injectEvent(LOG[9]!);
    h2.injectEvent(LOG[19]!);
    h2.injectEvent(LOG[14]!);
    const s2 = await until2((s) => s.events.length === 3);
    assert.deepEqual(seqs(s2.events), [10n, 15n, 20n]);
    assertDerived(s2, "after an inject in the middle");
    h2.close();

    // Appends after the refold go through the fold one at a time again.
    applied = 0;
    handle.reconnect();
    await until(() => streams.length === 1);
    assert.equal(streams[0]!.afterSeq, 100n);
    const stream = streams[0]!.stream;
    stream.replay();
    stream.caughtUp();
    for (const e of LOG.slice(100, 150)) stream.event(e);
    s = await until((s) => s.lastSeq === 150n);
    assert.deepEqual(seqs(s.events), seqs(LOG.slice(0, 150)));
    assertDerived(s, "appends after the refold");
    assert.equal(applied, 50);
    handle.close();
  });
});

describe("SessionHandle actions are retry-safe", () => {
  /** A client whose action calls are recorded; the n-th call fails with `failures[n]` when set. */
  function flakyClient(failures: (Code | undefined)[]) {
    const calls: { rpc: string; key: string; req: Record<string, unknown> }[] = [];
    const answer = (rpc: string, req: { idempotencyKey?: string }, ok: unknown) => {
      calls.push({ rpc, key: req.idempotencyKey ?? "", req: req as Record<string, unknown> });
      const code = failures.shift();
      if (code !== undefined) return Promise.reject(new ConnectError("injected", code));
      return Promise.resolve(ok);
    };
    const client = {
      start: (req: { idempotencyKey?: string }) => answer("start", req, { runId: "r1", processId: "p" }),
      send: (req: { idempotencyKey?: string }) => answer("send", req, { runId: "r1" }),
      stop: (req: { idempotencyKey?: string }) => answer("stop", req, { stopping: true }),
      respondPermission: (req: { idempotencyKey?: string }) => answer("respondPermission", req, {}),
      setModel: (req: { idempotencyKey?: string }) => answer("setModel", req, { applied: 1, seq: 7n }),
      setPermissionMode: (req: { idempotencyKey?: string }) => answer("setPermissionMode", req, { applied: 2, seq: 8n }),
      setMaxThinkingTokens: (req: { idempotencyKey?: string }) => answer("setMaxThinkingTokens", req, { applied: 1, seq: 9n }),
      rewindFiles: (req: { idempotencyKey?: string }) =>
        answer("rewindFiles", req, { filesChanged: ["a.txt"], insertions: 1n, deletions: 0n, seq: 0n }),
    } as unknown as SessionServiceClient;
    return { client, calls };
  }

  function handleOn(client: SessionServiceClient, actionRetries?: number) {
    const handle = new SessionHandle(client, "s", {
      autoConnect: false,
      backoff: { initialMs: 1, maxMs: 5 },
      actionRetries,
    });
    handles.push(handle);
    return handle;
  }

  it("one key per logical call, the same key on each retry of a call lost in transit", async () => {
    const { client, calls } = flakyClient([Code.Unavailable, Code.Unknown]);
    const handle = handleOn(client);
    assert.equal((await handle.send("hi")).runId, "r1");
    await handle.send("hi");
    assert.equal(calls.length, 4, "three attempts, then one");
    const [a, b, c, d] = calls.map((x) => x.key);
    assert.match(a!, /^[0-9a-f]{32}$/);
    assert.equal(b, a);
    assert.equal(c, a);
    assert.notEqual(d, a, "a new logical call, a new key");

    calls.length = 0;
    const lostOnce = [Code.DeadlineExceeded, undefined, Code.Unavailable, undefined, Code.Unknown, undefined];
    const { client: c2, calls: calls2 } = flakyClient(lostOnce);
    const h2 = handleOn(c2);
    await h2.start({ prompt: "x" });
    await h2.stop();
    await h2.respondPermission({ requestId: "r", allow: true });
    await h2.send("mine", [], { idempotencyKey: "app-key-1" });
    assert.deepEqual(
      calls2.map((x) => x.rpc),
      ["start", "start", "stop", "stop", "respondPermission", "respondPermission", "send"],
    );
    for (let i = 0; i < 6; i += 2) assert.equal(calls2[i]!.key, calls2[i + 1]!.key, calls2[i]!.rpc);
    assert.equal(new Set(calls2.slice(0, 6).map((x) => x.key)).size, 3, "each call its own key");
    assert.equal(calls2[6]!.key, "app-key-1");
    assert.notEqual(newIdempotencyKey(), newIdempotencyKey());
  });

  it("setModel, setPermissionMode, setMaxThinkingTokens and rewindFiles: their request, one key reused on a retry", async () => {
    const lostOnce = [Code.Unavailable, undefined, Code.Unknown, undefined, Code.DeadlineExceeded, undefined, Code.Unavailable];
    const { client, calls } = flakyClient(lostOnce);
    const handle = handleOn(client);
    assert.equal((await handle.setModel("claude-haiku-4-5")).seq, 7n);
    assert.equal((await handle.setPermissionMode("plan")).seq, 8n);
    assert.equal((await handle.setMaxThinkingTokens(2048)).seq, 9n);
    assert.deepEqual((await handle.rewindFiles(5n, { dryRun: true })).filesChanged, ["a.txt"]);
    await handle.setMaxThinkingTokens(undefined);
    await handle.rewindFiles(5n, { idempotencyKey: "app-key-2" });
    assert.deepEqual(
      calls.map((c) => c.rpc),
      [
        "setModel",
        "setModel",
        "setPermissionMode",
        "setPermissionMode",
        "setMaxThinkingTokens",
        "setMaxThinkingTokens",
        "rewindFiles",
        "rewindFiles",
        "setMaxThinkingTokens",
        "rewindFiles",
      ],
    );
    for (let i = 0; i < 8; i += 2) {
      assert.match(calls[i]!.key, /^[0-9a-f]{32}$/, calls[i]!.rpc);
      assert.equal(calls[i + 1]!.key, calls[i]!.key, `${calls[i]!.rpc}: the retry reuses the key`);
      assert.deepEqual(calls[i + 1]!.req, calls[i]!.req, `${calls[i]!.rpc}: the retry is the same request`);
    }
    assert.equal(new Set(calls.slice(0, 9).map((c) => c.key)).size, 5, "each logical call its own key");
    const req = calls.map((c) => {
      const { idempotencyKey: _k, ...rest } = c.req;
      return rest;
    });
    assert.deepEqual(req[0], { sessionId: "s", model: "claude-haiku-4-5" });
    assert.deepEqual(req[2], { sessionId: "s", mode: "plan" });
    assert.deepEqual(req[4], { sessionId: "s", maxThinkingTokens: 2048 });
    assert.deepEqual(req[6], { sessionId: "s", toSeq: 5n, dryRun: true });
    assert.deepEqual(req[8], { sessionId: "s", maxThinkingTokens: undefined }, "undefined: back to the CLI's default");
    assert.deepEqual(req[9], { sessionId: "s", toSeq: 5n, dryRun: false });
    assert.equal(calls[9]!.key, "app-key-2");
  });

  it("start passes the permission mode, the thinking budget and a fork through", async () => {
    const { client, calls } = flakyClient([]);
    const handle = handleOn(client);
    await handle.start({ prompt: "x", permissionMode: "plan", maxThinkingTokens: 0, fork: { fromSessionId: "src", atSeq: 4n } });
    await handle.start({ fork: { fromSessionId: "src" } });
    await handle.start();
    const configs = calls.map((c) => c.req.config as Record<string, unknown>);
    assert.equal(configs[0]!.permissionMode, "plan");
    assert.equal(configs[0]!.maxThinkingTokens, 0);
    assert.deepEqual(configs[0]!.fork, { fromSessionId: "src", atSeq: 4n });
    assert.deepEqual(configs[1]!.fork, { fromSessionId: "src", atSeq: 0n }, "no atSeq: the whole conversation");
    assert.equal(configs[1]!.maxThinkingTokens, undefined, "unset: the CLI's default");
    assert.equal(configs[2]!.fork, undefined, "no fork");
  });

  it("gives up after actionRetries, and never retries the server's own answer", async () => {
    const { client, calls } = flakyClient([Code.Unavailable, Code.Unavailable, Code.InvalidArgument]);
    const handle = handleOn(client, 1);
    await assert.rejects(handle.stop(), (e: ConnectError) => e.code === Code.Unavailable);
    assert.equal(calls.length, 2);
    await assert.rejects(handle.send("x"), (e: ConnectError) => e.code === Code.InvalidArgument);
    assert.equal(calls.length, 3);
    assert.equal(handle.getSnapshot().error?.message.includes("injected"), true);
  });
});

/** A content event of `messageId` at `seq`. */
function contentEvent(seq: bigint, messageId: string): Event {
  return create(EventSchema, {
    seq,
    sessionId: "s",
    runId: "run-1",
    payload: { case: "content", value: { messageId, blocks: [{ type: "text", text: "x" }] } },
  });
}

describe("SessionHandle keeps the partial message", () => {
  it("asks for deltas; they grow snapshot.partial until content; a new stream drops it until its snapshot", async () => {
    const { client, streams } = scriptedClient(LOG);
    const { handle, seen, until } = open(client);
    await until(() => streams.length === 1);
    assert.equal(streams[0]!.includeDeltas, true, "asked by default");
    const first = streams[0]!.stream;
    first.replay();
    first.event(LOG[0]!);
    first.caughtUp();
    let s = await until((s) => s.hydrationPhase === "ready" && s.lastSeq === 1n);
    assert.equal(s.partial, EMPTY_PARTIAL);

    first.delta("msg_1", "Hel");
    first.delta("msg_1", "lo");
    s = await until((s) => partialMainText(s.partial) === "Hello");
    assert.equal(s.events.length, 1, "deltas are not events");
    const held = s.partial;
    first.send({ case: "heartbeat", value: {} });
    first.event(contentEvent(2n, "msg_0"));
    s = await until((s) => s.lastSeq === 2n);
    assert.equal(s.partial, held, "another message's content: the same object");
    first.event(contentEvent(3n, "msg_1"));
    s = await until((s) => s.lastSeq === 3n);
    assert.equal(s.partial.blocks.length, 0, "content supersedes its partial text");
    for (const snap of seen) {
      if (snap.lastSeq >= 3n) assert.equal(snap.partial.blocks.length, 0, "never the content and its partial text together");
    }

    first.delta("msg_2", "The ans");
    await until((s) => partialMainText(s.partial) === "The ans");
    handle.reconnect();
    await until(() => streams.length === 2);
    assert.equal(streams[1]!.includeDeltas, true);
    const second = streams[1]!.stream;
    second.replay(false, 3n);
    await until((s) => s.partial.blocks.length === 0);
    second.caughtUp();
    second.delta("msg_2", "The answer", true);
    second.delta("msg_2", " is 42.");
    s = await until((s) => partialMainText(s.partial) === "The answer is 42.");
    assert.equal(s.partial.blocks.length, 1);
    for (const snap of seen) {
      const text = partialMainText(snap.partial);
      if (snap.lastSeq === 3n) assert.ok("The answer is 42.".startsWith(text), `shown: ${text}`);
    }
    handle.close();
  });

  it("includeDeltas: false asks for none and ignores any", async () => {
    const { client, streams } = scriptedClient(LOG);
    const { handle, until } = open(client, true, false);
    await until(() => streams.length === 1);
    assert.equal(streams[0]!.includeDeltas, false);
    const stream = streams[0]!.stream;
    stream.replay();
    stream.caughtUp();
    stream.delta("msg_1", "Hello");
    stream.event(LOG[0]!);
    const s = await until((s) => s.lastSeq === 1n);
    assert.equal(s.partial, EMPTY_PARTIAL);
    handle.close();
  });
});

describe("SessionHandle says how current its state is", () => {
  it("connection: replaying, live, down with lastLiveAt; typing a broken stream left is kept as not recorded", async () => {
    const { client, streams } = scriptedClient(LOG);
    const { handle, until } = open(client);
    let s = handle.getSnapshot();
    assert.equal(s.connection.state, "connecting");
    await until(() => streams.length === 1);
    const first = streams[0]!.stream;
    first.replay();
    first.event(LOG[0]!);
    s = await until((s) => s.connection.state === "replaying");
    assert.equal(s.connection.lastLiveAt, undefined, "never live yet");
    first.caughtUp();
    s = await until((s) => s.connection.state === "live");
    first.delta("msg_9", "tick 0 ");
    first.delta("msg_9", "tick 1 ");
    s = await until((s) => partialMainText(s.partial) === "tick 0 tick 1 ");
    assert.ok(s.connection.lastEventAt !== undefined);

    const broke = Date.now();
    first.fail(new Error("connection reset"));
    s = await until((s) => s.connection.state === "down");
    assert.equal(s.connected, false);
    assert.ok(s.connection.lastLiveAt! >= broke, "the held state was current until the break");
    assert.equal(partialMainText(s.partial), "tick 0 tick 1 ", "the typing is kept while down");

    // The server restarted: its recovery ended the run, which never recorded the message.
    // (The retry after the backoff publishes nothing until its stream answers.)
    while (streams.length < 2) await new Promise((r) => setTimeout(r, 5));
    const second = streams[1]!.stream;
    second.replay(false, 1n);
    second.event(
      create(EventSchema, { seq: 2n, sessionId: "s", runId: "run-1", payload: { case: "runEnd", value: { reason: RunEndReason.SERVER_RESTART, inferred: true } } }),
    );
    s = await until((s) => s.lastSeq === 2n);
    assert.equal(s.connection.state, "replaying", "not live until caught up");
    assert.equal(s.partial.blocks.length, 0);
    assert.equal(unrecordedText(s.unrecorded), "tick 0 tick 1 ");
    assert.equal(unrecordedNote(s.unrecorded), "not recorded (server restarted)");
    second.caughtUp();
    s = await until((s) => s.connection.state === "live");
    assert.equal(s.connection.lastLiveAt, undefined);
    assert.equal(unrecordedText(s.unrecorded), "tick 0 tick 1 ", "kept until the next input");
    handle.close();
  });
});

describe("SessionHandle names its session in x-session-id", () => {
  it("on the subscription, history pages, actions and readFullEvent, beside the caller's headers", async () => {
    const { client: scripted, streams } = scriptedClient(LOG);
    const seen: { call: string; session: string | null; auth: string | null }[] = [];
    const record = (call: string, opts?: { headers?: HeadersInit }) => {
      const h = new Headers(opts?.headers);
      seen.push({ call, session: h.get(SESSION_HEADER), auth: h.get("authorization") });
    };
    const client = {
      subscribe(req: { afterSeq?: bigint }, opts?: { signal?: AbortSignal; headers?: HeadersInit }) {
        record("subscribe", opts);
        return scripted.subscribe(req, opts);
      },
      async history(req: { beforeSeq?: bigint; limit?: number }, opts?: { headers?: HeadersInit }) {
        record("history", opts);
        return scripted.history(req, opts);
      },
      async send(_req: unknown, opts?: { headers?: HeadersInit }) {
        record("send", opts);
        return {};
      },
      async stop(_req: unknown, opts?: { headers?: HeadersInit }) {
        record("stop", opts);
        return {};
      },
      async setModel(_req: unknown, opts?: { headers?: HeadersInit }) {
        record("setModel", opts);
        return {};
      },
      async *readFullEvent(_req: unknown, opts?: { headers?: HeadersInit }) {
        record("readFullEvent", opts);
        yield { chunk: new Uint8Array(), offset: 0n, totalSize: 0n };
      },
    } as unknown as SessionServiceClient;
    const handle = new SessionHandle(client, "s-routed", {
      headers: { authorization: "Bearer t" },
      idleTimeoutMs: 0,
      backoff: { initialMs: 5, maxMs: 20 },
    });
    handles.push(handle);
    while (streams.length === 0) await new Promise((r) => setTimeout(r, 1));
    streams[0]!.stream.replay();
    streams[0]!.stream.caughtUp();
    await handle.send("hi");
    await handle.stop();
    await handle.setModel("opus");
    await handle.fetchHistory().catch(() => undefined);
    await handle.readFullEvent(1n).catch(() => undefined);
    const calls = new Set(seen.map((s) => s.call));
    for (const c of ["subscribe", "history", "send", "stop", "setModel", "readFullEvent"]) assert.ok(calls.has(c), `${c} in ${[...calls]}`);
    for (const s of seen) {
      assert.equal(s.session, "s-routed", s.call);
      assert.equal(s.auth, "Bearer t", s.call);
    }
    handle.close();
  });
});

describe("sessionRouting", () => {
  it("adds x-session-id to a unary call naming a session, and nothing to one that names none", async () => {
    const sent: (string | null)[] = [];
    const next = (async (req: { header: Headers }) => {
      sent.push(req.header.get(SESSION_HEADER));
      return {};
    }) as never;
    const call = sessionRouting(next);
    await call({ stream: false, message: { sessionId: "s9" }, header: new Headers() } as never);
    await call({ stream: false, message: { pageSize: 1 }, header: new Headers() } as never);
    assert.deepEqual(sent, ["s9", null]);
  });
});
