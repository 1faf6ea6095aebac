import type { DryRunOutcome, PublishOutcome, PublishPort } from './publish.js';

export interface ClosablePublisher extends PublishPort {
  close(): Promise<void>;
}

/**
 * A PublishPort started on its first use: what it loads (the queue client, the document
 * validator) costs a reader that never takes an upload nothing. Loading it takes the event loop
 * for tens of milliseconds, so a reader that expects uploads calls `prepare` before it listens.
 * A start that fails is tried again by the next use.
 */
export function lazyPublisher(start: () => Promise<ClosablePublisher>): ClosablePublisher & Required<Pick<PublishPort, 'prepare'>> {
  let starting: Promise<ClosablePublisher> | undefined;
  let closed = false;
  const started = (): Promise<ClosablePublisher> => {
    if (closed) return Promise.reject(new Error('the publisher is closed'));
    starting ??= start().catch((err: unknown) => {
      starting = undefined;
      throw err;
    });
    return starting;
  };
  return {
    submit: async (filename, bytes, receivedAt, mayQueue): Promise<PublishOutcome> => (await started()).submit(filename, bytes, receivedAt, mayQueue),
    check: async (filename, bytes, receivedAt): Promise<DryRunOutcome> => (await started()).check(filename, bytes, receivedAt),
    prepare: async () => void (await started()),
    async close() {
      closed = true;
      const running = await starting?.catch(() => undefined);
      await running?.close();
    },
  };
}
