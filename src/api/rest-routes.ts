import protobuf from 'protobufjs';
import { InvalidArgumentError } from '../core/errors.js';
import { fromProtoJson } from './proto-json.js';
import type { ProtoObject } from './pubsub-messages.js';
import { SYSTEM_PARAMETERS } from './system-parameters.js';

/**
 * Pub/Sub's REST API as HTTP/JSON transcoding of its gRPC methods, read from the `google.api.http`
 * annotations in the protos: the URL template binds request fields (`/v1/{topic=projects/*\/topics/*}:publish`),
 * `body` says which field the JSON body fills (`*`: the whole request), and the remaining fields of a
 * method without a body come from the query string. IAM's annotations bind `{resource=**}`; Pub/Sub
 * serves them for topics, subscriptions, snapshots and schemas, and so does Orderly.
 */
export interface RestRoute {
  method: string;
  pattern: RegExp;
  /** The request field each capture group of `pattern` fills (`name`, `topic.name`). */
  variables: string[];
  body: string;
  service: string;
  rpc: string;
  requestType: protobuf.Type;
  responseType: protobuf.Type;
}

const SERVICES = ['google.pubsub.v1.Publisher', 'google.pubsub.v1.Subscriber', 'google.pubsub.v1.SchemaService', 'google.iam.v1.IAMPolicy'];
const IAM_RESOURCES = ['topics', 'subscriptions', 'snapshots', 'schemas'];
const VERBS = ['get', 'put', 'post', 'patch', 'delete'] as const;

interface HttpRule {
  get?: string;
  put?: string;
  post?: string;
  patch?: string;
  delete?: string;
  body?: string;
}

export function restRoutes(root: protobuf.Root): RestRoute[] {
  const routes: RestRoute[] = [];
  for (const serviceName of SERVICES) {
    const service = root.lookupService(serviceName);
    for (const method of service.methodsArray) {
      if (method.requestStream || method.responseStream) continue;
      const rule = httpRule(method);
      if (!rule) continue;
      const verb = VERBS.find((v) => rule[v] !== undefined)!;
      let templates = [rule[verb]!];
      let methods = [verb.toUpperCase()];
      if (serviceName === 'google.iam.v1.IAMPolicy') {
        // Pub/Sub's own bindings; GetIamPolicy is a GET there (options in the query), and a POST per the IAM proto.
        templates = IAM_RESOURCES.map((kind) => rule[verb]!.replace('{resource=**}', `{resource=projects/*/${kind}/*}`));
        if (method.name === 'GetIamPolicy') methods = ['GET', 'POST'];
      }
      const requestType = root.lookupType(method.requestType);
      const responseType = root.lookupType(method.responseType);
      for (const template of templates) {
        for (const m of methods) {
          const { pattern, variables } = compileTemplate(template);
          routes.push({
            method: m,
            pattern,
            variables,
            body: m === 'GET' ? '' : (rule.body ?? ''),
            service: serviceName,
            rpc: method.name,
            requestType,
            responseType,
          });
        }
      }
    }
  }
  return routes;
}

function httpRule(method: protobuf.Method): HttpRule | undefined {
  for (const option of method.parsedOptions ?? []) {
    const rule = (option as Record<string, HttpRule>)['(google.api.http)'];
    if (rule) return rule;
  }
  return undefined;
}

/**
 * `/v1/{name=projects/*\/topics/*}:publish` -> a regex with one group per variable. A `*` is one path
 * segment, `:` included (a domain-scoped project, `example.com:my-project`), except the path's last
 * segment, where a `:` starts the verb: `topics/t:publish` is Publish, not a topic named `t:publish`.
 */
function compileTemplate(template: string): { pattern: RegExp; variables: string[] } {
  const variables: string[] = [];
  const escape = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  let source = '';
  let rest = template;
  while (rest) {
    const open = rest.indexOf('{');
    if (open < 0) {
      source += escape(rest);
      break;
    }
    source += escape(rest.slice(0, open));
    const close = rest.indexOf('}', open);
    const [field, path = '*'] = rest.slice(open + 1, close).split('=');
    variables.push(field!);
    rest = rest.slice(close + 1);
    const parts = path.split('/');
    const endsPath = rest === '' || rest.startsWith(':');
    source += `(${parts.map((p, i) => (p !== '*' ? escape(p) : endsPath && i === parts.length - 1 ? '[^/:]+' : '[^/]+')).join('/')})`;
  }
  return { pattern: new RegExp(`^${source}$`), variables };
}

/**
 * The request message of a matched route: URL variables (percent-decoded per segment), the JSON body at
 * its place, and (for methods without a body) query parameters, decoded and checked as proto3 JSON
 * (unknown fields and wrong types are INVALID_ARGUMENT naming the field).
 */
export function restRequest(route: RestRoute, match: RegExpExecArray, body: unknown, query: URLSearchParams): ProtoObject {
  let json: Record<string, unknown> = {};
  if (route.body === '*') {
    if (body !== undefined) json = body as Record<string, unknown>;
  } else if (route.body) {
    if (body !== undefined) json[route.body] = body;
  } else if (body !== undefined && body !== null && body !== '') {
    // "" is what Google's clients send over REST as the body of a POST that takes none (DetachSubscription).
    if (typeof body !== 'object' || Array.isArray(body))
      throw new InvalidArgumentError('request body', 'must be a JSON object (this method takes no body)');
    const [extra] = Object.keys(body);
    if (extra !== undefined) throw new InvalidArgumentError(extra, 'unknown field (this method takes no body)');
  }
  if (json === null || typeof json !== 'object' || Array.isArray(json))
    throw new InvalidArgumentError('request body', 'must be a JSON object');
  for (const [name, value] of queryFields(route, query)) setPath(json, name, value);
  route.variables.forEach((field, i) => {
    const value = decodePath(match[i + 1]!);
    const given = getPath(json, field);
    if (given !== undefined && given !== null && given !== value)
      throw new InvalidArgumentError(field, `must match the name in the URL (${value}), got ${JSON.stringify(given)}`);
    setPath(json, field, value);
  });
  return fromProtoJson(route.requestType, json);
}

/** Query parameters as request fields (their JSON values: true/false for booleans, lists for repeated fields). */
function queryFields(route: RestRoute, query: URLSearchParams): [string, unknown][] {
  const fields = new Map<string, unknown>();
  for (const [name, value] of query) {
    if (SYSTEM_PARAMETERS.has(name)) continue;
    if (route.body === '*')
      throw new InvalidArgumentError(name, 'unknown query parameter (this method takes its fields in the request body)');
    const field = fieldAt(route.requestType, name);
    if (!field) throw new InvalidArgumentError(name, 'unknown field');
    const v = queryValue(field, value);
    if (field.repeated) fields.set(name, [...((fields.get(name) as unknown[]) ?? []), v]);
    else if (fields.has(name)) throw new InvalidArgumentError(name, 'is given twice in the query string (it takes one value)');
    else fields.set(name, v);
  }
  return [...fields];
}

/**
 * A query parameter's text as the JSON value it stands for: a query string has only text, so an enum's
 * number (`view=2`, which Google's transcoding takes as readily as `view=FULL`) and a boolean are spelled there.
 */
function queryValue(field: protobuf.Field, value: string): unknown {
  if (field.type === 'bool' && (value === 'true' || value === 'false')) return value === 'true';
  if (field.resolvedType instanceof protobuf.Enum && /^-?\d{1,10}$/.test(value)) return Number(value);
  return value;
}

function fieldAt(type: protobuf.Type, path: string): protobuf.Field | undefined {
  let current: protobuf.Type | undefined = type;
  let field: protobuf.Field | undefined;
  for (const part of path.split('.')) {
    const name = part.replace(/_([a-z0-9])/g, (_m, c: string) => c.toUpperCase());
    field = current && Object.hasOwn(current.fields, name) ? current.fields[name] : undefined;
    if (!field) return undefined;
    current = field.resolvedType instanceof protobuf.Type ? field.resolvedType : undefined;
  }
  return field;
}

function getPath(json: Record<string, unknown>, path: string): unknown {
  return path.split('.').reduce<unknown>((o, p) => (o && typeof o === 'object' ? (o as Record<string, unknown>)[p] : undefined), json);
}

function setPath(json: Record<string, unknown>, path: string, value: unknown): void {
  const parts = path.split('.');
  let o = json;
  for (const p of parts.slice(0, -1)) {
    const next = o[p];
    if (next === undefined || next === null) o = o[p] = {};
    else if (typeof next === 'object' && !Array.isArray(next)) o = next as Record<string, unknown>;
    else throw new InvalidArgumentError(p, 'must be a JSON object');
  }
  o[parts[parts.length - 1]!] = value;
}

/** A URL variable's value, each segment percent-decoded. */
function decodePath(value: string): string {
  return value.split('/').map(decodeSegment).join('/');
}

export function decodeSegment(segment: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    throw new InvalidArgumentError('request path', `malformed percent-encoding in ${JSON.stringify(segment.slice(0, 100))}`);
  }
}
