/**
 * Polls until `check` returns true (real time), or fails with `what`: a function is called at the timeout,
 * so the failure can say the state it waited on (what a failure seen once in CI needs to be understood).
 */
export async function waitFor(what: string | (() => string), check: () => boolean | Promise<boolean>, timeoutMs = 20_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (Date.now() < end) {
    if (await check()) return;
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error(`timed out waiting for ${typeof what === 'string' ? what : what()}`);
}
