/** `start --processes`: its values, and where several reader processes on one port can run. */
import { describe, expect, it } from 'vitest';
import { checkReusePort, parseProcesses } from '../../src/cli/reader-processes.js';
import { UsageError } from '../../src/errors.js';

describe('start --processes', () => {
  it('takes a whole number from 1 to 256, or auto', () => {
    expect(parseProcesses('1')).toBe(1);
    expect(parseProcesses('16')).toBe(16);
    expect(parseProcesses('auto')).toBeGreaterThanOrEqual(1);
    for (const bad of ['0', '257', '-1', '1.5', 'two', '']) expect(() => parseProcesses(bad), bad).toThrow(UsageError);
  });

  it('needs Linux and a Node with listen reusePort', () => {
    expect(() => checkReusePort('linux', 'v24.21.0')).not.toThrow();
    expect(() => checkReusePort('linux', 'v22.12.0')).not.toThrow();
    expect(() => checkReusePort('linux', 'v23.1.0')).not.toThrow();
    expect(() => checkReusePort('linux', 'v22.11.0')).toThrow(/22\.12/);
    expect(() => checkReusePort('linux', 'v23.0.0')).toThrow(/22\.12/);
    expect(() => checkReusePort('darwin', 'v24.21.0')).toThrow(/Linux/);
  });
});
