import type { Config } from '../config.js';
import type { Store } from './store.js';

/** S3 backend: see issue 5. Placeholder until it lands. */
export function createS3Store(url: string, _s3: Config['s3']): Store {
  throw new Error(`S3 store not implemented yet (${url})`);
}
