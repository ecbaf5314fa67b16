import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * Connector registrations of every copy of Orderly loaded in this process, by connector name: the folder
 * of the copy each went into. A plugin imports `orderly/connector` from its own node_modules; when the
 * `orderly` command that loads it is another installation (a global one, a checkout), the plugin
 * registers into that other copy's registry, and this copy would report its connector as unknown
 * although the plugin loaded. Kept on globalThis under a registered symbol so that every copy sees it.
 */
const REGISTRATIONS = Symbol.for('orderly.connectorRegistrations');

const copies = (): Map<string, string> => {
  const holder = globalThis as { [REGISTRATIONS]?: Map<string, string> };
  return (holder[REGISTRATIONS] ??= new Map<string, string>());
};

/** This copy's package folder (the nearest folder above this module holding a package.json). */
export const thisCopy: string = (() => {
  const own = dirname(fileURLToPath(import.meta.url));
  for (let dir = own; ; dir = dirname(dir)) {
    if (existsSync(join(dir, 'package.json'))) return dir;
    if (dirname(dir) === dir) return own;
  }
})();

/** Records that `name` was registered into this copy. */
export function recordRegistration(name: string): void {
  if (!copies().has(name)) copies().set(name, thisCopy);
}

/** The folder of another copy of Orderly that `name` was registered into, if any. */
export function otherCopyWith(name: string): string | undefined {
  const copy = copies().get(name);
  return copy !== undefined && copy !== thisCopy ? copy : undefined;
}
