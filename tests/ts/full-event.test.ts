// Events too large to stream whole: readFullEvent against a scripted
// ReadFullEvent stream (reassembly and its checks), then a real 6 MB answer
// (the release agent-harness binary, the real claude CLI, the scripted
// Messages API's `BIG 6000000`) over grpc-web with a 4 MiB receive limit:
// Subscribe (through SessionHandle) and History deliver it cut down and
// marked `truncated`, readFullEvent returns it whole, and the TypeScript
// example of docs/clients.md (example.ts) prints the whole answer.

import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { dirname } from "node:path";
import { fileURLToPath } from "node:url";
import { after, before, describe, it } from "node:test";
import { Code, ConnectError, createClient, type Client } from "@connectrpc/connect";
import { createGrpcWebTransport } from "@connectrpc/connect-node";
import { create, fromJsonString, toBinary, type MessageInitShape } from "@bufbuild/protobuf";
import {
  EventSchema,
  FullEventPart,
  ReadFullEventResponseSchema,
  SessionService,
  type Event,
  type ReadFullEventResponse,
} from "@agent-harness/client/protocol";
import {
  SessionHandle,
  readFullEvent,
  readFullEventBytes,
  type SessionSnapshot,
} from "@agent-harness/client/client";
import { startHarness, type Harness } from "./support.ts";

const MiB = 1024 * 1024;
const ANSWER_BYTES = 6_000_000;

type Chunk = MessageInitShape<typeof ReadFullEventResponseSchema>;

/** A client whose ReadFullEvent streams `chunks` and records the request. */
function scripted(chunks: Chunk[]) {
  const requests: unknown[] = [];
  const client = {
    readFullEvent(req: unknown) {
      requests.push(req);
      return (async function* () {
        for (const c of chunks) yield create(ReadFullEventResponseSchema, c);
      })();
    },
  } as unknown as Client<typeof SessionService>;
  return { client, requests };
}

const bytes = (s: string) => new TextEncoder().encode(s);

async function rejectsDataLoss(p: Promise<unknown>, message: RegExp) {
  await assert.rejects(p, (err: unknown) => {
    assert.ok(err instanceof ConnectError, String(err));
    assert.equal(err.code, Code.DataLoss);
    assert.match(err.rawMessage, message);
    return true;
  });
}

describe("readFullEvent over a scripted ReadFullEvent stream", () => {
  it("places the chunks at their offsets and decodes the part asked for", async () => {
    const line = '{"type":"assistant","text":"héllo"}';
    const b = bytes(line);
    const { client, requests } = scripted([
      { chunk: b.slice(0, 5), offset: 0n, totalSize: BigInt(b.length) },
      { chunk: b.slice(5, 20), offset: 5n, totalSize: BigInt(b.length) },
      { chunk: b.slice(20), offset: 20n, totalSize: BigInt(b.length) },
    ]);
    assert.equal(await readFullEvent(client, "s", 7n), line);
    assert.deepEqual(await readFullEventBytes(client, "s", 7n), b);
    assert.equal(await readFullEvent(client, "s", 7n, FullEventPart.EVENT_JSON, { chunkSize: 5 }), line);
    assert.deepEqual(
      requests.map((r) => {
        const { sessionId, seq, part, chunkSize } = r as Record<string, unknown>;
        return { sessionId, seq, part, chunkSize };
      }),
      [
        { sessionId: "s", seq: 7n, part: FullEventPart.CLI_LINE, chunkSize: 0 },
        { sessionId: "s", seq: 7n, part: FullEventPart.CLI_LINE, chunkSize: 0 },
        { sessionId: "s", seq: 7n, part: FullEventPart.EVENT_JSON, chunkSize: 5 },
      ],
    );

    const ev = create(EventSchema, { seq: 7n, cliLine: line, payload: { case: "turnEnd", value: {} } });
    const enc = toBinary(EventSchema, ev);
    const whole = await readFullEvent(
      scripted([
        { chunk: enc.slice(0, 10), offset: 0n, totalSize: BigInt(enc.length) },
        { chunk: enc.slice(10), offset: 10n, totalSize: BigInt(enc.length) },
      ]).client,
      "s",
      7n,
      FullEventPart.EVENT,
    );
    assert.equal(whole.seq, 7n);
    assert.equal(whole.cliLine, line);
    assert.equal(whole.payload.case, "turnEnd");

    // An empty part is one empty chunk.
    assert.equal(await readFullEvent(scripted([{ chunk: new Uint8Array(), offset: 0n, totalSize: 0n }]).client, "s", 1n), "");
  });

  it("rejects with DATA_LOSS when the chunks do not add up to total_size", async () => {
    const b = bytes("0123456789");
    const cases: [string, Chunk[], RegExp][] = [
      ["no chunk", [], /no chunk/],
      ["only the first chunk", [{ chunk: b.slice(0, 4), offset: 0n, totalSize: 10n }], /ended at 4 of 10/],
      [
        "a gap",
        [
          { chunk: b.slice(0, 4), offset: 0n, totalSize: 10n },
          { chunk: b.slice(6), offset: 6n, totalSize: 10n },
        ],
        /offset 6, expected 4/,
      ],
      [
        "an overlap",
        [
          { chunk: b.slice(0, 4), offset: 0n, totalSize: 10n },
          { chunk: b.slice(2), offset: 2n, totalSize: 10n },
        ],
        /offset 2, expected 4/,
      ],
      [
        "a changing total",
        [
          { chunk: b.slice(0, 4), offset: 0n, totalSize: 10n },
          { chunk: b.slice(4), offset: 4n, totalSize: 11n },
        ],
        /total_size changed/,
      ],
      ["a chunk past the total", [{ chunk: b, offset: 0n, totalSize: 8n }], /past total_size 8/],
    ];
    for (const [what, chunks, message] of cases) {
      await rejectsDataLoss(readFullEventBytes(scripted(chunks).client, "s", 1n), message).catch((err: unknown) => {
        throw new Error(`${what}: ${String(err)}`);
      });
    }
  });
});

describe("a 6 MB answer over grpc-web (real server, real CLI)", () => {
  let h: Harness;
  before(async () => {
    h = await startHarness();
  });
  after(async () => {
    await h?.close();
  });

  /** grpc-web from Node, receiving at most gRPC's default 4 MiB per message. */
  function grpcWeb(): Client<typeof SessionService> {
    return createClient(
      SessionService,
      createGrpcWebTransport({ baseUrl: h.url, httpVersion: "1.1", readMaxBytes: 4 * MiB }),
    );
  }

  /** Resolves with the first snapshot that passes `pred` (checked on every publish). */
  function snapshotWhere(
    handle: SessionHandle,
    what: string,
    pred: (s: SessionSnapshot) => boolean,
    timeoutMs = 150_000,
  ): Promise<SessionSnapshot> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        stop();
        reject(new Error(`no ${what} within ${timeoutMs} ms; last error: ${handle.getSnapshot().error}`));
      }, timeoutMs);
      const check = (s: SessionSnapshot) => {
        if (!pred(s)) return;
        clearTimeout(timer);
        stop();
        resolve(s);
      };
      const stop = handle.subscribe(check);
      check(handle.getSnapshot());
    });
  }

  it("is streamed and paged cut down, marked truncated, and readFullEvent returns it whole", { timeout: 200_000 }, async () => {
    const sid = "ts-big";
    const inner = grpcWeb();
    let subscribes = 0;
    const chunks: ReadFullEventResponse[] = [];
    const client: Client<typeof SessionService> = {
      ...inner,
      subscribe(req, opts) {
        subscribes++;
        return inner.subscribe(req, opts);
      },
      readFullEvent(req, opts) {
        const stream = inner.readFullEvent(req, opts);
        return (async function* () {
          for await (const c of stream) {
            chunks.push(c);
            yield c;
          }
        })();
      },
    };
    const handle = new SessionHandle(client, sid);
    try {
      await snapshotWhere(handle, "caught up", (s) => s.hydrationPhase === "ready" && s.connected);
      await handle.start({ prompt: `BIG ${ANSWER_BYTES}` });
      const snap = await snapshotWhere(handle, "turn_end", (s) =>
        s.events.some((e) => e.payload.case === "turnEnd"),
      );

      // Subscribe (the handle's one stream) delivered every event, cut to the budget.
      assert.equal(snap.error, undefined);
      assert.equal(subscribes, 1, "the handle never had to resubscribe");
      for (const e of snap.events) {
        assert.ok(toBinary(EventSchema, e).length <= MiB, `event ${e.seq} is over 1 MiB`);
      }
      const big = snap.events.find((e) => e.payload.case === "content" && e.truncated);
      assert.ok(big, "a content event marked truncated");
      assert.equal(big.payload.case, "content");
      const t = big.truncated!;
      assert.ok(t.originalSize > 4 * MiB, `originalSize ${t.originalSize}`);
      assert.ok(t.originalSize > 12_000_000n, `originalSize ${t.originalSize} holds the text twice`);
      assert.ok(t.cliLineSize > BigInt(ANSWER_BYTES), `cliLineSize ${t.cliLineSize}`);
      assert.ok(t.fields.includes("cli_line"), `fields ${t.fields}`);
      assert.equal(big.cliLine, "");
      const cutText = big.payload.value.blocks[0]!.text;
      assert.ok(cutText.startsWith("big 0 big 1 "), cutText.slice(0, 40));
      assert.ok(cutText.length < 1_100_000, `cut text is ${cutText.length} long`);

      // History with the same 4 MiB limit: every page fits, the log is whole, the event is cut.
      const history: Event[] = [];
      for (let beforeSeq = 0n; ; ) {
        const page = await client.history({ sessionId: sid, beforeSeq, limit: 1000 });
        history.unshift(...page.events);
        if (!page.hasMore) break;
        beforeSeq = page.events[0]!.seq;
      }
      assert.deepEqual(
        history.map((e) => e.seq),
        history.map((_, i) => BigInt(i + 1)),
      );
      const paged = history.find((e) => e.seq === big.seq)!;
      assert.deepEqual(paged.truncated?.fields, t.fields);
      assert.equal(paged.truncated?.originalSize, t.originalSize);

      // The whole CLI line, reassembled from 1 MiB chunks.
      const line = await readFullEvent(client, sid, big.seq);
      assert.ok(chunks.length >= 6, `${chunks.length} chunks`);
      assert.ok(chunks.every((c) => c.chunk.length <= MiB && c.totalSize === t.cliLineSize));
      const lineBytes = bytes(line);
      assert.equal(BigInt(lineBytes.length), t.cliLineSize);
      assert.deepEqual(await readFullEventBytes(client, sid, big.seq), lineBytes);
      const cli = JSON.parse(line) as { type: string; message: { content: { text: string }[] } };
      assert.equal(cli.type, "assistant");
      const text = cli.message.content[0]!.text;
      assert.equal(text.length, ANSWER_BYTES);
      assert.ok(text.startsWith("big 0 big 1 big 2 "));
      assert.ok(text.startsWith(cutText.slice(0, cutText.indexOf("…"))), "the cut text is a prefix of the whole");

      // The whole Event: protobuf, JSON, and through the handle (what useSession exposes).
      const whole = await readFullEvent(client, sid, big.seq, FullEventPart.EVENT);
      assert.equal(whole.truncated, undefined);
      assert.equal(whole.seq, big.seq);
      assert.equal(whole.cliLine, line);
      assert.equal(whole.payload.case, "content");
      assert.equal(whole.payload.value.blocks[0]!.text, text);
      assert.equal(BigInt(toBinary(EventSchema, whole).length), t.originalSize);
      const json = await readFullEvent(client, sid, big.seq, FullEventPart.EVENT_JSON);
      assert.equal(fromJsonString(EventSchema, json).cliLine, line);
      const viaHandle = await handle.readFullEvent(big.seq);
      assert.equal(viaHandle.cliLine, line);

      // An unknown seq is NOT_FOUND.
      await assert.rejects(readFullEvent(client, sid, 100_000n), (err: unknown) => {
        assert.equal(ConnectError.from(err).code, Code.NotFound);
        return true;
      });
    } finally {
      handle.close();
    }
  });

  it("the TypeScript example of docs/clients.md prints the whole 6 MB answer", { timeout: 200_000 }, async () => {
    const here = dirname(fileURLToPath(import.meta.url));
    const child = spawn(process.execPath, ["--import", "tsx", "example.ts", h.url, "ts-example-big", `BIG ${ANSWER_BYTES}`], {
      cwd: here,
      stdio: ["ignore", "pipe", "pipe"],
      timeout: 180_000,
    });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    child.stdout.on("data", (d: Buffer) => out.push(d));
    child.stderr.on("data", (d: Buffer) => err.push(d));
    const code = await new Promise<number | null>((res) => child.once("close", (c) => res(c)));
    const stderr = Buffer.concat(err).toString();
    assert.equal(code, 0, stderr.slice(-2000));
    const answer = Buffer.concat(out).toString().replace(/\n$/, "");
    assert.equal(answer.length, ANSWER_BYTES);
    assert.ok(answer.startsWith("big 0 big 1 big 2 "));
  });
});
