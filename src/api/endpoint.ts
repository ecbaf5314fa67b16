import * as grpc from '@grpc/grpc-js';
import { createServer as createHttpServer } from 'node:http';
import { createServer, type AddressInfo } from 'node:net';
import type { ExportManager } from '../connector/export-manager.js';
import type { PubSubCore } from '../core/pubsub-core.js';
import { pubsubServices } from './grpc-server.js';
import { restHandler } from './rest-handler.js';

const HTTP2_PREFACE = 'PRI * HTTP/2.0';

/**
 * gRPC and REST on one port, as Google's emulator serves them: each connection's first bytes tell an
 * HTTP/2 (gRPC) client from an HTTP/1.1 (REST) one. Binds 127.0.0.1 unless told otherwise.
 */
export async function startPubsubEndpoint(
  core: PubSubCore,
  exports: ExportManager | undefined,
  host: string,
  port: number,
): Promise<{ port: number; close(): Promise<void> }> {
  const { server: grpcServer } = pubsubServices(core, exports);
  const injector = grpcServer.createConnectionInjector(grpc.ServerCredentials.createInsecure());
  const http = createHttpServer({ requestTimeout: 60_000 }, restHandler(core, exports));
  const listener = createServer((socket) => {
    socket.once('readable', () => {
      const head = socket.read(HTTP2_PREFACE.length) ?? socket.read();
      if (!head) return socket.destroy();
      socket.unshift(head);
      if (head.toString('latin1').startsWith(HTTP2_PREFACE)) injector.injectConnection(socket);
      else http.emit('connection', socket);
    });
  });
  await new Promise<void>((resolve, reject) => {
    listener.once('error', reject);
    listener.listen(port, host, resolve);
  });
  return {
    port: (listener.address() as AddressInfo).port,
    async close() {
      listener.close();
      http.closeAllConnections();
      http.close();
      // Streaming pulls never end by themselves: give calls in flight a moment, then cut the rest
      // (their messages stay leased until they expire and are delivered again).
      await new Promise<void>((resolve) => {
        const force = setTimeout(() => {
          grpcServer.forceShutdown();
          resolve();
        }, 2_000);
        grpcServer.tryShutdown(() => {
          clearTimeout(force);
          resolve();
        });
      });
    },
  };
}
