/**
 * How far V8 lets its heap grow past the live objects of the last full GC before it starts the
 * next one. V8 picks the factor (1.1 to 4) from how fast the process allocates on its heap; it
 * does not count the Buffers a reader or worker takes in (each new version of a file, a drop's
 * bytes). A service at 100 versions a second of 200 KB allocates little on the heap and so gets a
 * factor near 1.1, while those Buffers keep reaching the limit: two full GCs a second, pauses of
 * up to ~20 ms on the loop that serves every consumer. A fixed factor of 2 (`HEAP_GROWING_PERCENT`)
 * brings that to about one in ten seconds, for at most as much heap again as the live objects.
 *
 * `node --heap-growing-percent=N` on the command line chooses another (0: V8's own).
 */
import { setFlagsFromString } from 'node:v8';

export const HEAP_GROWING_PERCENT = 100;

const FLAG = /^--heap[-_]growing[-_]percent(=|$)/;

/** Sets the factor for this process, unless its command line already did. Returns what it set, or undefined. */
export function setHeapGrowth(execArgv: readonly string[], percent = HEAP_GROWING_PERCENT): number | undefined {
  if (execArgv.some((a) => FLAG.test(a))) return undefined;
  setFlagsFromString(`--heap-growing-percent=${percent}`);
  return percent;
}
