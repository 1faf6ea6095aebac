/**
 * A validation thread of a worker (checker.ts): compiles the validator once from its workerData
 * (`{ limits, schema }`), then checks each drop it is sent (check-drop.ts). The drop's bytes come
 * as a view of shared memory, read in place; the answer names the published bytes as a range of
 * them, or carries them when `generated_at` was stamped (new bytes, moved, not copied). A
 * rejection is an answer; any other failure fails the task. Every answer says how long the check
 * took and the thread's CPU so far (core-contention.ts).
 */
import { parentPort, threadId, workerData } from 'node:worker_threads';
import { RejectionError } from '../../errors.js';
import { createDocumentValidator, type DocumentLimits } from '../../feeds/validate.js';
import { checkDrop } from './check-drop.js';
import type { CheckAnswer, CheckRequest } from './checker.js';

type DistributiveOmit<T, K extends PropertyKey> = T extends unknown ? Omit<T, K> : never;

const { limits, schema } = workerData as { limits: DocumentLimits; schema: object };
const validate = createDocumentValidator(limits, schema);

/** The thread's CPU time so far, ms (process.threadCpuUsage: Node 22.15 and later). */
const cpuMs = (): number | undefined => {
  if (typeof process.threadCpuUsage !== 'function') return undefined;
  const { user, system } = process.threadCpuUsage();
  return (user + system) / 1000;
};

parentPort!.on('message', (req: CheckRequest) => {
  const started = performance.now();
  const bytes = Buffer.from(req.bytes.buffer, req.bytes.byteOffset, req.bytes.byteLength);
  let answer: DistributiveOmit<CheckAnswer, 'timing'>;
  const transfer: ArrayBuffer[] = [];
  try {
    const { doc, sha256, sourceSha256 } = checkDrop(validate, {
      feed: req.feed,
      bookmaker: req.bookmaker,
      bytes,
      receivedAt: new Date(req.receivedAtMs),
      now: new Date(req.nowMs),
    });
    const common = { generatedAt: doc.generatedAt, generatedAtMs: doc.generatedAtMs, sha256, sourceSha256 };
    if (doc.stamped) {
      const own = new Uint8Array(doc.bytes); // its own memory, to move (a small Buffer shares a pool)
      transfer.push(own.buffer);
      answer = { ...common, stamped: own };
    } else {
      const start = doc.bytes.byteOffset - bytes.byteOffset;
      answer = { ...common, start, end: start + doc.bytes.length };
    }
  } catch (err) {
    if (!(err instanceof RejectionError)) {
      parentPort!.postMessage({ ok: false, error: (err as Error).message });
      return;
    }
    answer = { rejected: { reason: err.reason, detail: err.detail } };
  }
  const value: CheckAnswer = { ...answer, timing: { wallMs: performance.now() - started, cpuMs: cpuMs(), threadId } };
  parentPort!.postMessage({ ok: true, value }, transfer);
});
