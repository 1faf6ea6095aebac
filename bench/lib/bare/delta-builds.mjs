// The memory floor of bench/stall.ts (a): a bare Node process that does only the builds of (a),
// with the reader's own build step (dist/src/reader/deltas/build.js): each of the older bases
// against the newest version, the target parsed once and kept, as a reader's build thread keeps
// it. Run on the main thread (the least memory a process can build in, the loop held meanwhile)
// or in one worker thread (as a reader builds). Argument: JSON { dir, bases, thread }; `dir` holds
// target.json and base-<i>.json. Prints one JSON line: RSS (MB) once loaded, and its peak.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Worker, isMainThread, parentPort, workerData } from 'node:worker_threads';

const BUILD = new URL('../../../dist/src/reader/deltas/build.js', import.meta.url);
/** The process's RSS now, or its peak so far (the kernel's high-water mark), MB. */
const statusMb = (field) => Number(new RegExp(`${field}:\\s+(\\d+)`).exec(readFileSync('/proc/self/status', 'utf8'))[1]) / 1024;

async function builds({ dir, bases }) {
  const { buildFacts } = await import(BUILD);
  const target = readFileSync(join(dir, 'target.json'));
  const kept = new Map();
  const docs = { take: (sha) => kept.get(sha), keep: (sha, doc) => kept.set(sha, doc), size: 0 };
  for (let i = 0; i < bases; i++) buildFacts(target, readFileSync(join(dir, `base-${i}.json`)), undefined, { docs, toSha: 'target' });
}

if (isMainThread) {
  const o = JSON.parse(process.argv[2]);
  await import(BUILD);
  const loaded = statusMb('VmRSS');
  if (o.thread) {
    const w = new Worker(new URL(import.meta.url), { workerData: o });
    await new Promise((resolve, reject) => w.once('message', resolve).once('error', reject));
    await w.terminate();
  } else {
    await builds(o);
  }
  process.stdout.write(`${JSON.stringify({ loaded, peak: statusMb('VmHWM') })}\n`);
} else {
  await builds(workerData);
  parentPort.postMessage('done');
}
