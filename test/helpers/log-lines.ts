import { Writable } from 'node:stream';
import pino, { type Logger } from 'pino';

/** One line of a captured log: the fields a test reads. */
export interface LogLine {
  level: number;
  msg: string;
  subscription?: string;
  state?: string;
  [field: string]: unknown;
}

/** A logger at info level whose lines are kept, parsed, in `lines` (what an operator reads in the job's log). */
export function capturedLogger(): { logger: Logger; lines: LogLine[] } {
  const lines: LogLine[] = [];
  const logged = new Writable({
    write(chunk: Buffer, _encoding, done) {
      lines.push(JSON.parse(chunk.toString()) as LogLine);
      done();
    },
  });
  return { logger: pino({ level: 'info' }, logged), lines };
}
