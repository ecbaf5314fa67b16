/**
 * The benchmarks' S3 server (bench/s3-endpoint.ts): s3rver on 127.0.0.1 in a process of its own, storing
 * under the directory given as its argument, with the embedded server's fix for s3rver's delete/put race
 * (hardenStore). Prints its port once it listens; exits when its standard input ends.
 */
import S3rver from 's3rver';
import { hardenStore } from '../connectors/object-storage/embedded-s3.js';

// The benchmark holds this pipe open: it ends when the benchmark's process does, however that ended (a
// SIGKILL or a process.exit skips its close()), so the server never outlives it.
process.stdin.once('end', () => process.exit(0)).resume();
const server = new S3rver({ port: 0, address: '127.0.0.1', directory: process.argv[2]!, silent: true });
hardenStore(server);
const { port } = await server.run();
console.log(port);
