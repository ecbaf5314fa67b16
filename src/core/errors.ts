/**
 * Errors carry a Pub/Sub status code so every layer (library, CLI, gRPC, REST) can report them the way
 * Google does, and a message that names the field and what would have been accepted.
 */
export type StatusCode =
  'INVALID_ARGUMENT' | 'NOT_FOUND' | 'ALREADY_EXISTS' | 'FAILED_PRECONDITION' | 'RESOURCE_EXHAUSTED' | 'ABORTED' | 'INTERNAL';

/** google.rpc.ErrorInfo: why, machine-readably, as Google's APIs attach it to some errors. */
export interface ErrorInfo {
  reason: string;
  domain: string;
  metadata: Record<string, string>;
}

export class OrderlyError extends Error {
  /** Sent as the status details Google's clients read (gRPC `grpc-status-details-bin`, JSON `error.details`). */
  declare readonly errorInfo?: ErrorInfo;

  constructor(
    readonly code: StatusCode,
    message: string,
  ) {
    super(message);
    this.name = new.target.name;
  }
}

export class InvalidArgumentError extends OrderlyError {
  constructor(
    readonly field: string,
    detail: string,
    /** Other fields the value was checked against (a maximum below its minimum): a validator listing every problem needs them as given. */
    readonly comparedWith: readonly string[] = [],
  ) {
    super('INVALID_ARGUMENT', `${field}: ${detail}`);
  }
}

/**
 * A settings section names a field its reader does not know (a typo). `key` is the path of that field
 * inside the section, so a validator that lists every problem can report it, drop it and check the rest.
 */
export class UnknownFieldError extends InvalidArgumentError {
  constructor(
    field: string,
    readonly key: string[],
    known: readonly string[],
  ) {
    super(field, known.length ? `unknown field (known: ${known.join(', ')})` : 'unknown field (this object has none)');
  }
}

export class NotFoundError extends OrderlyError {
  constructor(kind: string, name: string) {
    super('NOT_FOUND', `${kind} not found: ${name}`);
  }
}

export class AlreadyExistsError extends OrderlyError {
  constructor(kind: string, name: string) {
    super('ALREADY_EXISTS', `${kind} already exists: ${name}`);
  }
}

export class FailedPreconditionError extends OrderlyError {
  constructor(message: string) {
    super('FAILED_PRECONDITION', message);
  }
}

/** A publish on an ordering key that an earlier failure paused; see `Publisher.resumePublishing`. */
export class OrderingKeyPausedError extends OrderlyError {
  constructor(readonly orderingKey: string) {
    super(
      'FAILED_PRECONDITION',
      `ordering key "${orderingKey}" is paused after a failed publish; call resumePublishing("${orderingKey}") to continue`,
    );
  }
}
