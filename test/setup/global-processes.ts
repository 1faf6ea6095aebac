/**
 * Global setup: a folder where every process the test helpers start is recorded
 * (test/helpers/processes.ts) until it is seen gone. At the end of the run, whatever is still
 * recorded and running is killed, and the run fails naming it: nothing a test started may outlive
 * the run, even when a worker crashed or timed out before it could end its processes.
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describeRecord, killRecorded, PROCESS_RECORDS_ENV, running, type ProcessRecord } from '../helpers/processes.js';

export default function setup(): (() => Promise<void>) | undefined {
  // Each project runs this global setup: the first one's folder serves the whole run, and its
  // teardown (the last to run) checks it.
  if (process.env[PROCESS_RECORDS_ENV]) return undefined;
  const dir = mkdtempSync(join(tmpdir(), 'oddsfiles-test-processes-'));
  // The workers are started after this and inherit the environment.
  process.env[PROCESS_RECORDS_ENV] = dir;
  return async () => {
    const left: ProcessRecord[] = [];
    for (const name of readdirSync(dir)) {
      if (!name.endsWith('.json')) continue;
      const record = JSON.parse(readFileSync(join(dir, name), 'utf8')) as ProcessRecord;
      if (!running(record)) continue;
      left.push(record);
      killRecorded(record);
    }
    rmSync(dir, { recursive: true, force: true });
    if (left.length > 0) {
      process.exitCode = 1;
      throw new Error(`processes started by the tests were still running after the run (now killed):\n${left.map(describeRecord).join('\n')}`);
    }
  };
}
