import { InvalidArgumentError } from './errors.js';

/**
 * Refuses what cannot be a service account's email (Google refuses it too). Orderly only stores the
 * accounts an export or a push names (its access comes from the job's settings), so this is the whole check.
 */
export function checkServiceAccountEmail(field: string, email: unknown): string {
  if (typeof email !== 'string' || !/^[^@\s]+@[^@\s]+$/.test(email))
    throw new InvalidArgumentError(field, `must be a service account email, got ${JSON.stringify(email)}`);
  return email;
}
