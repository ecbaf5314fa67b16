import { Presets, SingleBar } from 'cli-progress';
import { isUtf8 } from 'node:buffer';
import { createReadStream, statSync, type ReadStream } from 'node:fs';
import type { Readable } from 'node:stream';
import { LIMITS } from '../core/limits.js';
import { OrderlyError } from '../core/errors.js';
import { inputSize, type MessageInput } from '../core/message.js';
import { boundedLines } from './bounded-lines.js';

/** Publishes one request's messages (to a core in this process, or a running job's endpoint). */
export type PublishBatch = (messages: MessageInput[]) => Promise<string[]>;

export interface PublishFileOptions {
  /** A path, or '-' for stdin. */
  file: string;
  orderingKeyField?: string;
  attributesField?: string;
  progress?: boolean;
  /** Aborted with the signal's name (SIGINT): no line is read after it; the lines read so far are still published. */
  stop?: AbortSignal;
}

export interface PublishFileReport {
  published: number;
  refused: { line: number; reason: string }[];
  /** A stop (a signal) before the end of the file: every line up to `lastLine` was published or refused, none after it. */
  stopped?: { signal: string; lastLine: number };
}

const BATCH = 500;
/**
 * Bytes of a key's batch (data, ordering key, attributes, as Pub/Sub counts a request) before it goes out:
 * under the 10 MiB a publish request may hold, and its base64 under the endpoint's 14 MiB REST body.
 */
const BATCH_BYTES = 9 * 1024 * 1024;
/** Lines held across all keys before every key's batch goes out: many keys make small requests, never a large buffer. */
const MAX_BUFFERED = 10 * BATCH;
/**
 * And bytes: a key's batch waits for 9 MiB, so lines of megabytes on many keys were all held until the
 * line count above was reached (60 lines of 5 MB, each on its own key: 820 MiB of RSS, the whole file).
 */
const MAX_BUFFERED_BYTES = 32 * 1024 * 1024;
/** Requests of different keys in flight at once. */
const PARALLEL_REQUESTS = 16;

/**
 * A refusal of the message itself (INVALID_ARGUMENT): that line is refused and the rest go on. Anything
 * else (a missing topic, an endpoint that is gone) would refuse every line alike: publishing stops.
 */
function refusesTheLine(e: unknown): boolean {
  return e instanceof OrderlyError && e.code === 'INVALID_ARGUMENT';
}

/**
 * Publishes a JSONL file, one message per line (the line is the data). The ordering key and attributes
 * can come from fields of each line. Bad lines are refused with their line number; the rest go on. Any
 * other failure stops the publishing, saying how many lines went out before it.
 */
export async function publishFile(publish: PublishBatch, o: PublishFileOptions): Promise<PublishFileReport> {
  const report: PublishFileReport = { published: 0, refused: [] };
  // Node's own EISDIR does not say which path.
  const stat = o.file === '-' ? undefined : statSync(o.file, { throwIfNoEntry: false });
  if (stat?.isDirectory()) throw new OrderlyError('INVALID_ARGUMENT', `--file: ${o.file} is a directory, not a JSONL file`);
  // Node's own ENOENT names neither the flag nor a usage error (exit 1 as if a line had failed).
  if (o.file !== '-' && !stat) throw new OrderlyError('INVALID_ARGUMENT', `--file: ${o.file} does not exist`);
  // The file is read once, as it is published: a pipe (`--file <(...)`, a FIFO) cannot be read twice (a
  // first pass counting its lines took them all, and "published 0" followed), and a file over 512 MiB
  // cannot be held as one string. The progress is the share of the file's bytes read, when it has a size.
  // Lines come as bytes: they split where their bytes do, and each is checked as UTF-8 below. Read as
  // UTF-8, a line that was not had its bad bytes published as U+FFFD, and succeeded.
  const file = o.file === '-' ? undefined : createReadStream(o.file);
  const bar = o.progress && file && stat?.isFile() && stat.size > 0 ? progressBar(stat.size, file, report) : undefined;
  try {
    await publishLines(publish, file ?? process.stdin, o, report, bar?.update);
  } finally {
    bar?.stop();
  }
  report.refused.sort((a, b) => a.line - b.line);
  return report;
}

/** A bar on stderr: the share of the file's bytes read, and the lines published and refused so far. */
function progressBar(size: number, file: ReadStream, report: PublishFileReport) {
  const bar = new SingleBar(
    {
      format: 'publish [{bar}] {percentage}% of {size} | {published} published, {refused} refused',
      hideCursor: true,
      stream: process.stderr,
    },
    Presets.shades_classic,
  );
  const counts = () => ({ published: report.published, refused: report.refused.length });
  bar.start(size, 0, { size: `${(size / 1024 / 1024).toFixed(1)} MiB`, ...counts() });
  return { update: () => bar.update(file.bytesRead, counts()), stop: () => bar.stop() };
}

async function publishLines(
  publish: PublishBatch,
  input: Readable,
  o: PublishFileOptions,
  report: PublishFileReport,
  progress?: () => void,
): Promise<void> {
  // A publish request holds one ordering key's messages, as Pub/Sub requires (a request of mixed keys is
  // refused), so lines are batched per key; each key's batches go out in line order.
  const batches = new Map<string, { line: number; message: MessageInput }[]>();
  const batchBytes = new Map<string, number>();
  let buffered = 0;
  let bufferedBytes = 0;
  /** What stopped the publishing: no request starts after it, and it is thrown once those running ended (so the counts are final). */
  let failure: unknown;
  const flush = async (key: string) => {
    const pending = batches.get(key);
    if (!pending?.length || failure) return;
    batches.delete(key);
    bufferedBytes -= batchBytes.get(key) ?? 0;
    batchBytes.delete(key);
    buffered -= pending.length;
    try {
      // Awaited first: `published += await ...` would read the total before the wait, and requests run at once.
      const ids = await publish(pending.map((p) => p.message));
      report.published += ids.length;
    } catch (e) {
      if (!refusesTheLine(e)) {
        failure ??= e;
        return;
      }
      // One bad message fails its whole request: publish that batch line by line to find it.
      for (const p of pending) {
        if (failure) return;
        try {
          await publish([p.message]);
          report.published++;
        } catch (lineError) {
          if (!refusesTheLine(lineError)) failure ??= lineError;
          else report.refused.push({ line: p.line, reason: (lineError as Error).message });
        }
      }
    }
    progress?.();
  };
  const flushAll = async () => {
    const keys = [...batches.keys()];
    // Different keys have no order between them: several requests at once (one per key per line is CDC's
    // usual shape, and one request at a time made it ~250 msgs/s).
    const lane = async () => {
      for (let key = keys.shift(); key !== undefined && !failure; key = keys.shift()) await flush(key);
    };
    await Promise.all(Array.from({ length: Math.min(PARALLEL_REQUESTS, keys.length) }, lane));
  };
  let lineNo = 0;
  // The line is the message's data (a byte order mark aside): a longer one can never be published.
  for await (const bytes of boundedLines(input, LIMITS.maxDataBytes + BOM_BYTES, o.stop)) {
    lineNo++;
    if (!Buffer.isBuffer(bytes)) {
      report.refused.push({
        line: lineNo,
        reason: `the line is ${bytes.tooLong} bytes: a message's data (the line) may hold at most ${LIMITS.maxDataBytes}`,
      });
      continue;
    }
    const read = utf8Line(bytes);
    if (read === undefined) {
      report.refused.push({ line: lineNo, reason: 'not UTF-8: the line has bytes that are not UTF-8 text' });
      continue;
    }
    // A byte order mark (Windows editors write one) is no part of the first line's JSON, nor of its data.
    const text = lineNo === 1 && read.startsWith('\uFEFF') ? read.slice(1) : read;
    if (!text.trim()) continue;
    let message: MessageInput;
    try {
      message = toMessage(text, o);
    } catch (e) {
      report.refused.push({ line: lineNo, reason: (e as Error).message });
      continue;
    }
    const key = message.orderingKey ?? '';
    const size = inputSize(message);
    // A request over 10 MiB would be refused whole, and its lines sent again one request each.
    if ((batchBytes.get(key) ?? 0) + size > BATCH_BYTES) await flush(key);
    if (failure) break;
    const batch = batches.get(key) ?? [];
    batches.set(key, batch);
    batch.push({ line: lineNo, message });
    batchBytes.set(key, (batchBytes.get(key) ?? 0) + size);
    buffered++;
    bufferedBytes += size;
    if (batch.length >= BATCH) await flush(key);
    else if (buffered >= MAX_BUFFERED || bufferedBytes >= MAX_BUFFERED_BYTES) await flushAll();
    if (failure) break;
  }
  // The lines read before a stop are published all the same: what went out is then every line up to the last
  // one read, so the rest of the file can be published later from the next line on.
  await flushAll();
  if (failure) throw stopped(failure, report);
  if (o.stop?.aborted) report.stopped = { signal: String(o.stop.reason), lastLine: lineNo };
}

/** The text of a line's bytes, or undefined when they are not UTF-8. */
function utf8Line(bytes: Buffer): string | undefined {
  return isUtf8(bytes) ? bytes.toString('utf8') : undefined;
}
/** A UTF-8 byte order mark's bytes: no part of the first line's data. */
const BOM_BYTES = 3;

function stopped(e: unknown, report: PublishFileReport): Error {
  const message = `${(e as Error).message} (publishing stopped: ${report.published} lines published, ${report.refused.length} refused)`;
  return e instanceof OrderlyError ? new OrderlyError(e.code, message) : new Error(message, { cause: e });
}

function toMessage(text: string, o: PublishFileOptions): MessageInput {
  let record: Record<string, unknown>;
  try {
    record = JSON.parse(text) as Record<string, unknown>;
  } catch (e) {
    throw new Error(`not JSON: ${(e as Error).message}`, { cause: e });
  }
  const message: MessageInput = { data: text };
  if ((o.orderingKeyField || o.attributesField) && (record === null || typeof record !== 'object' || Array.isArray(record)))
    throw new Error(`the line is not a JSON object, so it has no field "${o.orderingKeyField ?? o.attributesField}"`);
  if (o.orderingKeyField) {
    const key = record[o.orderingKeyField];
    if (key === undefined) throw new Error(`field "${o.orderingKeyField}" (the ordering key) is missing`);
    if (typeof key !== 'string' && typeof key !== 'number')
      throw new Error(`field "${o.orderingKeyField}" (the ordering key) must be a string or an integer, got ${jsonType(key)}`);
    // JSON.parse reads 9007199254740993 as ...992 and 1e21 back as "1e+21": two ids could share a key.
    if (typeof key === 'number' && !Number.isSafeInteger(key))
      throw new Error(
        `field "${o.orderingKeyField}" (the ordering key) is a number JSON cannot carry exactly (${key}); write it as a string`,
      );
    message.orderingKey = String(key);
  }
  if (o.attributesField && record[o.attributesField] !== undefined) {
    const attrs = record[o.attributesField];
    if (!attrs || typeof attrs !== 'object' || Object.values(attrs).some((v) => typeof v !== 'string')) {
      throw new Error(`field "${o.attributesField}" (the attributes) must be an object of strings`);
    }
    message.attributes = attrs as Record<string, string>;
  }
  return message;
}

/** What a JSON value is, as an error names it: `null`, `an array`, `a boolean`, `an object`. */
function jsonType(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  return typeof value === 'object' ? 'an object' : `a ${typeof value}`;
}
