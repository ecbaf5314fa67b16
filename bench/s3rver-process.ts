/**
 * The benchmarks' S3 server (bench/s3-endpoint.ts): s3rver on 127.0.0.1 in a process of its own, storing
 * under the directory given as its argument, with the embedded server's fix for s3rver's delete/put race
 * (keepDirectoriesOnDelete). Prints its port once it listens.
 */
import S3rver from 's3rver';
import { keepDirectoriesOnDelete } from '../connectors/object-storage/embedded-s3.js';

const server = new S3rver({ port: 0, address: '127.0.0.1', directory: process.argv[2]!, silent: true });
keepDirectoriesOnDelete(server);
const { port } = await server.run();
console.log(port);
