import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { HEAP_GROWING_PERCENT, setHeapGrowth } from '../../src/heap-growth.js';

describe('heap growth', () => {
  it('leaves a factor chosen on the command line alone', () => {
    expect(setHeapGrowth(['--heap-growing-percent=30'])).toBeUndefined();
    expect(setHeapGrowth(['--max-semi-space-size=4', '--heap_growing_percent', '30'])).toBeUndefined();
  });

  it('sets the default factor otherwise, and V8 takes it', () => {
    // In a child, so that this test process keeps V8's own factor. V8 writes "unrecognized flag"
    // to stderr for a flag it does not know (and carries on), hence the check of stderr.
    const script = `
      import { setHeapGrowth } from ${JSON.stringify(join(process.cwd(), 'src/heap-growth.ts'))};
      console.log(setHeapGrowth(['--max-semi-space-size=4']));`;
    const r = spawnSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { encoding: 'utf8' });
    expect(r.stderr).toBe('');
    expect(r.stdout.trim()).toBe(String(HEAP_GROWING_PERCENT));
  });
});
