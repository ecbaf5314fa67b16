import { describe, expect, it } from 'vitest';
import { KeyTailGuard } from '../../src/connector/sources/key-tail-guard.js';

describe('KeyTailGuard: after N of a key failed, its later messages wait until the key starts over', () => {
  it('copies sent before the nack are refused; N coming back starts the key over', () => {
    const guard = new KeyTailGuard(2000);
    guard.fail('k', 'n', 1000, ['n+1']);
    expect(guard.admit('k', 'n+2', 1010)).toBe(false); // still on its way when N was nacked
    expect(guard.admit('other', 'x', 1010)).toBe(true); // other keys never wait
    expect(guard.admit('', 'y', 1010)).toBe(true);
    expect(guard.admit('k', 'n', 1050)).toBe(true);
    expect(guard.waiting).toBe(0);
    expect(guard.admit('k', 'n+1', 1060)).toBe(true);
  });

  it('N dead-lettered (or written by another worker): a message coming a second time is the fresh copy — admitted, however fast', () => {
    const guard = new KeyTailGuard(2000);
    guard.fail('k', 'n', 1000, ['n+1']);
    // n+1 was held when N failed (nacked with it): its next copy was sent after the nack.
    expect(guard.admit('k', 'n+1', 1001)).toBe(true);
    guard.fail('k', 'n', 2000);
    expect(guard.admit('k', 'n+3', 2001)).toBe(false);
    expect(guard.admit('k', 'n+3', 2002)).toBe(true); // at most one extra delivery attempt
  });

  it('after the stale window any message of the key starts it over', () => {
    const guard = new KeyTailGuard(2000);
    guard.fail('k', 'n', 1000);
    expect(guard.admit('k', 'n+5', 2999)).toBe(false);
    expect(guard.admit('k', 'n+6', 3000)).toBe(true);
  });

  it('an earlier message failing later becomes the one the key waits for', () => {
    const guard = new KeyTailGuard(2000);
    guard.fail('k', 'n+4', 1000, []);
    guard.fail('k', 'n+1', 1100, ['n+2', 'n+3']);
    expect(guard.admit('k', 'n+4', 1200)).toBe(false);
    expect(guard.admit('k', 'n+1', 1300)).toBe(true);
  });
});
