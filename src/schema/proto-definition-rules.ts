import protobuf from 'protobufjs';
import { InvalidArgumentError } from '../core/errors.js';
import { defaultJsonName, jsonName, protoFeature } from './proto-value.js';

/**
 * The rules protoc enforces on a `.proto` definition, and so Pub/Sub (which compiles a schema with it),
 * that protobufjs's lenient parser lets through. Checked over the schema's one message, everything
 * nested in it and the file's options:
 *
 * - Field numbers run from 1 to 536870911, skip 19000–19999 (protobuf's own), avoid the message's
 *   `reserved` numbers, names and its extension ranges; an extension's number lies in one of them.
 *   Extension ranges end by 536870911 too, except in a `message_set_wire_format` message, whose
 *   extension numbers are int32s: up to 2147483647, `max` being 2147483646.
 * - proto3 has no extension ranges and no `[default = ...]`; no edition allows a default on a field
 *   with implicit presence, a repeated field or a message field.
 * - No two fields of a message share a JSON name, unless the message has
 *   `option deprecated_legacy_json_field_conflicts = true`. In proto2 only a clash of two custom names
 *   (a `json_name` other than the field's default name) counts, as protoc only warns about the others.
 * - An enum value is a sibling of its enum (C++ scoping), so its name must be new in the enclosing
 *   scope: two enums of one message cannot both declare `X`.
 * - Options are the ones descriptor.proto defines: a custom option needs an import, which a schema
 *   cannot have.
 * - An open (proto3-style) enum's first value is zero.
 *
 * `where` is the request field the errors name; each error names the element (`M.a`) and the rule.
 */
export function checkProtoRules(message: protobuf.Type, where: string): void {
  const fail = (detail: string): never => {
    throw new InvalidArgumentError(where, detail);
  };
  // File options sit on the package (or the root without one): the top-level message's parent.
  checkOptions(message.parent ?? undefined, FILE_OPTIONS, 'the file', fail);
  checkType(message, fail);
}

type Fail = (detail: string) => never;

/** Field numbers beyond this do not fit the 29 bits a tag has for them. */
const MAX_FIELD_NUMBER = 536_870_911;
/** A MessageSet carries its extension numbers as int32s, so protoc lets its extension ranges go this far. */
const MAX_MESSAGE_SET_EXTENSION = 2_147_483_647;
const IMPLEMENTATION_RESERVED = [19_000, 19_999] as const;

/** The options descriptor.proto defines for each element (`default` and `json_name` are field pseudo-options). */
const FILE_OPTIONS = new Set([
  'java_package',
  'java_outer_classname',
  'java_multiple_files',
  'java_generate_equals_and_hash',
  'java_string_check_utf8',
  'optimize_for',
  'go_package',
  'cc_generic_services',
  'java_generic_services',
  'py_generic_services',
  'php_generic_services',
  'deprecated',
  'cc_enable_arenas',
  'objc_class_prefix',
  'csharp_namespace',
  'swift_prefix',
  'php_class_prefix',
  'php_namespace',
  'php_metadata_namespace',
  'ruby_package',
  'features',
]);
const MESSAGE_OPTIONS = new Set([
  'message_set_wire_format',
  'no_standard_descriptor_accessor',
  'deprecated',
  'map_entry',
  'deprecated_legacy_json_field_conflicts',
  'features',
]);
const FIELD_OPTIONS = new Set([
  'ctype',
  'packed',
  'jstype',
  'lazy',
  'unverified_lazy',
  'deprecated',
  'weak',
  'debug_redact',
  'retention',
  'targets',
  'edition_defaults',
  'features',
  'feature_support',
  'default',
  'json_name',
  // Not written by users: protobufjs marks a proto3 `optional` field with it.
  'proto3_optional',
]);
const ONEOF_OPTIONS = new Set(['features']);
const ENUM_OPTIONS = new Set(['allow_alias', 'deprecated', 'deprecated_legacy_json_field_conflicts', 'features']);
const ENUM_VALUE_OPTIONS = new Set(['deprecated', 'features', 'debug_redact', 'feature_support']);

function checkOptions(options: { options?: Record<string, unknown> } | undefined, known: Set<string>, what: string, fail: Fail): void {
  for (const key of Object.keys(options?.options ?? {})) {
    // `features.field_presence`, `(my.option).part`: the option is the first part.
    const name = key.startsWith('(') ? key.slice(0, key.indexOf(')') + 1) : key.split('.')[0]!;
    if (!known.has(name)) {
      const custom = name.startsWith('(') ? ' (a custom option needs an import of its definition, which a schema cannot have)' : '';
      fail(`${what} has an unknown option ${name}${custom}`);
    }
  }
}

/** An extension appears among its target's fields under its qualified name (`.pkg.M.e`), pointing at its declaration. */
function declarationOf(field: protobuf.Field): protobuf.Field | undefined {
  return (field as unknown as { declaringField?: protobuf.Field }).declaringField;
}

/** The oneof protobufjs (as protoc) makes for a proto3 `optional` field; protoc names it so it clashes with nothing. */
function isSynthetic(oneof: protobuf.OneOf): boolean {
  return oneof.fieldsArray.every((f) => f.options?.proto3_optional);
}

function qualified(obj: protobuf.ReflectionObject): string {
  return obj.fullName.slice(1);
}

/** The edition of the file an element is in: `proto2`, `proto3` or an edition (`2023`). */
function editionOf(obj: protobuf.ReflectionObject): string | undefined {
  for (let o: protobuf.ReflectionObject | null = obj; o; o = o.parent) {
    const edition = (o as unknown as { _edition?: string | null })._edition;
    if (edition) return edition;
  }
  return undefined;
}

function inRanges(ranges: ReadonlyArray<number[] | string> | undefined, id: number): boolean {
  return (ranges ?? []).some((r) => typeof r !== 'string' && id >= r[0]! && id <= r[1]!);
}

function isMessageSet(type: protobuf.Type): boolean {
  return type.options?.message_set_wire_format === true;
}

/**
 * A message's extension ranges as protoc reads them. protobufjs reads `max` as 536870911 whatever the
 * message; protoc's `max` in a MessageSet is 2147483646, so there a range ending at 536870911 is taken
 * for `to max` (a MessageSet range written to end at 536870911 exactly is then read wider than written).
 */
function extensionRanges(type: protobuf.Type): number[][] {
  const ranges = type.extensions ?? [];
  if (!isMessageSet(type)) return ranges;
  return ranges.map(([from, to]) => [from!, to === MAX_FIELD_NUMBER ? MAX_MESSAGE_SET_EXTENSION - 1 : to!]);
}

function checkType(type: protobuf.Type, fail: Fail): void {
  const name = qualified(type);
  checkOptions(type, MESSAGE_OPTIONS, `message ${name}`, fail);
  if (type.extensions?.length && editionOf(type) === 'proto3')
    fail(
      `message ${name} declares extensions ${type.extensions[0]![0]} to ${type.extensions[0]![1]}; proto3 does not allow extension ranges`,
    );
  const maxExtension = isMessageSet(type) ? MAX_MESSAGE_SET_EXTENSION : MAX_FIELD_NUMBER;
  for (const range of extensionRanges(type))
    if (range[1]! > maxExtension) fail(`message ${name} declares extensions up to ${range[1]}; extension numbers go up to ${maxExtension}`);
  for (const field of type.fieldsArray) checkField(type, field, fail);
  checkJsonNames(type, fail);
  for (const oneof of type.oneofsArray) checkOptions(oneof, ONEOF_OPTIONS, `oneof ${qualified(oneof)}`, fail);
  checkEnumValueScope(type, fail);
  for (const nested of type.nestedArray) {
    if (nested instanceof protobuf.Type) checkType(nested, fail);
    else if (nested instanceof protobuf.Enum) checkEnum(nested, fail);
  }
}

function checkField(type: protobuf.Type, field: protobuf.Field, fail: Fail): void {
  const extension = declarationOf(field);
  const what = extension ? `extension ${qualified(extension)}` : `field ${qualified(field)}`;
  const id = field.id;
  if (id < 1) fail(`${what} has number ${id}; field numbers start at 1`);
  // An extension's number is bounded by its target's extension ranges alone (a MessageSet's go further).
  if (id > MAX_FIELD_NUMBER && !extension) fail(`${what} has number ${id}; field numbers go up to ${MAX_FIELD_NUMBER}`);
  if (id >= IMPLEMENTATION_RESERVED[0] && id <= IMPLEMENTATION_RESERVED[1])
    fail(
      `${what} has number ${id}; numbers ${IMPLEMENTATION_RESERVED[0]} to ${IMPLEMENTATION_RESERVED[1]} are reserved for protobuf itself`,
    );
  checkOptions(field, FIELD_OPTIONS, what, fail);
  if (extension) {
    if (!inRanges(extensionRanges(type), id))
      fail(`${what} has number ${id}, which message ${qualified(type)} does not declare as an extension number`);
    return;
  }
  if (inRanges(type.reserved, id)) fail(`${what} uses number ${id}, which message ${qualified(type)} reserves`);
  if (type.reserved?.includes(field.name)) fail(`${what} uses the name ${field.name}, which message ${qualified(type)} reserves`);
  if (inRanges(type.extensions, id)) fail(`${what} has number ${id}, inside an extension range of message ${qualified(type)}`);
  if (field.options?.default !== undefined) {
    const why =
      editionOf(field) === 'proto3'
        ? 'proto3 does not allow default values'
        : field.repeated || field.map
          ? 'a repeated field cannot have one'
          : field.resolvedType instanceof protobuf.Type
            ? 'a message field cannot have one'
            : protoFeature(field, 'field_presence') === 'IMPLICIT'
              ? 'a field with implicit presence cannot have one'
              : undefined;
    if (why) fail(`${what} has a default value; ${why}`);
  }
}

/**
 * protoc's JSON name check (descriptor.cc, CheckFieldJsonNameUniqueness): once by the default names
 * alone, once with `json_name`s, where one counts as custom only if it differs from the default name.
 * The first field with a name keeps it. A legacy JSON format (proto2) only warns unless both names are
 * custom; `deprecated_legacy_json_field_conflicts` turns the check off.
 */
function checkJsonNames(type: protobuf.Type, fail: Fail): void {
  if (type.options?.deprecated_legacy_json_field_conflicts === true) return;
  const fields = type.fieldsArray.filter((f) => !declarationOf(f));
  const legacy = protoFeature(type, 'json_format') === 'LEGACY_BEST_EFFORT';
  for (const withCustom of [false, true]) {
    const seen = new Map<string, { field: protobuf.Field; custom: boolean }>();
    for (const field of fields) {
      const json = withCustom ? jsonName(field) : defaultJsonName(field);
      const custom = json !== defaultJsonName(field);
      const other = seen.get(json);
      if (!other) {
        seen.set(json, { field, custom });
        continue;
      }
      // Two default names clash in the first pass already.
      if (withCustom && !custom && !other.custom) continue;
      if (legacy && !(custom && other.custom)) continue;
      fail(`fields ${qualified(other.field)} and ${qualified(field)} of message ${qualified(type)} have the same JSON name "${json}"`);
    }
  }
}

/** Enum values live in the scope that holds their enum, beside its fields, oneofs and nested types. */
function checkEnumValueScope(type: protobuf.Type, fail: Fail): void {
  const declared = new Map<string, string>();
  for (const field of type.fieldsArray) if (!declarationOf(field)) declared.set(field.name, `field ${qualified(field)}`);
  for (const oneof of type.oneofsArray) if (!isSynthetic(oneof)) declared.set(oneof.name, `oneof ${qualified(oneof)}`);
  for (const nested of type.nestedArray) declared.set(nested.name, qualified(nested));
  for (const nested of type.nestedArray) {
    if (!(nested instanceof protobuf.Enum)) continue;
    for (const value of Object.keys(nested.values)) {
      const earlier = declared.get(value);
      if (earlier !== undefined)
        fail(
          `enum value ${value} of enum ${qualified(nested)} clashes with ${earlier}: an enum value is scoped beside its enum, so ${qualified(type)}.${value} is already defined`,
        );
      declared.set(value, `enum value ${value} of enum ${qualified(nested)}`);
    }
  }
}

function checkEnum(type: protobuf.Enum, fail: Fail): void {
  const name = qualified(type);
  checkOptions(type, ENUM_OPTIONS, `enum ${name}`, fail);
  for (const [value, options] of Object.entries(type.valuesOptions ?? {}))
    checkOptions({ options }, ENUM_VALUE_OPTIONS, `enum value ${name}.${value}`, fail);
  if (protoFeature(type, 'enum_type') === 'OPEN') {
    const first = Object.values(type.values)[0];
    if (first !== 0) fail(`the first value of enum ${name} must be zero (it is ${String(first)})`);
  }
}
