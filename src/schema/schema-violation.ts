import { InvalidArgumentError } from '../core/errors.js';

/**
 * Message data that does not conform to its schema. `path` locates the offending value inside the data
 * (`.address.zip`, `.items[2]`, `` for the whole message) so a user can find it; `field` is the request
 * field that carried the data (`message` for ValidateMessage, `messages[i].data` on publish).
 */
export class SchemaViolationError extends InvalidArgumentError {
  constructor(
    readonly path: string,
    readonly reason: string,
    field = 'data',
  ) {
    super(field, describeViolation(path, reason));
  }

  /** The same violation reported on another request field. */
  on(field: string): SchemaViolationError {
    return new SchemaViolationError(this.path, this.reason, field);
  }
}

function describeViolation(path: string, reason: string): string {
  return `does not match the schema${path ? ` at ${path}` : ''}: ${reason}`;
}

/** Path helpers, so every decoder renders locations alike. */
export const at = {
  field: (path: string, name: string) => `${path}.${name}`,
  index: (path: string, i: number) => `${path}[${i}]`,
  key: (path: string, key: string) => `${path}[${JSON.stringify(key)}]`,
};
