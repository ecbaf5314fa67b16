import type { IncomingHttpHeaders } from 'node:http';
import { InvalidArgumentError } from '../core/errors.js';

/**
 * Google's system parameters (cloud.google.com/apis/docs/system-parameters): request options every Google
 * API takes beside the method's own fields, each as a query parameter (most also `$`-prefixed) or as
 * its header. The ones Orderly acts on:
 */
const SERVED = {
  alt: { query: ['alt', '$alt'] },
  fields: { query: ['fields', '$fields'], header: 'x-goog-fieldmask' },
  prettyPrint: { query: ['prettyPrint', '$prettyPrint'] },
  /** For proxies that pass only GET and POST: a POST carrying it is the method it names. */
  httpMethod: { query: ['$httpMethod'], header: 'x-http-method-override' },
  accessToken: { query: ['access_token'] },
} satisfies Record<string, { query: string[]; header?: string }>;

/** Accepted and without effect on a local endpoint: the error format, API keys, quota and billing projects. */
const WITHOUT_EFFECT = ['$.xgafv', 'key', '$key', 'quotaUser', '$quotaUser', '$userProject', '$requestReason'];

/** Query parameters that name no request field. */
export const SYSTEM_PARAMETERS: ReadonlySet<string> = new Set([...Object.values(SERVED).flatMap((p) => p.query), ...WITHOUT_EFFECT]);

/** A system parameter's value from any of its spellings; spellings that disagree are refused rather than one picked. */
export function systemParameter(name: keyof typeof SERVED, query: URLSearchParams, headers: IncomingHttpHeaders): string | undefined {
  const parameter: { query: string[]; header?: string } = SERVED[name];
  const given = parameter.query.flatMap((q) => query.getAll(q));
  const header = parameter.header === undefined ? undefined : headers[parameter.header];
  if (typeof header === 'string') given.push(header);
  const values = [...new Set(given)];
  if (values.length > 1) {
    const spellings = [...parameter.query, ...(parameter.header ? [parameter.header] : [])].join(', ');
    // The values are not quoted back: one may be an access token.
    throw new InvalidArgumentError(parameter.query[0]!, `is given with different values (as ${spellings})`);
  }
  return values[0];
}
