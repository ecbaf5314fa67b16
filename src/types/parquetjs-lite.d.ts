// parquetjs-lite ships no type declarations; these cover the parts Orderly uses.
declare module 'parquetjs-lite' {
  export interface FieldDefinition {
    type: string;
    optional?: boolean;
    compression?: string;
  }
  export class ParquetSchema {
    constructor(fields: Record<string, FieldDefinition>);
  }
  export class ParquetWriter {
    static openFile(schema: ParquetSchema, path: string, options?: { rowGroupSize?: number; useDataPageV2?: boolean }): Promise<ParquetWriter>;
    appendRow(row: Record<string, unknown>): Promise<void>;
    setRowGroupSize(n: number): void;
    close(): Promise<void>;
  }
  export interface ParquetCursor {
    next(): Promise<Record<string, unknown> | null>;
  }
  export class ParquetReader {
    static openFile(path: string): Promise<ParquetReader>;
    static openBuffer(buffer: Buffer): Promise<ParquetReader>;
    getCursor(): ParquetCursor;
    getRowCount(): number;
    close(): Promise<void>;
  }
}
