/**
 * Where drops are checked (src/ingest/publish/checker.ts): on a validation thread and on the event
 * loop, every case of the corpus comes out the same (outcome, reason and detail; or the published
 * bytes, generated_at, stamping and both SHA-256s, against the validator called directly); the
 * caller's bytes are neither moved nor changed, whether in shared memory or not; a thread that
 * fails a check for any other reason fails that check alone, never as a rejection; small drops
 * stay on the loop; a claim read for the threads lands in shared memory; a thread that waits for
 * a core hands the checks to the loop for a while; and one thread is there by default on two cores.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { RejectionError } from '../../src/errors.js';
import { buildRegistry, parseFilename } from '../../src/feeds/registry.js';
import { createDocumentValidator, loadDocumentSchema, type DocumentCheck } from '../../src/feeds/validate.js';
import { readClaim } from '../../src/ingest/drop-folder/inbox.js';
import { createDropChecker, defaultValidateThreads, type DropChecker, type DropCheckerOptions } from '../../src/ingest/publish/checker.js';
import { sha256Hex } from '../../src/sha256.js';
import { generateCorpus } from '../fixtures/corpus.js';

const scratch = mkdtempSync(join(tmpdir(), 'oddsfiles-checker-'));
const config = loadConfig({ env: {}, cwd: scratch });
const registry = buildRegistry(config.bookmakers, config.sports);
const schema = loadDocumentSchema();
const NOW = new Date('2026-11-21T18:31:00Z');
const RECEIVED = new Date('2026-11-21T18:30:59.123Z');

const checkers: DropChecker[] = [];
// Every drop to the thread, small ones too (the corpus's are).
const checkerOf = (threads: number, more: Partial<DropCheckerOptions> = {}) => {
  const c = createDropChecker({ limits: config.limits, schema, threads, threadMinBytes: 0, ...more });
  checkers.push(c);
  return c;
};
afterAll(async () => {
  await Promise.all(checkers.map((c) => c.close()));
  rmSync(scratch, { recursive: true, force: true });
});

type Outcome =
  | { published: { bytes: string; generatedAt: string; generatedAtMs: number; stamped: boolean; sha256: string; sourceSha256: string | undefined } }
  | { reason: string; detail: string };

const checkOf = (filename: string, bytes: Buffer): DocumentCheck => {
  const feed = parseFilename(registry, filename)!;
  return { feed, bookmaker: registry.bookmakers.get(feed.bookmaker)!, bytes, receivedAt: RECEIVED, now: NOW };
};

async function outcome(
  run: () => Promise<{
    doc: { bytes: Buffer; generatedAt: string; generatedAtMs: number; stamped: boolean };
    sha256: string;
    sourceSha256: string | undefined;
  }>,
): Promise<Outcome> {
  try {
    const { doc, sha256, sourceSha256 } = await run();
    return {
      published: {
        bytes: doc.bytes.toString('base64'),
        generatedAt: doc.generatedAt,
        generatedAtMs: doc.generatedAtMs,
        stamped: doc.stamped,
        sha256,
        sourceSha256,
      },
    };
  } catch (err) {
    if (err instanceof RejectionError) return { reason: err.reason, detail: err.detail };
    throw err;
  }
}

/** About 20 MB of small objects: JSON.parse + ajv need far more than 32 MB of heap for it. */
const hugeDrop = () => Buffer.from(`{"events":[${Array.from({ length: 600_000 }, (_, i) => `{"event_id":${i},"name":"event ${i}"}`).join(',')}]}`);

describe('the drop checker', () => {
  const validate = createDocumentValidator(config.limits, schema);
  const direct = (c: DocumentCheck) =>
    outcome(async () => {
      const doc = validate(c);
      return { doc, sha256: sha256Hex(doc.bytes), sourceSha256: doc.stamped ? sha256Hex(c.bytes) : undefined };
    });
  // Cases whose filename is not in the registry are refused before any check.
  const cases = generateCorpus().filter((c) => parseFilename(registry, c.filename) !== undefined);

  it.each([1, 0])('with %i validation threads, checks every corpus case as the validator does', async (threads) => {
    const checker = checkerOf(threads);
    const reasons = new Set<string>();
    for (const c of cases) {
      const want = await direct(checkOf(c.filename, c.bytes));
      const got = await outcome(() => checker(checkOf(c.filename, c.bytes)));
      expect(got, `${c.group}/${c.name}`).toEqual(want);
      reasons.add('reason' in want ? want.reason : want.published.stamped ? 'stamped' : 'published');
    }
    // The corpus reaches rejections of several kinds, stamping and plain publications.
    expect(reasons.size).toBeGreaterThan(5);
    expect(reasons).toContain('stamped');
    expect(reasons).toContain('published');
  });

  it("leaves the caller's bytes where they were, in shared memory or not, and unchanged", async () => {
    const checker = checkerOf(1);
    const c = cases.find((x) => x.group === 'valid')!;
    const plain = Buffer.from(c.bytes);
    const shared = Buffer.from(new SharedArrayBuffer(c.bytes.length));
    c.bytes.copy(shared);
    for (const bytes of [plain, shared]) {
      const { doc } = await checker(checkOf(c.filename, bytes));
      expect(bytes.length).toBe(c.bytes.length);
      expect(bytes.equals(c.bytes)).toBe(true);
      expect(doc.bytes.equals(c.bytes)).toBe(true);
      // Not stamped: the published bytes are a view of the caller's, not a copy.
      expect(doc.bytes.buffer).toBe(bytes.buffer);
    }
  });

  it('a check that fails for another reason than a rule fails alone, not as a rejection; the next is answered', async () => {
    // A thread whose heap cannot hold the JSON.parse of a 20 MB drop (ajv for every size: no one-pass check).
    const checker = checkerOf(1, { limits: { ...config.limits, onePassMinBytes: Infinity }, heapMb: 32 });
    const c = cases.find((x) => x.group === 'valid')!;
    const huge = hugeDrop();
    const failed = await checker(checkOf(c.filename, huge)).then(
      () => undefined,
      (err: unknown) => err,
    );
    expect(failed).toBeInstanceOf(Error);
    expect(failed).not.toBeInstanceOf(RejectionError);
    expect((await checker(checkOf(c.filename, c.bytes))).doc.bytes.equals(c.bytes)).toBe(true);
  });

  it('reads a claim into shared memory from the size the threads take', async () => {
    const path = join(scratch, 'claim.json');
    writeFileSync(path, '{"a":1}');
    // Read on the thread pool (sync I/O off) and synchronously.
    for (const syncIo of [0, 1024]) {
      expect((await readClaim(path, 1024, undefined, syncIo, 7)).bytes.buffer).toBeInstanceOf(SharedArrayBuffer);
      expect((await readClaim(path, 1024, undefined, syncIo, 8)).bytes.buffer).not.toBeInstanceOf(SharedArrayBuffer);
    }
    expect((await readClaim(path, 1024)).bytes.buffer).not.toBeInstanceOf(SharedArrayBuffer);
  });

  it('checks drops under its threshold on the loop, larger ones on a thread', async () => {
    const c = cases.find((x) => x.group === 'valid')!;
    expect(checkerOf(1, { threadMinBytes: 1000 }).sharedMinBytes).toBe(1000);
    expect(checkerOf(0).sharedMinBytes).toBe(Infinity);
    // Threads whose heap cannot hold the JSON.parse of a 20 MB drop: it fails there, and passes on the loop.
    const limits = { ...config.limits, onePassMinBytes: Infinity };
    const huge = hugeDrop();
    const onThread = checkerOf(1, { limits, heapMb: 32, threadMinBytes: huge.length });
    const onLoop = checkerOf(1, { limits, heapMb: 32, threadMinBytes: huge.length + 1 });
    await expect(onThread(checkOf(c.filename, huge))).rejects.not.toBeInstanceOf(RejectionError);
    expect((await onLoop(checkOf(c.filename, huge))).sha256).toMatch(/^[0-9a-f]{64}$/);
  });

  // The thread's CPU time is what tells a thread waiting for a core (Node 22.15 and later).
  it.skipIf(typeof process.threadCpuUsage !== 'function')('checks on the loop for a while once the thread counts as waiting for a core', async () => {
    const c = cases.find((x) => x.group === 'valid')!;
    const limits = { ...config.limits, onePassMinBytes: Infinity };
    const huge = hugeDrop();
    // A thread whose heap cannot hold the JSON.parse of the huge drop tells where it was checked.
    const judged = (busyRatio: number) => {
      let busy = 0;
      const on: string[] = [];
      const checker = checkerOf(1, {
        limits,
        heapMb: 32,
        yieldWhenBusy: { windowCpuMs: 0, busyRatio, loopForMs: 60_000 },
        onBusy: () => busy++,
        onCheck: (where) => on.push(where),
      });
      return { checker, busy: () => busy, on };
    };
    const waiting = judged(0); // every window counts as waiting
    const free = judged(Infinity); // none does
    // Until a window closes: the thread's CPU clock moves in steps of a scheduler tick.
    for (let i = 0; i < 500 && waiting.busy() === 0; i++) await waiting.checker(checkOf(c.filename, c.bytes));
    for (let i = 0; i < 50; i++) await free.checker(checkOf(c.filename, c.bytes));
    expect(waiting.busy()).toBe(1);
    expect(free.busy()).toBe(0);
    expect((await waiting.checker(checkOf(c.filename, huge))).sha256).toMatch(/^[0-9a-f]{64}$/);
    await expect(free.checker(checkOf(c.filename, huge))).rejects.not.toBeInstanceOf(RejectionError);
    // Where each check ran, as the worker's metrics count it.
    expect(waiting.on.at(-1)).toBe('loop');
    expect(waiting.on.slice(0, -1).every((w) => w === 'thread')).toBe(true);
    expect(free.on.every((w) => w === 'thread')).toBe(true);
  });

  it('by default, one thread on two cores or more; on one core, only where the loop serves readers', () => {
    expect(defaultValidateThreads(false)).toBe(availableParallelism() >= 2 ? 1 : 0);
    expect([1, 2, 8].map((cores) => defaultValidateThreads(false, cores))).toEqual([0, 1, 1]);
    expect([1, 2, 8].map((cores) => defaultValidateThreads(true, cores))).toEqual([1, 1, 1]);
  });
});
