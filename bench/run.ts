/** `npm run bench`: every benchmark, each against its own same-run baseline. */
import { benchClient } from './client.js';
import { benchCore } from './core.js';
import { benchDuckDbExport } from './duckdb-export.js';
import { benchObjectExport } from './object-export.js';
import { report } from './report.js';

// The AWS SDK warns on Node 20 at client creation; the benchmarks' output is a report, not a log.
process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';
console.log(`Orderly benchmarks — node ${process.version}, ${new Date().toISOString()}, ${process.env.BENCH_MESSAGES ?? 50_000} messages each`);
report('core: 1 KB messages, 10,000 ordering keys (baseline: raw SQLite inserts, same pragmas)', await benchCore());
report('DuckDB export: 1 KB JSON, 10,000 keys (baseline: raw DuckDB appender, same rows)', await benchDuckDbExport());
report('object-storage export: 1 KB JSON, 10,000 keys (baseline: DuckDB COPY TO parquet + one PutObject)', await benchObjectExport());
report('Pub/Sub endpoint: Google\'s Node client, 1 KB, 1,000 keys, ordering (baseline: the same through the library API)', await benchClient());
