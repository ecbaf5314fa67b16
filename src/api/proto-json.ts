import protobuf from 'protobufjs';
import { InvalidArgumentError } from '../core/errors.js';
import { PROTO_INT_RANGES } from '../schema/proto-json-decoder.js';
import type { ProtoDuration, ProtoFieldMask, ProtoObject } from './pubsub-messages.js';
import { MESSAGE_SHAPE } from './pubsub-proto.js';

/**
 * Proto3 JSON (the REST API's encoding) to and from the objects gRPC hands the handlers, driven by the
 * proto descriptors, so REST and gRPC share one mapping and one set of handlers:
 *
 * - `fromProtoJson` checks a JSON value against a message type — unknown fields, wrong types, a value
 *   given twice (as `ackIds` and `ack_ids`), two members of one oneof — and throws INVALID_ARGUMENT naming
 *   the field path (`messages[0].data`); then returns the object proto-loader would have decoded from the
 *   same message in binary (MESSAGE_SHAPE). `null` means "not set", as proto3 JSON says.
 * - `toProtoJson` writes a handler's response as Google's JSON API does: camelCase names, fields at their
 *   default left out, int64 as strings, bytes in base64, enums by name, Durations as `"600s"`, Timestamps
 *   in RFC 3339, FieldMasks as comma-separated camelCase paths.
 *
 * Orderly's own additions (JSON_EXTENSIONS: `exportConfig`, `parquetConfig`, `shards`) travel beside the
 * proto fields as plain JSON; the connectors that read them check them.
 */
export const JSON_EXTENSIONS: Readonly<Record<string, readonly string[]>> = {
  'google.pubsub.v1.Subscription': ['exportConfig'],
  'google.pubsub.v1.CloudStorageConfig': ['parquetConfig', 'shards'],
};

type Path = (string | number)[];
interface Extension {
  path: Path;
  value: unknown;
}

export function fromProtoJson(type: protobuf.Type, json: unknown, at = ''): ProtoObject {
  const extensions: Extension[] = [];
  const plain = messageFromJson(type, json, at, [], extensions, 0);
  const shaped: ProtoObject = type.toObject(type.fromObject(plain), MESSAGE_SHAPE);
  for (const { path, value } of extensions) {
    const parent = path.slice(0, -1).reduce((o, p) => o[p] as ProtoObject, shaped);
    parent[path[path.length - 1]!] = value;
  }
  return shaped;
}

/** How an answer's JSON spells what proto3 JSON leaves a choice in. */
export interface JsonAnswerOptions {
  /** Enums as their numbers (REST's `alt=json;enum-encoding=int`, which Google's clients send), not names. */
  numericEnums?: boolean;
}

export function toProtoJson(type: protobuf.Type, value: object | undefined, options: JsonAnswerOptions = {}): Record<string, unknown> {
  const original = (value ?? {}) as ProtoObject;
  const shaped: ProtoObject = type.toObject(type.fromObject(original), MESSAGE_SHAPE);
  return messageToJson(type, shaped, original, options);
}

// ---- decoding ----

const join = (at: string, key: string) => (at ? `${at}.${key}` : key);
const isObject = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v);
const camel = (name: string) => name.replace(/_([a-z0-9])/g, (_m, c: string) => c.toUpperCase());
const snake = (name: string) => name.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);

/**
 * Messages nest at most this deep, as protobuf decodes them (protoc's and protobufjs's recursion limit):
 * any JSON fits a Struct, and one nesting thousands deep overflowed the stack (a 500 INTERNAL).
 */
const MAX_DEPTH = 100;

function messageFromJson(type: protobuf.Type, json: unknown, at: string, path: Path, extensions: Extension[], depth: number): ProtoObject {
  if (depth > MAX_DEPTH) throw tooDeep(at);
  const wellKnown = WELL_KNOWN[type.fullName];
  if (wellKnown) return wellKnown.fromJson(json, at, depth) as ProtoObject;
  if (!isObject(json)) throw new InvalidArgumentError(at || 'request body', 'must be a JSON object');
  const out: ProtoObject = {};
  const given = new Map<string, string>();
  const oneofs = new Map<string, string>();
  for (const [key, value] of Object.entries(json)) {
    const name = camel(key);
    const where = join(at, key);
    const field = Object.hasOwn(type.fields, name) ? type.fields[name]! : undefined;
    if (!field) {
      if (!JSON_EXTENSIONS[type.fullName.slice(1)]?.includes(key)) throw new InvalidArgumentError(where, 'unknown field');
      if (value !== null) extensions.push({ path: [...path, key], value });
      continue;
    }
    const twice = given.get(name);
    if (twice !== undefined) throw new InvalidArgumentError(where, `is given twice (also as ${twice})`);
    given.set(name, key);
    if (value === null) continue;
    const oneof = field.partOf;
    if (oneof) {
      const other = oneofs.get(oneof.name);
      if (other !== undefined)
        throw new InvalidArgumentError(where, `only one of ${oneof.oneof.join(', ')} may be set (${other} is set too)`);
      oneofs.set(oneof.name, key);
    }
    out[name] = fieldFromJson(field, value, where, [...path, name], extensions, depth + 1);
  }
  return out;
}

/** A field's value; `depth` is that of a message it holds. */
function fieldFromJson(field: protobuf.Field, value: unknown, where: string, path: Path, extensions: Extension[], depth: number): unknown {
  if (field.map) {
    if (!isObject(value)) throw new InvalidArgumentError(where, `must be an object of ${noun(field)} values`);
    const keyType = (field as unknown as protobuf.MapField).keyType;
    const entries = Object.entries(value).map(([k, v]): [string, unknown] => {
      scalarFromJson(keyType, k, `${where}.${k} (key)`);
      return [k, singleFromJson(field, v, `${where}.${k}`, [...path, k], extensions, depth)];
    });
    // fromEntries defines every key as an own property: assigning `__proto__` would set the prototype instead.
    const out = Object.fromEntries(entries);
    if (keyType !== 'string' || field.type !== 'string') return out;
    // A map of strings needs no shaping, and protobufjs's would drop a `__proto__` key (an attribute's, say): set after it.
    extensions.push({ path, value: out });
    return undefined;
  }
  if (field.repeated) {
    if (!Array.isArray(value)) throw new InvalidArgumentError(where, `must be a list of ${noun(field)}s`);
    return value.map((v, i) => singleFromJson(field, v, `${where}[${i}]`, [...path, i], extensions, depth));
  }
  return singleFromJson(field, value, where, path, extensions, depth);
}

function singleFromJson(field: protobuf.Field, value: unknown, where: string, path: Path, extensions: Extension[], depth: number): unknown {
  const t = field.resolvedType;
  if (t instanceof protobuf.Type) return messageFromJson(t, value, where, path, extensions, depth);
  if (t instanceof protobuf.Enum) return enumFromJson(t, value, where);
  return scalarFromJson(field.type, value, where);
}

function noun(field: protobuf.Field): string {
  const t = field.resolvedType;
  if (t instanceof protobuf.Type) return WELL_KNOWN[t.fullName]?.noun ?? 'message';
  if (t instanceof protobuf.Enum) return `${t.name} name`;
  return SCALAR_NOUNS[field.type] ?? field.type;
}

const SCALAR_NOUNS: Record<string, string> = {
  string: 'string',
  bool: 'true/false value',
  bytes: 'base64 string',
  double: 'number',
  float: 'number',
};

function enumFromJson(type: protobuf.Enum, value: unknown, where: string): string {
  if (typeof value === 'string' && Object.hasOwn(type.values, value)) return value;
  if (typeof value === 'number' && Number.isInteger(value) && type.valuesById[value] !== undefined) return type.valuesById[value];
  throw new InvalidArgumentError(
    where,
    `must be one of ${Object.keys(type.values).join(', ')}, got ${JSON.stringify(value) ?? String(value)}`,
  );
}

/** In a `u` regex a surrogate pair is one code point, so only a half without its other half matches. */
const LONE_SURROGATE = /[\uD800-\uDFFF]/u;

function scalarFromJson(type: string, value: unknown, where: string): unknown {
  switch (type) {
    case 'string':
      if (typeof value !== 'string') throw new InvalidArgumentError(where, 'must be a string');
      // JSON may escape half of a surrogate pair alone ("\ud800"); as UTF-8 it would be stored as U+FFFD.
      if (LONE_SURROGATE.test(value)) throw new InvalidArgumentError(where, 'is not valid Unicode (a lone surrogate)');
      return value;
    case 'bool':
      if (typeof value !== 'boolean') throw new InvalidArgumentError(where, 'must be true or false');
      return value;
    case 'bytes':
      // Standard or URL-safe base64, padded or not, as proto3 JSON reads bytes.
      if (
        typeof value !== 'string' ||
        !/^[A-Za-z0-9+/_-]*={0,2}$/.test(value) ||
        value.replace(/=+$/, '').length % 4 === 1 ||
        (value.endsWith('=') && value.length % 4 !== 0)
      ) {
        throw new InvalidArgumentError(where, 'must be a base64 string');
      }
      return Buffer.from(value, 'base64');
    case 'double':
    case 'float': {
      if (typeof value === 'number') return value;
      if (value === 'NaN' || value === 'Infinity' || value === '-Infinity') return Number(value);
      if (typeof value === 'string' && value.trim() !== '' && Number.isFinite(Number(value))) return Number(value);
      throw new InvalidArgumentError(where, 'must be a number');
    }
  }
  const range = PROTO_INT_RANGES[type];
  if (!range) throw new Error(`proto-json: no JSON reading for the ${type} type`);
  const integer = (typeof value === 'number' && Number.isSafeInteger(value)) || (typeof value === 'string' && /^-?\d{1,20}$/.test(value));
  if (!integer) throw new InvalidArgumentError(where, 'must be an integer (a number or a decimal string)');
  const n = BigInt(value);
  if (n < range[0] || n > range[1]) throw new InvalidArgumentError(where, `is out of the ${type} range`);
  return type.endsWith('64') ? n.toString() : Number(n);
}

// ---- encoding ----

function messageToJson(
  type: protobuf.Type,
  shaped: ProtoObject,
  original: ProtoObject | undefined,
  options: JsonAnswerOptions,
): Record<string, unknown> {
  const wellKnown = WELL_KNOWN[type.fullName];
  if (wellKnown) return wellKnown.toJson(shaped) as Record<string, unknown>;
  const out: Record<string, unknown> = {};
  for (const field of type.fieldsArray) {
    const v = shaped[field.name];
    if (v === null || v === undefined) continue;
    const from = original?.[field.name];
    if (field.map) {
      // A map of strings as given (see fieldFromJson): protobufjs's copy would have lost a `__proto__` key.
      const entries = Object.entries(field.type === 'string' && isObject(from) ? from : v);
      if (entries.length)
        out[field.name] = Object.fromEntries(
          entries.map(([k, x]) => [k, singleToJson(field, x, (from as ProtoObject | undefined)?.[k], options)]),
        );
    } else if (field.repeated) {
      if ((v as unknown[]).length)
        out[field.name] = (v as unknown[]).map((x, i) => singleToJson(field, x, (from as unknown[] | undefined)?.[i], options));
    } else if ((field.partOf && shaped[field.partOf.name] === field.name) || !isDefault(field, v)) {
      out[field.name] = singleToJson(field, v, from, options);
    }
  }
  for (const key of JSON_EXTENSIONS[type.fullName.slice(1)] ?? []) {
    if (original?.[key] !== undefined && original[key] !== null) out[key] = original[key];
  }
  return out;
}

function isDefault(field: protobuf.Field, v: unknown): boolean {
  const t = field.resolvedType;
  if (t instanceof protobuf.Type) return false;
  if (t instanceof protobuf.Enum) return v === t.valuesById[0] || v === 0;
  if (field.type === 'bytes') return (v as Uint8Array).length === 0;
  // int64 fields travel as strings: "0" is their default, but a string field's "0" is a value.
  if (v === '0') return INT64_TYPES.has(field.type);
  return v === '' || v === false || v === 0;
}

const INT64_TYPES = new Set(['int64', 'uint64', 'sint64', 'fixed64', 'sfixed64']);

function singleToJson(field: protobuf.Field, v: unknown, original: unknown, options: JsonAnswerOptions): unknown {
  const t = field.resolvedType;
  if (t instanceof protobuf.Type) return messageToJson(t, v as ProtoObject, original as ProtoObject | undefined, options);
  if (t instanceof protobuf.Enum && options.numericEnums && typeof v === 'string') return t.values[v] ?? v;
  if (field.type === 'bytes') return Buffer.from(v as Uint8Array).toString('base64');
  if (typeof v === 'number' && !Number.isFinite(v)) return String(v);
  return v;
}

// ---- well-known types ----

/** Whether a message type is written as JSON of its own (a string for a Duration, any object for a Struct) rather than as its fields. */
export function isWellKnown(type: protobuf.Type): boolean {
  return WELL_KNOWN[type.fullName] !== undefined;
}

interface WellKnown {
  noun: string;
  /** `depth`: the message's own, for one that holds messages (a Struct). */
  fromJson(json: unknown, at: string, depth: number): unknown;
  toJson(value: ProtoObject): unknown;
}

const DURATION = /^(-)?(\d{1,12})(?:\.(\d{1,9}))?s$/;
/** Timestamps run from 0001-01-01T00:00:00Z, as google.protobuf.Timestamp says. */
const MIN_TIMESTAMP_MS = Date.parse('0001-01-01T00:00:00Z');
const TIMESTAMP = /^(\d{4}-\d{2}-\d{2})[Tt](\d{2}:\d{2}:\d{2})(?:\.(\d{1,9}))?([Zz]|[+-]\d{2}:\d{2})$/;

/** A date that is in the calendar, a time of day of 00:00:00–23:59:59 and an offset of at most ±23:59. */
function realDateTime(date: string, time: string, offset: string): boolean {
  const [year, month, day] = date.split('-').map(Number) as [number, number, number];
  const [hours, minutes, seconds] = time.split(':').map(Number) as [number, number, number];
  const daysInMonth = new Date(Date.UTC(2000, month, 0)).getUTCDate() - (month === 2 && !isLeapYear(year) ? 1 : 0);
  const [offsetHours, offsetMinutes] = offset.length === 6 ? offset.slice(1).split(':').map(Number) : [0, 0];
  return (
    month >= 1 &&
    month <= 12 &&
    day >= 1 &&
    day <= daysInMonth &&
    hours <= 23 &&
    minutes <= 59 &&
    seconds <= 59 &&
    offsetHours! <= 23 &&
    offsetMinutes! <= 59
  );
}

function isLeapYear(year: number): boolean {
  return (year % 4 === 0 && year % 100 !== 0) || year % 400 === 0;
}

/** 0, 3, 6 or 9 fractional digits, as Google's JSON printers write them. */
function fraction(nanos: number): string {
  if (!nanos) return '';
  const digits = String(Math.abs(nanos)).padStart(9, '0');
  return `.${digits.endsWith('000000') ? digits.slice(0, 3) : digits.endsWith('000') ? digits.slice(0, 6) : digits}`;
}

const WELL_KNOWN: Record<string, WellKnown> = {
  '.google.protobuf.Duration': {
    noun: 'duration',
    fromJson(json, at) {
      const m = typeof json === 'string' ? DURATION.exec(json) : null;
      if (!m) throw new InvalidArgumentError(at, 'must be a duration string like "600s"');
      const sign = m[1] ? -1 : 1;
      return { seconds: `${m[1] ?? ''}${m[2]}`, nanos: sign * Number((m[3] ?? '').padEnd(9, '0')) };
    },
    toJson: (value) => {
      const d = value as ProtoDuration;
      const seconds = BigInt(d.seconds ?? 0);
      const nanos = Number(d.nanos ?? 0);
      const negative = seconds < 0n || nanos < 0;
      return `${negative ? '-' : ''}${(seconds < 0n ? -seconds : seconds).toString()}${fraction(nanos)}s`;
    },
  },
  '.google.protobuf.Timestamp': {
    noun: 'timestamp',
    fromJson(json, at) {
      const m = typeof json === 'string' ? TIMESTAMP.exec(json) : null;
      // Date.parse alone takes 2026-02-30 as March 2 and 24:00 as the next day's midnight.
      const ms = m && realDateTime(m[1]!, m[2]!, m[4]!) ? Date.parse(`${m[1]}T${m[2]}${m[4]!.toUpperCase()}`) : NaN;
      if (!m || !Number.isFinite(ms) || ms < MIN_TIMESTAMP_MS) {
        throw new InvalidArgumentError(at, 'must be an RFC 3339 timestamp like "2024-05-01T12:00:00Z"');
      }
      return { seconds: String(Math.floor(ms / 1000)), nanos: Number((m[3] ?? '').padEnd(9, '0')) };
    },
    toJson: (value) => {
      const t = value as ProtoDuration;
      const iso = new Date(Number(t.seconds ?? 0) * 1000).toISOString();
      return `${iso.slice(0, 19)}${fraction(Number(t.nanos ?? 0))}Z`;
    },
  },
  '.google.protobuf.FieldMask': {
    noun: 'field mask',
    fromJson(json, at) {
      if (typeof json !== 'string') throw new InvalidArgumentError(at, 'must be a string of comma-separated field paths');
      return {
        paths: json
          .split(',')
          .filter(Boolean)
          .map((p) => p.split('.').map(snake).join('.')),
      };
    },
    toJson: (m) => ((m as ProtoFieldMask).paths ?? []).map((p) => p.split('.').map(camel).join('.')).join(','),
  },
  '.google.protobuf.Empty': {
    noun: 'empty object',
    fromJson(json, at) {
      if (!isObject(json)) throw new InvalidArgumentError(at, 'must be a JSON object');
      const [extra] = Object.keys(json);
      if (extra !== undefined) throw new InvalidArgumentError(join(at, extra), 'unknown field');
      return {};
    },
    toJson: () => ({}),
  },
  '.google.protobuf.Struct': {
    noun: 'JSON object',
    fromJson(json, at, depth) {
      if (!isObject(json)) throw new InvalidArgumentError(at, 'must be a JSON object');
      return structValue(json, at, depth);
    },
    toJson: (s) => structJson(s),
  },
};

const tooDeep = (at: string) =>
  new InvalidArgumentError(at, `nests messages deeper than ${MAX_DEPTH} levels (each object or list in a Struct is two: it and its Value)`);

/** A JSON object as google.protobuf.Struct (fromObject form), the Struct at `depth`. */
function structValue(json: Record<string, unknown>, at: string, depth: number): ProtoObject {
  if (depth > MAX_DEPTH) throw tooDeep(at);
  return { fields: Object.fromEntries(Object.entries(json).map(([k, v]) => [k, jsonValue(v, at, depth + 1)])) };
}

/** A JSON value as google.protobuf.Value, the Value at `depth`. */
function jsonValue(v: unknown, at: string, depth: number): ProtoObject {
  if (depth > MAX_DEPTH) throw tooDeep(at);
  if (v === null) return { nullValue: 'NULL_VALUE' };
  if (typeof v === 'number') return { numberValue: v };
  if (typeof v === 'string') return { stringValue: v };
  if (typeof v === 'boolean') return { boolValue: v };
  if (Array.isArray(v)) {
    if (depth + 1 > MAX_DEPTH) throw tooDeep(at);
    return { listValue: { values: v.map((x) => jsonValue(x, at, depth + 2)) } };
  }
  return { structValue: structValue(v as Record<string, unknown>, at, depth + 1) };
}

/** google.protobuf.Struct and Value as MESSAGE_SHAPE decodes them (`kind` names the member of the oneof that is set). */
interface ProtoStruct {
  fields?: Record<string, ProtoValue>;
}

interface ProtoValue {
  kind?: string;
  structValue?: ProtoStruct | null;
  listValue?: { values?: ProtoValue[] } | null;
  numberValue?: number;
  stringValue?: string;
  boolValue?: boolean;
}

function structJson(s: ProtoStruct): Record<string, unknown> {
  return Object.fromEntries(Object.entries(s.fields ?? {}).map(([k, v]) => [k, valueJson(v)]));
}

function valueJson(v: ProtoValue): unknown {
  if (v.structValue) return structJson(v.structValue);
  if (v.listValue) return (v.listValue.values ?? []).map(valueJson);
  if (v.kind === 'numberValue') return v.numberValue;
  if (v.kind === 'stringValue') return v.stringValue;
  if (v.kind === 'boolValue') return v.boolValue;
  return null;
}
