/**
 * Runs in every test file (setupFiles): ends the processes the test helpers started
 * (test/helpers/processes.ts). After a failed test, its own processes are killed at once, so a
 * failed set-up leaves nothing listening. When the file ends (after its own afterAll hooks), every
 * process still running is killed; if the file passed otherwise, that is a failure naming them:
 * a test must stop what it starts.
 */
import { afterAll, afterEach, beforeEach, expect } from 'vitest';
import { describeRecord, endTracked, setCurrentTest } from '../helpers/processes.js';

let failed = false;
const file = expect.getState().testPath?.replace(/^.*\/test\//, 'test/');
setCurrentTest(file, undefined);

beforeEach((ctx) => {
  setCurrentTest(file, ctx.task.name);
});

afterEach(async (ctx) => {
  const test = ctx.task.name;
  setCurrentTest(file, undefined);
  if (ctx.task.result?.state === 'fail') {
    failed = true;
    await endTracked((r) => r.test === test);
  }
});

// vitest reads the first parameter as fixtures and wants a destructuring pattern; the suite is the second.
// eslint-disable-next-line no-empty-pattern
afterAll(async ({}, suite) => {
  // A hook that failed (a beforeAll) fails the file without failing a test.
  if (suite.result?.state === 'fail' || (suite.result?.errors?.length ?? 0) > 0) failed = true;
  // A process whose leader has just exited may take a moment to take its group with it.
  const left = await endTracked(() => true, 2_000);
  if (left.length > 0 && !failed) {
    throw new Error(`processes left running when the file ended (now killed):\n${left.map(describeRecord).join('\n')}`);
  }
});
