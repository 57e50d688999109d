// The session helper against the real server: the release agent-harness
// binary with the interactive adapter, driving the real claude CLI against
// the scripted fake Messages API, over gRPC (HTTP/2) from connect-node.

import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { Code, ConnectError, createClient, type Client } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { create } from "@bufbuild/protobuf";
import {
  DeltaBlockType,
  EventSchema,
  SessionService,
  deriveAll,
  deriveSession,
  partialMainText,
  type Event,
  type Session,
  type SubscribeResponse,
} from "@agent-harness/client/protocol";
import { SessionHandle, type SessionSnapshot } from "@agent-harness/client/client";
import { eventually, startHarness, type Harness } from "./support.ts";

let h: Harness;
/** afterSeq of every Subscribe call, per session, in order. */
const subscribeCursors = new Map<string, bigint[]>();
/** Number of History calls per session. */
const historyCalls = new Map<string, number>();
/** Every message of every Subscribe stream, per session, as delivered. */
const delivered = new Map<string, SubscribeResponse[]>();

function transport() {
  return createGrpcTransport({ baseUrl: h.url });
}

/**
 * A SessionService client that records the cursor and the messages of every
 * Subscribe and counts History calls.
 */
function recordingClient(): Client<typeof SessionService> {
  const client = createClient(SessionService, transport());
  return {
    ...client,
    subscribe(req, opts) {
      const sid = req.sessionId ?? "";
      subscribeCursors.set(sid, [...(subscribeCursors.get(sid) ?? []), req.afterSeq ?? 0n]);
      const stream = client.subscribe(req, opts);
      return (async function* () {
        for await (const res of stream) {
          delivered.set(sid, [...(delivered.get(sid) ?? []), res]);
          yield res;
        }
      })();
    },
    history(req, opts) {
      const sid = req.sessionId ?? "";
      historyCalls.set(sid, (historyCalls.get(sid) ?? 0) + 1);
      return client.history(req, opts);
    },
  };
}

/**
 * Every handle opened, closed at the end even when a test failed before its
 * own close(): a handle left open retries its stream forever and the test
 * process never exits.
 */
const opened: SessionHandle[] = [];

/** A handle that records every snapshot it publishes. */
function open(sessionId: string, opts: ConstructorParameters<typeof SessionHandle>[2] = {}) {
  const client = recordingClient();
  const handle = new SessionHandle(client, sessionId, {
    backoff: { initialMs: 100, maxMs: 1000 },
    ...opts,
  });
  opened.push(handle);
  const seen: SessionSnapshot[] = [];
  handle.subscribe((s) => seen.push(s));
  return { handle, client, seen };
}

/** Every event of the session, via History pages (oldest first). */
async function fullHistory(sessionId: string): Promise<Event[]> {
  const client = createClient(SessionService, createGrpcTransport({ baseUrl: h.url }));
  const out: Event[] = [];
  let before = 0n;
  for (;;) {
    const page = await client.history({ sessionId, beforeSeq: before, limit: 1000 });
    out.unshift(...page.events);
    if (!page.hasMore || page.events.length === 0) return out;
    before = page.events[0]!.seq;
  }
}

/**
 * GetSession (the server's Rust derive) and deriveSession over the full
 * History (this port), read until the log did not move in between.
 */
async function serverAndPortSession(sessionId: string): Promise<{ server: Session; port: Session }> {
  const client = createClient(SessionService, createGrpcTransport({ baseUrl: h.url }));
  for (let attempt = 0; ; attempt++) {
    const events = await fullHistory(sessionId);
    const server = (await client.getSession({ sessionId })).session!;
    const port = deriveSession(sessionId, events);
    if (server.headSeq === port.headSeq || attempt === 5) return { server, port };
  }
}

function seqs(events: readonly Event[]): bigint[] {
  return events.map((e) => e.seq);
}

function assertStrictlyIncreasing(list: bigint[]) {
  for (let i = 1; i < list.length; i++) {
    assert.ok(list[i]! > list[i - 1]!, `seq ${list[i]} follows ${list[i - 1]} at index ${i}`);
  }
}

/** The phases a handle went through, collapsing repeats. */
function phases(seen: SessionSnapshot[]): string[] {
  const out: string[] = [];
  for (const s of seen) if (out[out.length - 1] !== s.hydrationPhase) out.push(s.hydrationPhase);
  return out;
}

before(async () => {
  h = await startHarness();
});
after(async () => {
  for (const handle of opened) handle.close();
  await h?.close();
});

describe("SessionHandle against the real server", () => {
  it("streams a turn: starting/streaming then idle, process alive, events equal History", async () => {
    const sid = "ts-turn";
    const { handle, seen } = open(sid);
    await eventually("caught up", handle.getSnapshot, (s) => s.hydrationPhase === "ready" && s.connected);
    await handle.start({ prompt: "SLOW 10 100" });
    const done = await eventually(
      "turn end",
      handle.getSnapshot,
      (s) => s.events.some((e) => e.payload.case === "turnEnd") && s.status === "idle",
    );
    assert.ok(
      seen.some((s) => s.status === "streaming"),
      `status went streaming (saw ${[...new Set(seen.map((s) => s.status))].join(",")})`,
    );
    assert.equal(done.processAlive, true, "interactive CLI stays alive between turns");
    assert.equal(done.activity.kind, "idle");
    assert.ok(done.usage.turns >= 1 && done.usage.outputTokens > 0, "usage counted the turn");
    // 'ready' once, permanently.
    assert.ok(["hydrating,ready", "ready"].includes(phases(seen).join()), phases(seen).join());
    const kinds = done.events.map((e) => e.payload.case);
    for (const k of ["runStart", "inputSent", "runReady", "content", "turnEnd"]) {
      assert.ok(kinds.includes(k as never), `has ${k}: ${kinds.join(",")}`);
    }
    assertStrictlyIncreasing(seqs(done.events));
    assert.deepEqual(seqs(done.events), seqs(await fullHistory(sid)));
    // The handle's incremental fold agrees with a fresh derive of what it holds...
    assert.deepEqual(done.derived, deriveAll(done.events));
    for (const s of seen) assert.deepEqual(s.derived, deriveAll(s.events));
    // ...and this port with the server's Rust derive.
    const { server, port } = await serverAndPortSession(sid);
    assert.deepEqual(port, server, "deriveSession over History equals GetSession");
    handle.close();
  });

  it("live typing: snapshot.partial grows during a SLOW turn, holds what the stream delivered, and the content event clears it", async () => {
    const sid = "ts-typing";
    const { handle, seen } = open(sid);
    await eventually("caught up", handle.getSnapshot, (s) => s.hydrationPhase === "ready" && s.connected);
    const n = 20;
    const started = await handle.start({ prompt: `SLOW ${n} 100` });
    const done = await eventually(
      "turn end",
      handle.getSnapshot,
      (s) => s.events.some((e) => e.payload.case === "turnEnd") && s.status === "idle",
    );
    const contents = done.events.filter((e) => e.payload.case === "content");
    assert.equal(contents.length, 1, "one content event");
    const content = contents[0]!;
    assert.ok(content.payload.case === "content");
    const messageId = content.payload.value.messageId;
    const text = content.payload.value.blocks.map((b) => b.text).join("");
    assert.equal(text, Array.from({ length: n }, (_, i) => `tick ${i} `).join(""));

    // Before the content event: one text block of that message, growing,
    // a prefix of the content's text at every step.
    const landed = seen.findIndex((s) => s.events.some((e) => e.seq === content.seq));
    assert.ok(landed > 0, "snapshots before the content event");
    const texts: string[] = [];
    for (const s of seen.slice(0, landed)) {
      for (const b of s.partial.blocks) {
        assert.equal(b.messageId, messageId, "the block of the message being written");
        assert.equal(b.runId, started.runId);
        assert.equal(b.index, 0);
        assert.equal(b.blockType, DeltaBlockType.TEXT);
        assert.equal(b.parentToolUseId, "");
      }
      const t = partialMainText(s.partial);
      if (t !== "" && t !== texts[texts.length - 1]) texts.push(t);
    }
    assert.ok(new Set(texts.map((t) => t.length)).size >= 3, `3+ lengths before the content: ${JSON.stringify(texts)}`);
    for (let i = 1; i < texts.length; i++) {
      assert.ok(texts[i]!.startsWith(texts[i - 1]!) && texts[i]!.length > texts[i - 1]!.length, `grows at ${i}: ${texts[i]}`);
    }
    assert.ok(text.startsWith(texts[texts.length - 1]!), "the partial text is a prefix of the content's");

    // The partial text is exactly the message's fragments as the stream
    // delivered them, joined, and they join to the whole content text (the
    // server sends a block's last fragments before its content event).
    let joined = "";
    let fragments = 0;
    for (const r of delivered.get(sid) ?? []) {
      if (r.kind.case !== "delta" || r.kind.value.messageId !== messageId) continue;
      joined = r.kind.value.snapshot ? r.kind.value.fragment : joined + r.kind.value.fragment;
      fragments++;
    }
    assert.ok(fragments >= 3, `several deltas, not one: ${fragments}`);
    assert.equal(texts[texts.length - 1], joined, "the partial text is the delivered fragments, joined");
    assert.equal(joined, text, "the delivered fragments join to the content's text");

    // From the content event on: cleared, never the content and its partial text together.
    for (const s of seen.slice(landed)) assert.deepEqual(s.partial.blocks, [], `partial at seq ${s.lastSeq}`);
    assert.deepEqual(done.partial.blocks, []);
    // Deltas are not events: the held list is the server's log.
    assert.deepEqual(seqs(done.events), seqs(await fullHistory(sid)));
    handle.close();
  });

  it("reconnects after the server is killed mid-turn and resumes without duplicates", async () => {
    const sid = "ts-restart";
    const { handle, seen } = open(sid);
    await eventually("connected", handle.getSnapshot, (s) => s.connected);
    await handle.start({ prompt: "SLOW 80 100" });
    await eventually("streaming", handle.getSnapshot, (s) => s.status === "streaming");
    const beforeKill = handle.getSnapshot().lastSeq;
    assert.ok(beforeKill > 0n);

    await h.kill();
    await eventually("disconnected", handle.getSnapshot, (s) => !s.connected, 10_000);
    // Backing off against a dead port for a while must not lose or duplicate anything.
    await new Promise((r) => setTimeout(r, 1500));
    await h.start();

    const after = await eventually(
      "reconnected and idle after recovery",
      handle.getSnapshot,
      (s) => s.connected && s.status === "idle" && s.events.some((e) => e.payload.case === "runEnd"),
      30_000,
    );
    const runEnd = after.events.find((e) => e.payload.case === "runEnd")!;
    assert.equal(runEnd.payload.case, "runEnd");
    if (runEnd.payload.case === "runEnd") assert.equal(runEnd.payload.value.inferred, true);
    assert.equal(after.processAlive, false, "recovery ended the run");

    // Every snapshot ever published was duplicate-free and increasing.
    for (const s of seen) assertStrictlyIncreasing(seqs(s.events));
    assert.deepEqual(seqs(after.events), seqs(await fullHistory(sid)));

    // Resumed from the last held seq, not from zero.
    const cursors = subscribeCursors.get(sid)!;
    assert.equal(cursors[0], 0n);
    assert.ok(cursors.length >= 2, `resubscribed (${cursors.join(",")})`);
    assert.ok(cursors.slice(1).every((c) => c >= beforeKill), `resume cursors ${cursors.join(",")} >= ${beforeKill}`);

    // The session goes on: Send respawns the CLI with --resume. When the
    // killed CLI had not written its transcript yet, that resume fails once
    // (run_error resume_failed, then the run ends) and the next Send starts a
    // new conversation (docs/api.md, "A lost conversation").
    const turnAfter = (s: SessionSnapshot, from: bigint) =>
      s.events.some((e) => e.seq > from && e.payload.case === "turnEnd");
    const lostResume = (s: SessionSnapshot, from: bigint) =>
      s.events.some((e) => e.seq > from && e.payload.case === "runError" && e.payload.value.kind === "resume_failed");
    let mark = handle.getSnapshot().lastSeq;
    await handle.send("TEXT after restart");
    let again = await eventually(
      "second turn (or the lost conversation's run ended)",
      handle.getSnapshot,
      (s) => s.status === "idle" && turnAfter(s, mark) && (lostResume(s, mark) ? !s.processAlive : s.processAlive),
      30_000,
    );
    if (lostResume(again, mark)) {
      mark = again.lastSeq;
      await handle.send("TEXT after restart");
      again = await eventually(
        "second turn in a new conversation",
        handle.getSnapshot,
        (s) => s.status === "idle" && turnAfter(s, mark) && s.processAlive,
        30_000,
      );
      assert.ok(!lostResume(again, mark), "a new conversation, not a second failed resume");
    }
    const answered = again.events.filter((e) => e.seq > mark && e.payload.case === "turnEnd");
    assert.ok(answered.every((e) => e.payload.case === "turnEnd" && !e.payload.value.isError), "the turn after the restart succeeded");
    assertStrictlyIncreasing(seqs(again.events));
    // History reads the store; the stream may deliver what was committed
    // after that snapshot a moment later (on PostgreSQL, after the commit's
    // notice): compare once the handle holds History's last event.
    const full = await fullHistory(sid);
    const last = full[full.length - 1].seq;
    const caught = await eventually(
      "the handle caught up with History",
      handle.getSnapshot,
      (s) => s.events.length > 0 && s.events[s.events.length - 1].seq >= last,
      10_000,
    );
    assertStrictlyIncreasing(seqs(caught.events));
    assert.deepEqual(seqs(caught.events).slice(0, full.length), seqs(full));
    handle.close();
  });

  it("stop ends the turn: stopping then idle, process still alive", async () => {
    const sid = "ts-stop";
    const { handle, seen } = open(sid);
    await eventually("connected", handle.getSnapshot, (s) => s.connected);
    await handle.start();
    await eventually("ready for input", handle.getSnapshot, (s) => s.processAlive);
    await handle.send("SLOW 100 100");
    await eventually("streaming", handle.getSnapshot, (s) => s.status === "streaming");
    const res = await handle.stop();
    assert.equal(res.stopping, true);
    const idle = await eventually("idle after stop", handle.getSnapshot, (s) => s.status === "idle", 20_000);
    assert.ok(idle.events.some((e) => e.payload.case === "stopRequested"));
    assert.equal(idle.processAlive, true, "interrupt keeps the interactive CLI alive");
    assert.ok(
      seen.some((s) => s.status === "stopping") || idle.events.some((e) => e.payload.case === "stopRequested"),
    );
    handle.close();
  });

  it("a Send retried with its idempotency key runs once and answers the first run id", async () => {
    const sid = "ts-idem";
    const { handle } = open(sid);
    await eventually("connected", handle.getSnapshot, (s) => s.connected);
    await handle.start({ prompt: "TEXT first" });
    await eventually("first turn over", handle.getSnapshot, (s) => s.status === "idle" && s.usage.turns >= 1);
    // The same logical Send twice, as a client whose answer was lost sends it.
    const client = createClient(SessionService, transport());
    const send = () =>
      client.send({ sessionId: sid, input: "TEXT only once", idempotencyKey: "ts-idem-send-1" });
    const first = await send();
    const done = await eventually("second turn over", handle.getSnapshot, (s) => s.status === "idle" && s.usage.turns >= 2);
    const again = await send();
    assert.equal(again.runId, first.runId);
    const inputs = (await fullHistory(sid)).filter(
      (e) => e.payload.case === "inputSent" && e.payload.value.text === "TEXT only once",
    );
    assert.equal(inputs.length, 1, "one input_sent");
    const head = (await client.getSession({ sessionId: sid })).session?.headSeq;
    assert.equal(head, done.lastSeq, "nothing appended");
    // The same key with another request is refused, naming the field.
    await assert.rejects(
      client.send({ sessionId: sid, input: "TEXT other", idempotencyKey: "ts-idem-send-1" }),
      (e: ConnectError) => e.code === Code.InvalidArgument && e.message.includes("idempotency_key"),
    );
    handle.close();
  });

  it("rebuilds on ReplayStart.reset instead of appending", async () => {
    const sid = "ts-turn"; // has a log from the first test
    const history = await fullHistory(sid);
    const head = history[history.length - 1]!.seq;
    const { handle } = open(sid, { autoConnect: false });
    // A cursor past the head is incoherent: the server must reset.
    const bogus = create(EventSchema, { seq: head + 100n, sessionId: sid, payload: { case: "turnStart", value: {} } });
    handle.injectEvent(bogus);
    await eventually("injected", handle.getSnapshot, (s) => s.lastSeq === head + 100n);
    handle.reconnect();
    const s = await eventually("rebuilt", handle.getSnapshot, (s) => s.hydrationPhase === "ready");
    assert.ok(!s.events.some((e) => e.seq === head + 100n), "the bogus event was dropped by the reset");
    assert.equal(s.lastSeq, head);
    assertStrictlyIncreasing(seqs(s.events));
    const tail = seqs(history).slice(-s.events.length);
    assert.deepEqual(seqs(s.events), tail);
    handle.close();
  });

  it("fetchHistory prepends older pages, coalesces concurrent calls, reports hasMore", async () => {
    const sid = "ts-turn";
    const history = await fullHistory(sid);
    assert.ok(history.length >= 6, `need a few events, have ${history.length}`);
    const { handle } = open(sid, { autoConnect: false });
    handle.injectEvent(history[history.length - 1]!);
    const calls0 = historyCalls.get(sid) ?? 0;
    const [a, b] = await Promise.all([handle.fetchHistory({ limit: 2 }), handle.fetchHistory({ limit: 2 })]);
    assert.equal(historyCalls.get(sid)! - calls0, 1, "two concurrent calls made one request");
    assert.deepEqual(a, b);
    assert.equal(a.hasMore, true);
    assert.deepEqual(seqs(handle.getSnapshot().events), seqs(history.slice(-3)));
    let more = true;
    while (more) more = (await handle.fetchHistory({ limit: 2 })).hasMore;
    assert.deepEqual(seqs(handle.getSnapshot().events), seqs(history));
    assert.equal(handle.getSnapshot().hasMoreHistory, false);
    // Then subscribing resumes after the held head: nothing new, nothing duplicated.
    handle.reconnect();
    const s = await eventually("ready", handle.getSnapshot, (s) => s.hydrationPhase === "ready");
    assert.deepEqual(seqs(s.events), seqs(history));
    assert.equal(subscribeCursors.get(sid)!.at(-1), history[history.length - 1]!.seq);
    handle.close();
  });

  it("backfill keeps hydration 'hydrating' until the older pages are in", async () => {
    const sid = "ts-turn";
    const history = await fullHistory(sid);
    const { handle, seen } = open(sid, { autoConnect: false, backfill: 1000 });
    handle.injectEvent(history[history.length - 2]!);
    handle.reconnect();
    const s = await eventually("ready", handle.getSnapshot, (s) => s.hydrationPhase === "ready");
    assert.deepEqual(seqs(s.events), seqs(history), "backfilled to the start, then caught up");
    // 'ready' was never published before the backfill finished.
    for (const snap of seen) {
      if (snap.hydrationPhase === "ready") assert.deepEqual(seqs(snap.events).slice(0, 1), [history[0]!.seq]);
    }
    handle.close();
  });

  it("getContextUsage: figures that add up; stopTask ends a background Bash while the process stays", async () => {
    const sid = "ts-control";
    const { handle } = open(sid);
    await eventually("connected", handle.getSnapshot, (s) => s.connected);
    const started = await handle.start({ prompt: "BGBASH sleep 300" });
    // Relayed permissions (the server's default): allow the Bash when asked.
    const answered = new Set<string>();
    const taskStarted = await eventually("the background Bash started", handle.getSnapshot, (s) => {
      for (const e of s.events) {
        if (e.payload.case === "permissionRequested" && !answered.has(e.payload.value.requestId)) {
          answered.add(e.payload.value.requestId);
          void handle.respondPermission({ requestId: e.payload.value.requestId, allow: true });
        }
      }
      return s.events.some((e) => e.payload.case === "taskStarted");
    });
    const taskId = taskStarted.events.flatMap((e) => (e.payload.case === "taskStarted" ? [e.payload.value.taskId] : []))[0]!;
    assert.ok(taskId, "task_started has a task id");
    await eventually("the turn over", handle.getSnapshot, (s) => s.status === "idle" && s.usage.turns >= 1);

    const usage = await handle.getContextUsage();
    const figures = `total ${usage.totalTokens}, max ${usage.maxTokens}, raw max ${usage.rawMaxTokens}`;
    assert.ok(usage.totalTokens > 0, figures);
    assert.ok(usage.maxTokens > usage.totalTokens, figures);
    assert.ok(usage.rawMaxTokens >= usage.maxTokens, figures);
    const names = usage.categories.map((c) => `${c.name}: ${c.tokens}`).join(", ");
    assert.ok(usage.categories.some((c) => c.name === "Messages"), names);
    const used = usage.categories.filter((c) => c.kind === "used").reduce((n, c) => n + c.tokens, 0n);
    assert.equal(used, usage.totalTokens, `the categories add up: ${names}`);
    assert.equal(usage.raw?.totalTokens, Number(usage.totalTokens), "raw is the CLI's answer");

    const running = handle.getSnapshot();
    assert.ok(
      !running.events.some((e) => (e.payload.case === "taskUpdated" || e.payload.case === "taskNotification") && e.payload.value.taskId === taskId),
      "the task has not ended by itself",
    );
    await handle.stopTask(taskId);
    const stopped = await eventually("the task stopped", handle.getSnapshot, (s) =>
      s.events.some(
        (e) =>
          (e.payload.case === "taskUpdated" && e.payload.value.taskId === taskId && e.payload.value.status === "killed") ||
          (e.payload.case === "taskNotification" && e.payload.value.taskId === taskId && e.payload.value.status === "stopped"),
      ),
    );
    assert.equal(stopped.processAlive, true, "the process stays");
    await eventually("idle again", handle.getSnapshot, (s) => s.status === "idle");
    const turns = handle.getSnapshot().usage.turns;
    const sent = await handle.send("TEXT still here");
    assert.equal(sent.runId, started.runId, "the same process took the next message");
    await eventually("the next turn over", handle.getSnapshot, (s) => s.status === "idle" && s.usage.turns > turns);

    // A session with no process: NOT_FOUND, not retried into a hang.
    const { handle: nobody } = open("ts-control-nobody");
    await assert.rejects(nobody.getContextUsage(), (e: unknown) => ConnectError.from(e).code === Code.NotFound);
    await assert.rejects(nobody.stopTask(taskId), (e: unknown) => ConnectError.from(e).code === Code.NotFound);
    nobody.close();
    handle.close();
  });

  it("a bad session id is a fatal error: no retry loop", async () => {
    const { handle } = open("bad id with spaces!");
    const s = await eventually("error", handle.getSnapshot, (s) => s.error !== undefined, 10_000);
    assert.match(String(s.error), /invalid_argument|InvalidArgument|session/i);
    const n = subscribeCursors.get("bad id with spaces!")!.length;
    await new Promise((r) => setTimeout(r, 800));
    assert.equal(subscribeCursors.get("bad id with spaces!")!.length, n, "did not retry");
    assert.equal(s.connected, false);
    handle.close();
  });
});
