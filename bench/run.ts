/** `npm run bench`: every benchmark, each against its own same-run baseline. */
import { benchCore } from './core.js';
import { report } from './report.js';

console.log(`Orderly benchmarks — node ${process.version}, ${new Date().toISOString()}`);
report('core: 1 KB messages, 10,000 ordering keys (baseline: raw SQLite inserts, same pragmas)', await benchCore());
