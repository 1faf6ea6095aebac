/** What withTimeout rejects with when the promise did not settle in time (its own failures pass as they are). */
export class TimeoutError extends Error {
  override name = 'TimeoutError';
}

/** Reject when a promise has not settled within `ms` (the promise itself goes on; its failure is then ignored). */
export function withTimeout<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new TimeoutError(`${what}: no answer within ${ms} ms`)), ms);
    timer.unref();
  });
  promise.catch(() => undefined);
  return Promise.race([promise, deadline]).finally(() => clearTimeout(timer));
}
