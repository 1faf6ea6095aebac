import { defineConfig } from 'vitest/config';

/**
 * The long fault-injection scenarios (test/faults.*.test.ts) at full strength: more kill rounds,
 * the 10,000-file storm, long Redis and store outages. One file at a time: they measure memory
 * and timing, and some pause processes (SIGSTOP), so they must not compete with each other.
 */
export default defineConfig({
  test: {
    include: ['test/faults.*.test.ts'],
    env: { ODDSFILES_FAULTS: '1' },
    testTimeout: 600_000,
    hookTimeout: 120_000,
    pool: 'forks',
    maxWorkers: 1,
    fileParallelism: false,
    reporters: ['default'],
  },
});
