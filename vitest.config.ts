import { defineConfig } from 'vitest/config';

/**
 * The suite by kind, as vitest projects (`vitest run --project <name>`):
 * - unit: no Redis, no service processes (a few tests run Node itself);
 * - redis: in-process code against the real Redis (and s3rver, real folders);
 * - e2e: the built `oddsfiles` command run as child processes (build first);
 * - faults: the long fault-injection scenarios at full strength, one file at a time (they measure
 *   memory and timing, and some pause processes with SIGSTOP, so they must not compete).
 * `npm test` runs unit, redis and e2e; `npm run test:faults` the faults.
 *
 * Every project ends the processes its tests start (test/setup/processes.ts) and the run fails if
 * any outlives it (test/setup/global-processes.ts).
 *
 * Tests live in folders by subsystem (test/reader/, test/ingest/, ...; docs/development.md). A
 * folder's tests are unit tests unless listed in REDIS; test/e2e/ and test/faults/ are projects.
 */
const E2E = ['test/e2e/**/*.test.ts'];
const REDIS = [
  'test/catalog/*.test.ts',
  'test/cli/inbox-check.test.ts',
  'test/ingest/history-records.test.ts',
  'test/ingest/inbox-marker.test.ts',
  'test/ingest/late-writes.test.ts',
  'test/ingest/manifest-incremental.test.ts',
  'test/ingest/publish.test.ts',
  'test/ingest/watcher.test.ts',
  'test/ingest/worker-claim.test.ts',
  'test/keys/keys.test.ts',
  'test/ops/dashboard.test.ts',
  'test/ops/http.test.ts',
  'test/ops/queue-counts.test.ts',
  'test/ops/status.test.ts',
  'test/project/openapi.document.test.ts',
  'test/reader/carried.test.ts',
  'test/reader/edge-responses.test.ts',
  'test/reader/front-door.test.ts',
  'test/reader/http.test.ts',
  'test/reader/lease.redis.test.ts',
  'test/reader/tail.redis.test.ts',
  'test/reader/live.test.ts',
  'test/reader/publish-unavailable.test.ts',
  'test/redis/*.test.ts',
  'test/store/s3.test.ts',
];
const FAULTS = ['test/faults/**/*.test.ts'];

export default defineConfig({
  test: {
    testTimeout: 60_000,
    hookTimeout: 60_000,
    pool: 'forks',
    maxWorkers: 2,
    reporters: ['default'],
    globalSetup: ['test/setup/global-processes.ts'],
    setupFiles: ['test/setup/processes.ts'],
    projects: [
      { extends: true, test: { name: 'unit', include: ['test/**/*.test.ts'], exclude: [...E2E, ...REDIS, ...FAULTS] } },
      { extends: true, test: { name: 'redis', include: REDIS } },
      { extends: true, test: { name: 'e2e', include: E2E } },
      {
        extends: true,
        test: {
          name: 'faults',
          include: FAULTS,
          env: { ODDSFILES_FAULTS: '1' },
          testTimeout: 600_000,
          hookTimeout: 120_000,
          maxWorkers: 1,
          fileParallelism: false,
        },
      },
    ],
  },
});
