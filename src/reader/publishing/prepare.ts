/**
 * A reader loads its publisher (the queue client, the document validator) once it holds a key
 * that may publish: before it listens when it starts with one, else as soon as a reload of the
 * keys brings one. The load takes the event loop for tens of milliseconds; at the first upload it
 * would hold up every consumer's request at a time an uploader chooses. A reader no key publishes
 * to never loads it. A load that fails is logged and tried again by the first upload; one that
 * takes longer than BEFORE_LISTEN_MS (Redis slow to answer) does not hold the start.
 */
import type { KeyRing } from '../../keys/ring.js';
import type { Logger } from '../../log.js';
import type { PublishPort } from '../../ports/publish.js';
import { withTimeout } from '../../timeout.js';

/** How long a start waits for the load before it listens anyway (the load goes on). */
const BEFORE_LISTEN_MS = 5000;

/** Resolves once what can be done before listening is done: true when the publisher was loaded. */
export async function preparePublisher(publisher: PublishPort | undefined, keys: Pick<KeyRing, 'publishers' | 'onLoaded'>, log: Logger): Promise<boolean> {
  const prepare = publisher?.prepare?.bind(publisher);
  if (prepare === undefined) return false;
  const load = () =>
    prepare().then(
      () => true,
      (err: unknown) => {
        log.warn({ err: { message: (err as Error).message } }, 'cannot load the publisher yet; the first upload tries again');
        return false;
      },
    );
  if (keys.publishers > 0) return withTimeout(load(), BEFORE_LISTEN_MS, 'loading the publisher').catch(() => false);
  const stop = keys.onLoaded(() => {
    if (keys.publishers === 0) return;
    stop();
    void load();
  });
  return false;
}
