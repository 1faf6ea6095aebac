/** The milliseconds a drop spends in each step (read, validate, store, commit, total), to 0.01 ms. */
export interface Laps {
  readonly timings: Record<string, number>;
  /** Records `name` as the time from `since` to now; returns now. */
  lap(name: string, since: number): number;
  /** Records `name` as the time from `since` to `until`. */
  set(name: string, since: number, until: number): void;
}

export function createLaps(): Laps {
  const timings: Record<string, number> = {};
  const set = (name: string, since: number, until: number) => {
    timings[name] = Math.round((until - since) * 100) / 100;
  };
  return {
    timings,
    set,
    lap(name, since) {
      const t = performance.now();
      set(name, since, t);
      return t;
    },
  };
}
