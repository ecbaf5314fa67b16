import { readFileSync } from 'node:fs';
import protobuf from 'protobufjs';
import { describe, expect, it } from 'vitest';
import { pubsubHandlers } from '../../src/api/pubsub-services.js';
import { pubsubRoot } from '../../src/api/pubsub-proto.js';
import { UNSUPPORTED_FIELDS } from '../../src/api/unsupported-fields.js';
import type { PubSubCore } from '../../src/core/pubsub-core.js';

/**
 * docs/api-coverage.md against the protos (issue #13): it lists every RPC of the services Orderly serves
 * and every field of every message those RPCs carry, each with a behaviour; output-only fields are
 * `output`, the refused fields are the ones the API refuses, and every implemented RPC has a handler.
 * A proto update that adds an RPC or a field fails here until the page says what Orderly does with it.
 */
const DOC = readFileSync(new URL('../../docs/api-coverage.md', import.meta.url), 'utf8');
const SERVICES = ['google.pubsub.v1.Publisher', 'google.pubsub.v1.Subscriber', 'google.pubsub.v1.SchemaService', 'google.iam.v1.IAMPolicy'];
const BEHAVIOURS = new Set(['implemented', 'stored only', 'refused', 'output']);

const root = pubsubRoot();

/** `| a | b | c |` rows of the table under each `### \`message\`` heading, and of the RPC table. */
function tables(): { rpcs: string[][]; messages: Map<string, string[][]> } {
  const messages = new Map<string, string[][]>();
  const rpcs: string[][] = [];
  let current: string[][] | undefined;
  for (const line of DOC.split('\n')) {
    const heading = /^### `([\w.]+)`$/.exec(line);
    if (heading) {
      current = [];
      messages.set(heading[1]!, current);
      continue;
    }
    if (line === '## RPCs') current = rpcs;
    if (/^## /.test(line) && line !== '## RPCs' && line !== '## Messages') current = undefined;
    if (!current || !line.startsWith('|') || /^\|[-|]+\|$/.test(line)) continue;
    const cells = line
      .slice(1, -1)
      .split('|')
      .map((c) => c.trim());
    if (cells[0] === 'Field' || cells[0] === 'Service') continue;
    current.push(cells);
  }
  return { rpcs, messages };
}

describe('docs/api-coverage.md matches the protos', () => {
  const { rpcs, messages } = tables();

  it('lists every RPC of the four services once, each with a behaviour; implemented ones have handlers, refused ones none', () => {
    const expected = SERVICES.flatMap((s) => root.lookupService(s).methodsArray.map((m) => `${s.split('.').at(-1)} ${m.name}`)).sort();
    expect(rpcs.map(([service, rpc]) => `${service} ${rpc}`).sort()).toEqual(expected);
    const handlers = pubsubHandlers({} as PubSubCore);
    for (const [service, rpc, behaviour] of rpcs) {
      expect(['implemented', 'refused'], `${service}.${rpc}`).toContain(behaviour);
      const full = SERVICES.find((s) => s.endsWith(`.${service}`))!;
      const has = rpc === 'StreamingPull' || handlers[full]?.[rpc!] !== undefined;
      expect(has, `${service}.${rpc} is ${behaviour}`).toBe(behaviour === 'implemented');
    }
  });

  it('has a table for every message the RPCs carry (except behind refused fields) listing exactly its fields', () => {
    const behaviourOf = (type: string, field: string) => messages.get(type)?.find((r) => r[0] === field)?.[1];
    const reachable = new Set<string>();
    const visit = (type: protobuf.Type) => {
      const name = type.fullName.slice(1);
      if (reachable.has(name) || name.startsWith('google.protobuf.')) return;
      reachable.add(name);
      for (const f of type.fieldsArray) {
        if (f.resolvedType instanceof protobuf.Type && behaviourOf(name, f.name) !== 'refused') visit(f.resolvedType);
      }
    };
    for (const s of SERVICES)
      for (const m of root.lookupService(s).methodsArray) [m.requestType, m.responseType].forEach((t) => visit(root.lookupType(t)));
    const withFields = [...reachable].filter((n) => root.lookupType(n).fieldsArray.length > 0).sort();
    expect([...messages.keys()].sort()).toEqual(withFields);
    for (const name of withFields) {
      const rows = messages.get(name)!;
      expect(
        rows.map((r) => r[0]),
        name,
      ).toEqual(root.lookupType(name).fieldsArray.map((f) => f.name));
      for (const [field, behaviour] of rows) expect(BEHAVIOURS.has(behaviour!), `${name}.${field}: ${behaviour}`).toBe(true);
    }
  });

  it('output-only fields (per the protos) are `output`; refused fields are exactly the ones the API refuses', () => {
    for (const [name, rows] of messages) {
      const type = root.lookupType(name);
      for (const [field, behaviour] of rows) {
        const outputOnly = type.fields[field!]!.options?.['(google.api.field_behavior)'] === 'OUTPUT_ONLY';
        if (outputOnly) expect(behaviour, `${name}.${field}`).toBe('output');
      }
    }
    const refused = (name: string) =>
      messages
        .get(name)!
        .filter(([, behaviour]) => behaviour === 'refused')
        .map(([field]) => field)
        .sort();
    expect(refused('google.pubsub.v1.Topic')).toEqual([...UNSUPPORTED_FIELDS.topic].sort());
    expect(refused('google.pubsub.v1.Subscription')).toEqual([...UNSUPPORTED_FIELDS.subscription].sort());
    expect(refused('google.pubsub.v1.PushConfig')).toEqual([...UNSUPPORTED_FIELDS.pushConfig].sort());
  });
});
