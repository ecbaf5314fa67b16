/** The folder a case's sink may use: the case's own temporary folder (the job file and its data are there too). */
export interface SinkUnderTest {
  /** The case's temporary folder (absolute), removed after the case. */
  dir: string;
}

/** What the conformance suite needs to know about a connector. */
export interface ConformanceOptions {
  /** The connector's registered name (`exportConfig.connector`). */
  connector: string;
  /**
   * The module that registers the connector, as a job file's `plugins:` would list it (a path, relative to
   * the current folder, or a package name). The suite loads it through the job file, and the crash case's
   * `orderly run` process loads it too, so it must be JavaScript Node can import. Leave it out for the
   * connectors Orderly registers itself.
   */
  plugin?: string;
  /** The subscription's `exportConfig` for a fresh, empty sink (without `connector`). */
  config(sink: SinkUnderTest): Record<string, unknown>;
  /** The job file's settings sections the connector needs (e.g. `{ duckdb: { path, init } }`). */
  settings?(sink: SinkUnderTest): Record<string, unknown>;
  /** The ids (`message.messageId`) of every message the sink holds, every copy, in the sink's order. */
  readBack(sink: SinkUnderTest): Promise<string[]>;
  /**
   * Whether the connector recognises a redelivery of what it already wrote and does not write it again
   * (then the suite checks that nothing is held twice); otherwise duplicates are allowed, loss and
   * disorder never.
   */
  skipsDuplicates: boolean;
  /** Messages each case publishes (default 300) over this many ordering keys (default 10); every tenth has no key. */
  messages?: number;
  /** Ordering keys the messages are spread over (default 10). */
  keys?: number;
  /** Where the cases' temporary folders go (default: the system's). */
  tempDir?: string;
}

/** One case of the suite: run it from any test framework (`it(c.name, c.run)`); it throws ConformanceError when the connector fails it. */
export interface ConformanceCase {
  /** `<connector>: <case>`, e.g. `jsonl-file: crash and restart`. */
  name: string;
  /** Runs the case (in its own temporary folder, removed afterwards); throws ConformanceError if the connector fails it. */
  run: () => Promise<void>;
}
