import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

/** The CLI entry point, run as users run it (`node bin/orderly.js`, TypeScript through tsx). */
export const orderlyBin = fileURLToPath(new URL('../../bin/orderly.js', import.meta.url));
const exec = promisify(execFile);

/** Runs the CLI; resolves with stdout, stderr and the exit code (never rejects on a non-zero exit). */
export async function orderly(...args: string[]): Promise<{ stdout: string; stderr: string; code: number }> {
  try {
    const { stdout, stderr } = await exec(process.execPath, [orderlyBin, ...args], {
      encoding: 'utf8',
      timeout: 90_000,
      maxBuffer: 64 * 1024 * 1024,
    });
    return { stdout, stderr, code: 0 };
  } catch (e) {
    const err = e as { stdout: string; stderr: string; code: number };
    return { stdout: err.stdout, stderr: err.stderr, code: err.code };
  }
}

/**
 * Runs the CLI as a user whom file modes bind: root writes any file whatever its mode, so as root the
 * command runs as `nobody` (65534). Resolves with its exit code (null if killed) and output.
 */
export function orderlyAsUser(args: string[]): Promise<{ code: number | null; stderr: string; stdout: string }> {
  const asRoot = process.getuid?.() === 0;
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [orderlyBin, ...args],
      { encoding: 'utf8', timeout: 20_000, killSignal: 'SIGKILL', ...(asRoot ? { uid: 65534, gid: 65534 } : {}) },
      (error, stdout, stderr) => resolve({ code: error ? ((error as { code?: number }).code ?? null) : 0, stdout, stderr }),
    );
  });
}
