import pino, { type Logger } from 'pino';

export type { Logger };

/**
 * Structured logs (one line per state change, never per message). Credentials are redacted wherever
 * they appear in a logged object.
 */
export function createLogger(options: { level?: string; name?: string } = {}): Logger {
  return pino({
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
  });
}
