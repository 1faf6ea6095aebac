import type { Config } from '../config.js';
import { createFsStore } from './fs-store.js';
import type { Store } from './store.js';

/** The store the configuration names (file:// or s3://). */
export async function openStore(config: Pick<Config, 'storeUrl' | 's3' | 'ingest'>): Promise<Store> {
  if (config.storeUrl.startsWith('s3://')) {
    const { createS3Store } = await import('./s3-store.js');
    return createS3Store(config.storeUrl, config.s3);
  }
  return createFsStore(config.storeUrl, { syncIoMaxBytes: config.ingest.syncIoMaxBytes });
}
