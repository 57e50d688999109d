// Fetching an event whole. An event larger than the server's per-event
// budget (--max-event-bytes, 1 MiB by default) is streamed cut down and
// marked `truncated` (Subscribe, History, everywhere), so no message exceeds
// gRPC's 4 MiB default; the server keeps the whole event, and ReadFullEvent
// streams it back in chunks of at most 1 MiB. These helpers put the chunks
// back together and check them against the stream's total_size.

import { Code, ConnectError } from "@connectrpc/connect";
import type { CallOptions, Client } from "@connectrpc/connect";
import { fromBinary } from "@bufbuild/protobuf";
import { EventSchema, type Event } from "./gen/agentharness/v1/events_pb.js";
import { FullEventPart, type SessionService } from "./gen/agentharness/v1/session_service_pb.js";
import { sessionHeaders } from "./routing.js";

/** Options of {@link readFullEvent} and {@link readFullEventBytes}: call options plus the chunk size. */
export interface ReadFullEventOptions extends CallOptions {
  /** Bytes per chunk (default and maximum 1 MiB, the server's). */
  chunkSize?: number;
}

/**
 * The whole stored form of event `seq` of a session, as bytes: the chunks of
 * one ReadFullEvent stream, placed at their offsets. Rejects with the call's
 * ConnectError (NOT_FOUND for an unknown session or seq), or DATA_LOSS when
 * the chunks do not add up to the stream's total_size (a gap, an overlap, a
 * changing total, a stream that ends early).
 */
export async function readFullEventBytes(
  client: Client<typeof SessionService>,
  sessionId: string,
  seq: bigint,
  part: FullEventPart = FullEventPart.CLI_LINE,
  options: ReadFullEventOptions = {},
): Promise<Uint8Array> {
  const { chunkSize = 0, ...callOptions } = options;
  const stream = client.readFullEvent(
    { sessionId, seq, part, chunkSize },
    { ...callOptions, headers: sessionHeaders(callOptions.headers, sessionId) },
  );
  let whole: Uint8Array | undefined;
  let total = 0n;
  let received = 0n;
  for await (const res of stream) {
    if (whole === undefined) {
      total = res.totalSize;
      if (total > BigInt(Number.MAX_SAFE_INTEGER)) throw dataLoss(`total_size ${total} is too large`);
      whole = new Uint8Array(Number(total));
    } else if (res.totalSize !== total) {
      throw dataLoss(`total_size changed from ${total} to ${res.totalSize}`);
    }
    if (res.offset !== received) throw dataLoss(`chunk at offset ${res.offset}, expected ${received}`);
    const end = res.offset + BigInt(res.chunk.length);
    if (end > total) throw dataLoss(`chunk ends at ${end}, past total_size ${total}`);
    whole.set(res.chunk, Number(res.offset));
    received = end;
  }
  if (whole === undefined) throw dataLoss("ReadFullEvent sent no chunk");
  if (received !== total) throw dataLoss(`ReadFullEvent ended at ${received} of ${total} bytes`);
  return whole;
}

/**
 * The whole form of event `seq` of a session, fetched with ReadFullEvent
 * (see {@link readFullEventBytes} for the checks and errors):
 * - `FullEventPart.CLI_LINE` (the default): the CLI's stdout line, as a
 *   string (empty for events the harness records itself);
 * - `FullEventPart.EVENT`: the whole `Event`, decoded;
 * - `FullEventPart.EVENT_JSON`: the whole `Event` as proto3 JSON text.
 *
 * Call it for an event whose `truncated` is set, e.g.
 * `if (e.truncated) e = await readFullEvent(client, sessionId, e.seq, FullEventPart.EVENT)`.
 */
export function readFullEvent(
  client: Client<typeof SessionService>,
  sessionId: string,
  seq: bigint,
  part?: FullEventPart.CLI_LINE | FullEventPart.UNSPECIFIED | FullEventPart.EVENT_JSON,
  options?: ReadFullEventOptions,
): Promise<string>;
export function readFullEvent(
  client: Client<typeof SessionService>,
  sessionId: string,
  seq: bigint,
  part: FullEventPart.EVENT,
  options?: ReadFullEventOptions,
): Promise<Event>;
export function readFullEvent(
  client: Client<typeof SessionService>,
  sessionId: string,
  seq: bigint,
  part?: FullEventPart,
  options?: ReadFullEventOptions,
): Promise<string | Event>;
export async function readFullEvent(
  client: Client<typeof SessionService>,
  sessionId: string,
  seq: bigint,
  part: FullEventPart = FullEventPart.CLI_LINE,
  options: ReadFullEventOptions = {},
): Promise<string | Event> {
  const bytes = await readFullEventBytes(client, sessionId, seq, part, options);
  if (part === FullEventPart.EVENT) return fromBinary(EventSchema, bytes);
  return new TextDecoder("utf-8", { fatal: true }).decode(bytes);
}

function dataLoss(message: string): ConnectError {
  return new ConnectError(message, Code.DataLoss);
}
