import type { Logger } from '../log.js';

let count = 0;

/** Errors the last resort caught since the process started (the orderly_unexpected_errors_total metric). */
export function unexpectedErrorCount(): number {
  return count;
}

/**
 * The last resort of a long-running command (`run`, `serve`): a rejection nobody handled or an exception
 * nobody caught is a defect in Orderly, but one request or one export must not stop every other one. It
 * is logged with its stack, counted, and the process keeps serving. Returns the uninstaller.
 */
export function keepServingOnUnexpectedErrors(logger: Logger): () => void {
  const onRejection = (reason: unknown) => {
    count++;
    logger.error({ err: reason }, 'unhandled promise rejection (a defect in Orderly, please report it); still serving');
  };
  const onException = (err: Error, origin: string) => {
    count++;
    logger.error({ err, origin }, 'uncaught exception (a defect in Orderly, please report it); still serving');
  };
  process.on('unhandledRejection', onRejection);
  process.on('uncaughtException', onException);
  return () => {
    process.off('unhandledRejection', onRejection);
    process.off('uncaughtException', onException);
  };
}
