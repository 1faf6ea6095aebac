/**
 * The queue's events, read only while uploads wait for their outcomes: a QueueEvents reads every
 * event of the queue (several per drop), so a reader that takes PUTs would otherwise parse the
 * whole queue's traffic on its loop. Opened by the first waiting upload, from the event stream's
 * last entry (an outcome written between opening and the first blocking read is still read), and
 * closed once no upload has waited for IDLE_MS.
 */
import type { QueueEvents } from 'bullmq';
import type { Redis } from 'ioredis';
import type { Logger } from '../../log.js';
import { INGEST_QUEUE } from '../../redis/key-names.js';
import { openQueueEvents } from '../queue.js';

const IDLE_MS = 10_000;

export interface OutcomeEvents {
  /** The running QueueEvents, opened if need be; every acquire is paired with one release. */
  acquire(): Promise<QueueEvents>;
  release(): void;
  close(): Promise<void>;
}

export function createOutcomeEvents(connection: Redis, prefix: string, log: Logger): OutcomeEvents {
  let opening: Promise<QueueEvents> | undefined;
  let waiting = 0;
  let idle: NodeJS.Timeout | undefined;

  const open = async (): Promise<QueueEvents> => {
    const [last] = await connection.xrevrange(`${prefix}:${INGEST_QUEUE}:events`, '+', '-', 'COUNT', 1);
    const events = await openQueueEvents(connection, prefix, last?.[0] ?? '0-0');
    events.on('error', (err) => log.debug({ err: { message: err.message } }, 'publish events connection error'));
    return events;
  };
  const shut = async () => {
    const o = opening;
    opening = undefined;
    if (o) await o.then((e) => e.close()).catch(() => undefined);
  };

  return {
    async acquire() {
      waiting++;
      clearTimeout(idle);
      const o = (opening ??= open());
      try {
        return await o;
      } catch (err) {
        if (opening === o) opening = undefined; // the next upload tries again
        waiting--;
        throw err;
      }
    },
    release() {
      if (--waiting > 0) return;
      idle = setTimeout(() => void shut(), IDLE_MS);
      idle.unref();
    },
    async close() {
      clearTimeout(idle);
      await shut();
    },
  };
}
