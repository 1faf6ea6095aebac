/**
 * Fault 8, property tests for what the fault scenarios lean on and test/feeds/property.test.ts
 * does not cover: the nesting scan that keeps hostile documents from costing a deep recursion, the
 * claim file names (a hostile drop name must never make a claim impossible), and the byte budget
 * that bounds the memory of reading and parsing drops.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { RejectionError } from '../../src/errors.js';
import { buildRegistry, parseFilename } from '../../src/feeds/registry.js';
import { createDocumentValidator, nestingDepth } from '../../src/feeds/validate.js';
import { claimFileName, claimPath, dropClaimId, parseClaimFileName, parseDropClaimId } from '../../src/ingest/drop-folder/inbox.js';
import { createByteBudget } from '../../src/ingest/publish/byte-budget.js';

/** The true nesting depth of a parsed JSON value. */
function depthOf(v: unknown): number {
  if (v === null || typeof v !== 'object') return 0;
  const children = Array.isArray(v) ? v : Object.values(v as Record<string, unknown>);
  return 1 + children.reduce<number>((m, c) => Math.max(m, depthOf(c)), 0);
}

/** JSON whose strings are full of brackets, quotes and backslashes, nested up to ~12 deep. */
const trickyString = fc.string({ unit: fc.constantFrom('[', ']', '{', '}', '"', '\\', 'a', ' ', '\u00e9', '\n'), maxLength: 12 });
const { tree } = fc.letrec<{ tree: unknown }>((tie) => ({
  tree: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    trickyString,
    fc.integer(),
    fc.constant(null),
    fc.array(tie('tree'), { maxLength: 3 }),
    fc.dictionary(trickyString, tie('tree'), { maxKeys: 3 }),
  ),
}));

describe('nestingDepth (the scan before JSON.parse)', () => {
  it('is the true depth up to the limit, and more than the limit beyond it, whatever the strings hold', () => {
    fc.assert(
      fc.property(tree, fc.integer({ min: 0, max: 8 }), fc.boolean(), (value, limit, pretty) => {
        const bytes = Buffer.from(JSON.stringify(value, null, pretty ? 2 : undefined), 'utf8');
        const d = depthOf(value);
        const got = nestingDepth(bytes, limit);
        if (d <= limit) expect(got).toBe(d);
        else expect(got).toBeGreaterThan(limit);
      }),
      { numRuns: 2000 },
    );
  });

  it('the validator publishes 64 levels and rejects 65 as schema, without a deep recursion', () => {
    const scratch = mkdtempSync(join(tmpdir(), 'oddsfiles-faults-prop-'));
    const config = loadConfig({ env: {}, cwd: scratch });
    rmSync(scratch, { recursive: true, force: true });
    const registry = buildRegistry(config.bookmakers, config.sports);
    const validate = createDocumentValidator(config.limits);
    const feed = parseFilename(registry, 'site_live_northwind_soccer.json')!;
    const bookmaker = registry.bookmakers.get('northwind')!;
    const now = new Date('2026-11-21T18:31:00Z');
    const nest = (levels: number) => Buffer.from(`{"x":${'['.repeat(levels - 1)}${']'.repeat(levels - 1)}}`);
    const run = (bytes: Buffer) => validate({ feed, bookmaker, bytes, receivedAt: now, now });
    expect(run(nest(64)).bytes.length).toBeGreaterThan(0);
    for (const levels of [65, 1000, 1_000_000]) {
      try {
        run(nest(levels));
        expect.unreachable(`${levels} levels published`);
      } catch (err) {
        expect(err).toBeInstanceOf(RejectionError);
        expect((err as RejectionError).reason).toBe('schema');
      }
    }
  });
});

describe('claim file names', () => {
  const claimIdArb = fc.oneof(
    fc.nat().map((n) => `d${n}`),
    fc.tuple(fc.nat(), fc.nat()).map(([n, t]) => dropClaimId(String(n), t)),
    fc.string({ unit: fc.constantFrom(...'abcdef0123456789'), minLength: 8, maxLength: 20 }).map((s) => `p${s}`),
  );
  // Any name a filesystem accepts: no NUL, no '/', 1..255 bytes.
  const nameArb = fc
    .string({
      unit: fc.oneof(fc.constantFrom('a', '-', '.', '_', ' ', '\n', 'é', '📈', '\\', '"'), fc.string({ unit: 'grapheme', maxLength: 1 })),
      minLength: 1,
      maxLength: 300,
    })
    .map((s) => s.replace(/[\u0000/]/g, 'x'))
    .filter((s) => s.length > 0 && Buffer.byteLength(s) <= 255);

  it("a drop job's claim id gives back the job's id and creation time; other claim ids are not a drop job's", () => {
    fc.assert(
      fc.property(fc.nat(), fc.nat(), (n, t) => {
        expect(parseDropClaimId(dropClaimId(String(n), t))).toEqual({ jobId: String(n), createdAtMs: t });
        expect(parseDropClaimId(`d${n}`)).toEqual({ jobId: String(n) });
      }),
    );
    expect(parseDropClaimId('pmwt9dznc0a1b2c3d')).toBeUndefined();
    expect(parseDropClaimId('d12-')).toBeUndefined();
  });

  it('always fits in 255 bytes, starts with the claim id, and is unique per name', () => {
    fc.assert(
      fc.property(claimIdArb, nameArb, nameArb, (claimId, a, b) => {
        const fa = claimFileName(claimId, a);
        expect(Buffer.byteLength(fa)).toBeLessThanOrEqual(255);
        expect(fa.startsWith(`${claimId}--`)).toBe(true);
        if (a !== b) expect(fa).not.toBe(claimFileName(claimId, b));
        // A name that fits is kept whole and parses back.
        if (Buffer.byteLength(`${claimId}--${a}`) <= 255) {
          expect(fa).toBe(`${claimId}--${a}`);
          const parsed = parseClaimFileName('/inbox', fa)!;
          expect(parsed).toEqual({ claimId, name: a, path: claimPath('/inbox', claimId, a) });
          if (claimId.startsWith('d')) expect(parseDropClaimId(parsed.claimId)?.jobId).toBe(claimId.slice(1).split('-')[0]);
        }
      }),
      { numRuns: 2000 },
    );
  });

  it('keeps every feed filename whole', () => {
    const scratch = mkdtempSync(join(tmpdir(), 'oddsfiles-faults-prop-'));
    const config = loadConfig({ env: {}, cwd: scratch });
    rmSync(scratch, { recursive: true, force: true });
    for (const name of buildRegistry(config.bookmakers, config.sports).filenames) {
      expect(claimFileName('d123456789012', name)).toBe(`d123456789012--${name}`);
    }
  });
});

describe('the byte budget of reading drops', () => {
  it('never lets more than the limit in, grants in arrival order, and grants everyone in the end', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 1, max: 100 }),
        fc.array(fc.tuple(fc.integer({ min: 0, max: 150 }), fc.nat({ max: 3 })), { minLength: 1, maxLength: 30 }),
        async (limit, requests) => {
          const budget = createByteBudget(limit);
          const granted: number[] = [];
          let inUse = 0;
          let peak = 0;
          const all = requests.map(async ([bytes, holdTicks], i) => {
            await budget.acquire(bytes);
            granted.push(i);
            inUse += Math.min(bytes, limit);
            peak = Math.max(peak, inUse);
            expect(budget.used).toBeLessThanOrEqual(limit);
            for (let t = 0; t < holdTicks; t++) await Promise.resolve();
            inUse -= Math.min(bytes, limit);
            budget.release(bytes);
          });
          await Promise.all(all);
          expect(peak).toBeLessThanOrEqual(limit);
          expect(granted).toEqual(requests.map((_, i) => i));
          expect(budget.used).toBe(0);
        },
      ),
      { numRuns: 500 },
    );
  });
});
