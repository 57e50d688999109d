// Controlling the live session through the session helper, against
// the real server, the real claude CLI and the scripted Messages API (which
// dumps every request it gets, so a test can see what the CLI sent):
// setModel and setPermissionMode on the live process, shown by
// snapshot.settings and by the CLI's next init; rewindFiles (dry run, then
// for real) undoing a file the agent wrote; a fork at an earlier assistant
// message continuing from there while the source is untouched.

import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import {
  SessionService,
  Setting,
  SettingApplied,
  deriveAll,
  type Event,
} from "@agent-harness/client/protocol";
import { SessionHandle, type SessionSnapshot, type StartOptions } from "@agent-harness/client/client";
import { eventually, startHarness, type ApiRequest, type Harness } from "./support.ts";

/** Relayed permissions (the server's default). */
let relay: Harness;
/** `--permissions skip`: the agent writes files unasked. */
let skip: Harness;
const opened: SessionHandle[] = [];
const workDirs: string[] = [];

before(async () => {
  relay = await startHarness({ recordApiRequests: true });
  skip = await startHarness({ recordApiRequests: true, serverArgs: ["--permissions", "skip"] });
});
after(async () => {
  for (const handle of opened) handle.close();
  await relay?.close();
  await skip?.close();
  for (const d of workDirs) rmSync(d, { recursive: true, force: true });
});

function open(h: Harness, sessionId: string): SessionHandle {
  const handle = new SessionHandle(createClient(SessionService, createGrpcTransport({ baseUrl: h.url })), sessionId, {
    backoff: { initialMs: 100, maxMs: 1000 },
  });
  opened.push(handle);
  return handle;
}

/** A handle on a new session, started with `config` once connected; resolves after its first turn. */
async function started(
  h: Harness,
  sessionId: string,
  config: StartOptions,
): Promise<{ handle: SessionHandle; first: SessionSnapshot }> {
  const handle = open(h, sessionId);
  await eventually("connected", handle.getSnapshot, (s) => s.connected);
  await handle.start(config);
  return { handle, first: await turnsDone(handle, 1) };
}

/** A fresh working directory for a session's CLI. */
function workDir(): string {
  const d = mkdtempSync(join(tmpdir(), "agent-harness-ts-work-"));
  workDirs.push(d);
  return d;
}

/** Waits until the session has had `turns` turns and is idle. */
function turnsDone(handle: SessionHandle, turns: number): Promise<SessionSnapshot> {
  return eventually(
    `turn ${turns} over`,
    handle.getSnapshot,
    (s) => s.status === "idle" && s.usage.turns >= turns,
    60_000,
  );
}

/** The events of `s` with payload `kind`, after seq `after`. */
function eventsOf<K extends NonNullable<Event["payload"]["case"]>>(
  s: SessionSnapshot,
  kind: K,
  after = 0n,
): (Event & { payload: { case: K } })[] {
  return s.events.filter((e) => e.payload.case === kind && e.seq > after) as (Event & { payload: { case: K } })[];
}

/** The text of an event's content blocks. */
function text(e: Event): string {
  return e.payload.case === "content" ? e.payload.value.blocks.map((b) => b.text).join("") : "";
}

/** The latest Messages API request whose body mentions `needle` (a prompt). */
function requestWith(h: Harness, needle: string): ApiRequest {
  const found = h
    .apiRequests()
    .filter((r) => r.path.split("?")[0] === "/v1/messages" && JSON.stringify(r.body).includes(needle))
    .at(-1);
  assert.ok(found, `no Messages API request mentions ${JSON.stringify(needle)}`);
  return found;
}

describe("controlling the live session", () => {
  it("setModel on the live process: settingChanged LIVE, snapshot.settings, the next request and init name the model; a keyed repeat records nothing", async () => {
    const sid = "ts-set-model";
    const { handle, first } = await started(relay, sid, { prompt: "TEXT one" });
    const initial = first.settings.model;
    assert.ok(initial, "the CLI's init reported its model");
    assert.notEqual(initial, "claude-haiku-4-5");
    // The init may name a variant (e.g. "claude-opus-4-8[1m]") of the model it asks the API for.
    const firstModel = requestWith(relay, "TEXT one").body.model;
    assert.ok(firstModel && initial.startsWith(firstModel), `the CLI's default model first: ${firstModel}, init ${initial}`);

    const set = await handle.setModel("claude-haiku-4-5", { idempotencyKey: "ts-set-model-1" });
    assert.equal(set.applied, SettingApplied.LIVE);
    const changed = await eventually("settingChanged", handle.getSnapshot, (s) => s.lastSeq >= set.seq);
    const e = changed.events.find((x) => x.seq === set.seq)!;
    assert.equal(e.payload.case, "settingChanged");
    if (e.payload.case === "settingChanged") {
      assert.equal(e.payload.value.setting, Setting.MODEL);
      assert.equal(e.payload.value.value, "claude-haiku-4-5");
      assert.equal(e.payload.value.applied, SettingApplied.LIVE);
    }
    assert.equal(changed.settings.model, "claude-haiku-4-5", "in force at once");
    assert.equal(changed.status, "idle", "a setting changes no status");
    // The same logical call again (its answer lost, say): the same answer, nothing recorded.
    const again = await handle.setModel("claude-haiku-4-5", { idempotencyKey: "ts-set-model-1" });
    assert.equal(again.seq, set.seq);

    await handle.send("TEXT two");
    const second = await turnsDone(handle, 2);
    assert.equal(requestWith(relay, "TEXT two").body.model, "claude-haiku-4-5", "the next API request");
    const ready = eventsOf(second, "runReady", set.seq);
    assert.equal(ready.length, 1, "the next turn's init changed the model: a runReady");
    assert.equal(ready[0]!.payload.value.model, "claude-haiku-4-5", "the CLI's init");
    assert.equal(second.settings.model, "claude-haiku-4-5");
    assert.equal(eventsOf(second, "settingChanged").length, 1, "the repeat recorded nothing");
    assert.deepEqual(second.derived, deriveAll(second.events));
    const server = (await createClient(SessionService, createGrpcTransport({ baseUrl: relay.url })).getSession({ sessionId: sid }))
      .session!;
    assert.equal(server.model, "claude-haiku-4-5", "GetSession agrees");
    handle.close();
  });

  it("setPermissionMode plan shows in snapshot.settings and the next init; the policy is the ceiling; setMaxThinkingTokens sets and clears the budget", async () => {
    const sid = "ts-set-mode";
    const { handle, first } = await started(relay, sid, { prompt: "TEXT one" });
    assert.equal(first.settings.permissionMode, "default", "the CLI's init");

    // Relay mode: bypassPermissions is beyond the operator's policy. The
    // server's answer, not retried, records nothing.
    await assert.rejects(
      handle.setPermissionMode("bypassPermissions"),
      (e: unknown) => ConnectError.from(e).code === Code.PermissionDenied,
    );
    const set = await handle.setPermissionMode("plan");
    assert.equal(set.applied, SettingApplied.LIVE);
    assert.equal(set.seq, first.lastSeq + 1n, "the refusal recorded nothing");
    const planned = await eventually("plan in force", handle.getSnapshot, (s) => s.settings.permissionMode === "plan");
    assert.ok(planned.lastSeq >= set.seq);

    await handle.send("TEXT two");
    const second = await turnsDone(handle, 2);
    const ready = eventsOf(second, "runReady", set.seq);
    assert.equal(ready.length, 1, "the next turn's init changed the mode: a runReady");
    assert.equal(ready[0]!.payload.value.permissionMode, "plan", "the CLI's init");
    assert.equal(second.settings.permissionMode, "plan");

    const budget = await handle.setMaxThinkingTokens(2048);
    assert.equal(budget.applied, SettingApplied.LIVE);
    await eventually("a budget", handle.getSnapshot, (s) => s.settings.maxThinkingTokens === 2048);
    const cleared = await handle.setMaxThinkingTokens(undefined);
    const last = await eventually("the CLI's default again", handle.getSnapshot, (s) => s.lastSeq >= cleared.seq);
    assert.equal(last.settings.maxThinkingTokens, undefined);
    const recorded = eventsOf(last, "settingChanged", budget.seq - 1n).map((e) => [e.payload.value.setting, e.payload.value.value]);
    assert.deepEqual(recorded, [
      [Setting.MAX_THINKING_TOKENS, "2048"],
      [Setting.MAX_THINKING_TOKENS, ""],
    ]);
    handle.close();
  });

  it("setTitle names the session: GetSession reads it back, the snapshot's title follows, an empty one goes back to the first prompt's", async () => {
    const sid = "ts-set-title";
    const { handle, first } = await started(relay, sid, { prompt: "TEXT name me\nsecond line" });
    assert.equal(first.title, "TEXT name me", "derived from the first prompt");
    const client = createClient(SessionService, createGrpcTransport({ baseUrl: relay.url }));
    const set = await handle.setTitle("  Release checklist  ", { idempotencyKey: "ts-set-title-1" });
    const named = await eventually("titleSet", handle.getSnapshot, (s) => s.lastSeq >= set.seq);
    assert.equal(named.title, "Release checklist", "trimmed by the server");
    const got = await client.getSession({ sessionId: sid });
    assert.equal(got.session?.title, "Release checklist");
    assert.equal((await handle.setTitle("  Release checklist  ", { idempotencyKey: "ts-set-title-1" })).seq, set.seq);
    await handle.setTitle("");
    assert.equal((await client.getSession({ sessionId: sid })).session?.title, "TEXT name me");
    await assert.rejects(handle.setTitle("two\nlines"), (e) => ConnectError.from(e).code === Code.InvalidArgument);
  });

  it("rewindFiles: a dry run lists the file the agent wrote and changes nothing; the rewind restores it and is recorded", async () => {
    const sid = "ts-rewind";
    const cwd = workDir();
    const file = join(cwd, "notes.txt");
    const { handle } = await started(skip, sid, { prompt: `WRITE ${file} one`, cwd });
    assert.equal(readFileSync(file, "utf8"), "one\n");
    await handle.send(`WRITE ${file} two`);
    const written = await turnsDone(handle, 2);
    assert.equal(readFileSync(file, "utf8"), "two\n", "the agent rewrote it");
    const inputs = eventsOf(written, "inputSent");
    assert.equal(inputs.length, 2);
    const second = inputs[1]!;
    assert.ok(second.payload.value.messageUuid, "the harness gave the user message a uuid");

    const dry = await handle.rewindFiles(second.seq, { dryRun: true });
    assert.ok(
      dry.filesChanged.some((f) => f === file || file.endsWith(f)),
      `the dry run lists ${file}: ${JSON.stringify(dry.filesChanged)}`,
    );
    assert.deepEqual([dry.insertions, dry.deletions], [1n, 1n], "one line back, one line away");
    assert.equal(dry.seq, 0n, "a dry run records nothing");
    assert.equal(readFileSync(file, "utf8"), "two\n", "a dry run changes nothing");

    const done = await handle.rewindFiles(second.seq);
    assert.deepEqual(done.filesChanged, dry.filesChanged);
    assert.ok(done.seq > written.lastSeq, `recorded at ${done.seq}`);
    assert.equal(readFileSync(file, "utf8"), "one\n", "the file is as it was before the second message");
    const s = await eventually("filesRewound", handle.getSnapshot, (s) => s.lastSeq >= done.seq);
    const rec = s.events.find((e) => e.seq === done.seq)!;
    assert.equal(rec.payload.case, "filesRewound");
    if (rec.payload.case === "filesRewound") {
      assert.equal(rec.payload.value.toSeq, second.seq);
      assert.equal(rec.payload.value.messageUuid, second.payload.value.messageUuid);
      assert.deepEqual(rec.payload.value.filesChanged, dry.filesChanged);
    }
    assert.equal(s.status, "idle");
    assert.equal(s.processAlive, true, "the process stays");
    handle.close();
  });

  it("a fork at an earlier assistant message continues from there; the source is untouched and goes on", async () => {
    const src = "ts-fork-src";
    const cwd = workDir();
    const { handle: source } = await started(skip, src, { prompt: "TEXT alpha", cwd });
    await source.send("TEXT beta");
    const before = await turnsDone(source, 2);
    const contents = eventsOf(before, "content");
    assert.deepEqual(contents.map(text), ["alpha", "beta"]);
    const at = contents[0]!.seq;

    const { handle: fork, first: forked } = await started(skip, "ts-fork", {
      prompt: "TEXT gamma",
      fork: { fromSessionId: src, atSeq: at },
    });
    assert.deepEqual(eventsOf(forked, "content").map(text), ["gamma"], "the fork's reply");
    const start = eventsOf(forked, "runStart")[0]!.payload.value.config!;
    assert.equal(start.fork?.fromSessionId, src);
    assert.equal(start.fork?.atSeq, at);
    assert.ok(start.fork?.messageUuid, "the server filled in the message uuid");
    assert.equal(start.cwd, cwd, "the source's cwd");
    assert.ok(forked.derived.resumeId, "the fork has a conversation");
    assert.notEqual(forked.derived.resumeId, before.derived.resumeId, "of its own");
    // What the model saw in the fork: the conversation up to alpha, not beta.
    const seen = JSON.stringify(requestWith(skip, "TEXT gamma").body.messages);
    assert.ok(seen.includes("TEXT alpha"), seen);
    assert.ok(!seen.includes("TEXT beta"), `the fork does not see what came after: ${seen}`);

    // The source: untouched by the fork, and it goes on from its own end.
    const src2 = source.getSnapshot();
    assert.equal(src2.lastSeq, before.lastSeq, "nothing appended to the source");
    await source.send("TEXT delta");
    await turnsDone(source, 3);
    const sourceSaw = JSON.stringify(requestWith(skip, "TEXT delta").body.messages);
    assert.ok(sourceSaw.includes("TEXT beta"), sourceSaw);
    assert.ok(!sourceSaw.includes("TEXT gamma"), `the source does not see the fork: ${sourceSaw}`);
    fork.close();
    source.close();
  });
});
