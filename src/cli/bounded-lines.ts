import { addAbortSignal, type Readable } from 'node:stream';

/** A line over the reader's limit: its bytes were skipped, not held. */
export interface TooLongLine {
  tooLong: number;
}

const LF = 10;
const CR = 13;

/**
 * The lines of a byte stream, split where readline splits them (`\n`, `\r\n`, a lone `\r`), each as its
 * bytes; a line over `maxBytes` comes as its length only. readline held a line
 * whole, however long: a file of one 600 MB line (a JSON dump on one line) took 700 MiB and then crashed
 * the command with readline's `RangeError: Invalid string length`, a stack trace and no line number.
 * An abort ends the lines at once, as readline's `signal` did (no line is read after it).
 */
export async function* boundedLines(input: Readable, maxBytes: number, stop?: AbortSignal): AsyncGenerator<Buffer | TooLongLine> {
  if (stop) addAbortSignal(stop, input);
  let parts: Buffer[] = [];
  let length = 0;
  /** The last chunk ended in `\r`: a `\n` starting the next one ends no other line. */
  let afterCr = false;
  const take = (): Buffer | TooLongLine => {
    // A line within one chunk (most lines) is a view of it, not a copy.
    const line = length > maxBytes ? { tooLong: length } : parts.length === 1 ? parts[0]! : Buffer.concat(parts, length);
    parts = [];
    length = 0;
    return line;
  };
  const add = (part: Buffer) => {
    length += part.length;
    // Past the limit nothing more is kept: the length is all that is said of the line.
    if (length <= maxBytes) parts.push(part);
    else parts = [];
  };
  try {
    for await (const chunk of input as AsyncIterable<Buffer>) {
      let pos = afterCr && chunk[0] === LF ? 1 : 0;
      afterCr = false;
      let cr = chunk.indexOf(CR, pos);
      let lf = chunk.indexOf(LF, pos);
      while (cr !== -1 || lf !== -1) {
        const end = cr === -1 ? lf : lf === -1 ? cr : Math.min(cr, lf);
        add(chunk.subarray(pos, end));
        yield take();
        if (stop?.aborted) return;
        pos = end + 1;
        if (end === cr) {
          if (pos === chunk.length) afterCr = true;
          else if (chunk[pos] === LF) pos++;
        }
        // Each search runs again only once passed: a chunk of many short lines is scanned once, not once a line.
        if (cr !== -1 && cr < pos) cr = chunk.indexOf(CR, pos);
        if (lf !== -1 && lf < pos) lf = chunk.indexOf(LF, pos);
      }
      if (pos < chunk.length) add(chunk.subarray(pos));
    }
  } catch (e) {
    if (stop?.aborted) return;
    throw e;
  }
  if (length > 0) yield take();
}
