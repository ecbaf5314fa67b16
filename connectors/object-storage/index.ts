import type { ConnectorFactory } from '../../src/connector/registry.js';
import { parseObjectStorageConfig, type ObjectStorageConfig } from './config.js';
import { ObjectStorageWriter } from './object-writer.js';

/** `cloudStorageConfig` subscriptions: rolling files on S3/MinIO. */
export const objectStorageConnector: ConnectorFactory<ObjectStorageConfig> = {
  name: 'object-storage',
  parseConfig: parseObjectStorageConfig,
  create: (config, context) => new ObjectStorageWriter(config, context),
};
