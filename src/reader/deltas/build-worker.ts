/**
 * The worker thread of the deltas pool (pool.ts): takes `{ to, from?, ims?, toSha?, fromSha? }`
 * (the bytes of two versions, the patches wanted, the versions' SHA-256s), answers buildFacts()
 * with its buffers transferred, or the error's message. Keeps the documents it parsed for the next
 * builds (parsed-docs.ts), up to PARSED_BYTES of them.
 */
import { parentPort } from 'node:worker_threads';
import { buildFacts, type Patches } from './build.js';
import { createParsedDocs } from './parsed-docs.js';
import type { Im } from './patches.js';

interface Request {
  readonly to: Uint8Array;
  readonly from?: Uint8Array;
  readonly ims?: readonly Im[];
  readonly toSha?: string;
  readonly fromSha?: string;
}

/** Source bytes of the documents kept parsed: a live file's versions, not its builds' heap. */
const PARSED_BYTES = 1024 * 1024;
const docs = createParsedDocs(PARSED_BYTES);

const asBuffer = (u: Uint8Array) => Buffer.from(u.buffer, u.byteOffset, u.byteLength);

parentPort!.on('message', (req: Request) => {
  try {
    const cache = req.toSha === undefined ? undefined : { docs, toSha: req.toSha, fromSha: req.fromSha };
    const built = buildFacts(asBuffer(req.to), req.from && asBuffer(req.from), req.ims, cache);
    const transfer: ArrayBuffer[] = [];
    const patches: Record<string, Record<string, Uint8Array>> = {};
    for (const [im, enc] of Object.entries(built.patches as Patches)) {
      patches[im] = {};
      for (const [coding, b] of Object.entries(enc)) {
        const own = new Uint8Array(b); // its own ArrayBuffer (zlib's may be shared), to transfer
        patches[im][coding] = own;
        transfer.push(own.buffer);
      }
    }
    parentPort!.postMessage({ ok: true, value: { digest: built.digest, patches } }, transfer);
  } catch (err) {
    parentPort!.postMessage({ ok: false, error: (err as Error).message });
  }
});
