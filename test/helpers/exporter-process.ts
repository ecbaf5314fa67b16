import { spawn } from 'node:child_process';

/**
 * Runs an exporter worker script in a child process. With `killAfterMs` it is SIGKILLed that long after
 * it printed its first line (so every round does real work before it dies); it resolves 'done' once the
 * worker printed DONE and exited.
 */
export function runExporterProcess(
  script: string,
  args: string[],
  options: { killAfterMs?: number; env?: NodeJS.ProcessEnv } = {},
): Promise<'done' | 'killed'> {
  const { killAfterMs } = options;
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', script, ...args], {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, ...options.env },
    });
    let out = '';
    let err = '';
    child.stderr.on('data', (c) => (err += c));
    child.stdout.on('data', (c) => {
      if (!out && killAfterMs !== undefined) setTimeout(() => child.kill('SIGKILL'), killAfterMs);
      out += c;
    });
    const limit = setTimeout(() => child.kill('SIGKILL'), 120_000);
    child.on('exit', (code, signal) => {
      clearTimeout(limit);
      if (out.includes('DONE')) return resolve('done');
      if (signal === 'SIGKILL' && killAfterMs !== undefined) return resolve('killed');
      reject(new Error(`exporter failed (${code ?? signal}): ${err}`));
    });
  });
}
