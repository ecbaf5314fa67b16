import pino, { type DestinationStream, type Logger } from 'pino';

export type { Logger };

/**
 * Structured logs (one line per state change, never per message). Credentials are redacted wherever
 * they appear in a logged object.
 */
export function createLogger(options: { level?: string; name?: string } = {}): Logger {
  return pino(
    {
      name: options.name ?? 'orderly',
      level: options.level ?? process.env.ORDERLY_LOG_LEVEL ?? (process.env.VITEST ? 'silent' : 'info'),
      redact: {
        paths: [
          '*.secretAccessKey',
          '*.accessKeyId',
          '*.sessionToken',
          '*.password',
          '*.credentials',
          'credentials',
          '*.authToken',
          'authToken',
        ],
        censor: '[redacted]',
      },
    },
    standardOutput(),
  );
}

/**
 * Standard output, written synchronously (a line per state change, never per message), that stops logging
 * once a write fails. pino's own destination buffers and, when a write fails with anything but EPIPE,
 * retries the buffered lines at exit forever: a job whose terminal hung up (EIO) stopped on SIGTERM but
 * its process never ended.
 */
function standardOutput(): DestinationStream {
  const destination = pino.destination({ dest: 1, sync: true });
  destination.on('error', () => {
    destination.write = () => true;
  });
  return destination;
}
