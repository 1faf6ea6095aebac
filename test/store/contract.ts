/**
 * The conformance suite every Store backend passes (src/store/store.ts). A backend's test file
 * calls storeContract() with a way to open an empty store and a way to open one that cannot work.
 */
import { randomBytes } from 'node:crypto';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { StoreNotFoundError, StoreUnavailableError } from '../../src/errors.js';
import type { Store } from '../../src/store/store.js';

export interface OpenedStore {
  store: Store;
  cleanup(): Promise<void>;
}

export interface StoreContractOptions {
  /** A store that cannot be reached or used (every call must fail with StoreUnavailableError). */
  openUnavailable: () => Promise<OpenedStore>;
}

/** Keys the Store must refuse (TypeError) before touching anything. */
export const INVALID_KEYS = ['', '../x', 'a/../b', './x', '/abs', 'a//b', 'a/', '.', '..', 'a\\b', 'a b', 'a\0b'];

/**
 * Runs the conformance suite. `open` must return a new, empty store each time; `cleanup`
 * closes it and removes whatever it holds.
 */
export function storeContract(name: string, open: () => Promise<OpenedStore>, options: StoreContractOptions): void {
  describe(`Store contract: ${name}`, () => {
    let store: Store;
    let cleanup: (() => Promise<void>) | undefined;

    beforeEach(async () => {
      ({ store, cleanup } = await open());
    });
    afterEach(async () => {
      await cleanup?.();
      cleanup = undefined;
    });

    describe('put/get round trip, byte for byte', () => {
      const bodies: [string, () => Buffer][] = [
        ['every byte value', () => Buffer.from(Array.from({ length: 512 }, (_, i) => i % 256))],
        ['random binary', () => randomBytes(65_537)],
        ['empty', () => Buffer.alloc(0)],
        ['2 MB', () => randomBytes(2 * 1024 * 1024)],
        ['UTF-8 JSON', () => Buffer.from(JSON.stringify({ team: 'Bayern München', odds: '½', note: '日本 🏟️' }))],
        ['a UTF-8 BOM and CRLF', () => Buffer.from('\uFEFF{"a":1}\r\n', 'utf8')],
      ];
      for (const [label, make] of bodies) {
        it(label, async () => {
          const bytes = make();
          await store.put('objects/some_file/abc.json', bytes, 'application/json');
          const back = await store.get('objects/some_file/abc.json');
          expect(Buffer.isBuffer(back)).toBe(true);
          expect(back.length).toBe(bytes.length);
          expect(back.equals(bytes)).toBe(true);
        });
      }

      it('keeps keys apart', async () => {
        await Promise.all([
          store.put('a', Buffer.from('A')),
          store.put('a.json', Buffer.from('A.json')),
          store.put('b/a', Buffer.from('B/A')),
          store.put('manifest.json', Buffer.from('{}')),
        ]);
        expect((await store.get('a')).toString()).toBe('A');
        expect((await store.get('a.json')).toString()).toBe('A.json');
        expect((await store.get('b/a')).toString()).toBe('B/A');
        expect((await store.get('manifest.json')).toString()).toBe('{}');
      });
    });

    describe('overwrite', () => {
      it('replaces the whole object, longer or shorter', async () => {
        const long = randomBytes(300_000);
        const short = Buffer.from('short');
        await store.put('manifest.json', long);
        await store.put('manifest.json', short);
        expect((await store.get('manifest.json')).equals(short)).toBe(true);
        await store.put('manifest.json', long);
        expect((await store.get('manifest.json')).equals(long)).toBe(true);
        await store.put('manifest.json', short, undefined, { durable: false });
        expect((await store.get('manifest.json')).equals(short)).toBe(true);
        await store.put('manifest.json', Buffer.alloc(0));
        expect((await store.get('manifest.json')).length).toBe(0);
        expect(await store.list('')).toEqual(['manifest.json']);
      });

      it('concurrent readers never see a torn or mixed body', { timeout: 30_000 }, async () => {
        // Versions of different sizes and contents: a torn read (a prefix, a mix, a short body
        // under a longer length) matches none of them.
        const versions = [40_000, 250_000, 1_000, 120_000, 0, 600_000].map((size, i) => Buffer.concat([Buffer.from(`version ${i}:`), randomBytes(size)]));
        const key = 'manifest.json';
        await store.put(key, versions[0]!);
        let writing = true;
        let reads = 0;
        const torn: string[] = [];
        const writer = (async () => {
          try {
            // Every other put not durable (an upload before its outcome): atomic all the same.
            for (let i = 1; i <= 36 && torn.length === 0; i++) await store.put(key, versions[i % versions.length]!, undefined, { durable: i % 2 === 0 });
          } finally {
            writing = false;
          }
        })();
        const reader = async () => {
          try {
            while (writing) {
              const body = await store.get(key);
              if (!versions.some((v) => v.equals(body))) torn.push(`read ${reads}: ${body.length} bytes that no put wrote`);
              reads++;
            }
          } finally {
            writing = false;
          }
        };
        await Promise.all([writer, reader(), reader(), reader(), reader()]);
        expect(torn).toEqual([]);
        expect(reads).toBeGreaterThan(0);
        expect((await store.get(key)).equals(versions[36 % versions.length]!)).toBe(true);
      });
    });

    describe('missing keys', () => {
      it('get of a missing key throws StoreNotFoundError naming the key', async () => {
        const err = await store.get('objects/none/0.json').catch((e: unknown) => e);
        expect(err).toBeInstanceOf(StoreNotFoundError);
        expect((err as StoreNotFoundError).key).toBe('objects/none/0.json');
        expect((err as StoreNotFoundError).code).toBe('store.not_found');
      });

      it('a key that is only a prefix of other keys is missing', async () => {
        await store.put('dir/child.json', Buffer.from('x'));
        await expect(store.get('dir')).rejects.toBeInstanceOf(StoreNotFoundError);
        expect(await store.exists('dir')).toBe(false);
        await store.delete('dir');
        expect((await store.get('dir/child.json')).toString()).toBe('x');
      });

      it('a key below an existing object is missing', async () => {
        await store.put('manifest.json', Buffer.from('{}'));
        await expect(store.get('manifest.json/x')).rejects.toBeInstanceOf(StoreNotFoundError);
        expect(await store.exists('manifest.json/x')).toBe(false);
        await store.delete('manifest.json/x');
        expect((await store.get('manifest.json')).toString()).toBe('{}');
      });

      it('get after delete throws StoreNotFoundError', async () => {
        await store.put('k.json', Buffer.from('1'));
        await store.delete('k.json');
        await expect(store.get('k.json')).rejects.toBeInstanceOf(StoreNotFoundError);
      });
    });

    describe('exists', () => {
      it('follows put and delete', async () => {
        expect(await store.exists('objects/f/1.json')).toBe(false);
        await store.put('objects/f/1.json', Buffer.from('1'));
        expect(await store.exists('objects/f/1.json')).toBe(true);
        expect(await store.exists('objects/f/2.json')).toBe(false);
        await store.delete('objects/f/1.json');
        expect(await store.exists('objects/f/1.json')).toBe(false);
      });

      it('is true for an empty object', async () => {
        await store.put('empty', Buffer.alloc(0));
        expect(await store.exists('empty')).toBe(true);
      });
    });

    describe('delete', () => {
      it('is idempotent and leaves other keys alone', async () => {
        await store.delete('never/written.json');
        await store.put('a/1', Buffer.from('1'));
        await store.put('a/2', Buffer.from('2'));
        await store.delete('a/1');
        await store.delete('a/1');
        await Promise.all([store.delete('a/1'), store.delete('a/1')]);
        expect(await store.list('')).toEqual(['a/2']);
        expect((await store.get('a/2')).toString()).toBe('2');
      });
    });

    describe('list', () => {
      it('is empty on a new store', async () => {
        expect(await store.list('')).toEqual([]);
        expect(await store.list('objects/')).toEqual([]);
      });

      it('returns the keys starting with the prefix, sorted, relative to the store', async () => {
        const keys = ['objects/b/2.json', 'objects/a/10.json', 'manifest.json', 'objects/a/1.json', 'objects/a/2.json', 'objectsX', 'z', 'A'];
        for (const k of keys) await store.put(k, Buffer.from(k));
        expect(await store.list('')).toEqual([...keys].sort());
        expect(await store.list('objects/')).toEqual(['objects/a/1.json', 'objects/a/10.json', 'objects/a/2.json', 'objects/b/2.json']);
        expect(await store.list('objects')).toEqual(['objects/a/1.json', 'objects/a/10.json', 'objects/a/2.json', 'objects/b/2.json', 'objectsX']);
        expect(await store.list('objects/a/1')).toEqual(['objects/a/1.json', 'objects/a/10.json']);
        expect(await store.list('manifest.json')).toEqual(['manifest.json']);
        expect(await store.list('nothing/')).toEqual([]);
        for (const k of await store.list('')) expect((await store.get(k)).toString()).toBe(k);
      });

      it('does not list deleted keys', async () => {
        await store.put('a/1', Buffer.from('1'));
        await store.put('a/2', Buffer.from('2'));
        await store.delete('a/1');
        expect(await store.list('a/')).toEqual(['a/2']);
      });
    });

    describe('invalid keys', () => {
      for (const key of INVALID_KEYS) {
        it(`rejects ${JSON.stringify(key)} in every call`, async () => {
          await expect(store.put(key, Buffer.from('x'))).rejects.toBeInstanceOf(TypeError);
          await expect(store.get(key)).rejects.toBeInstanceOf(TypeError);
          await expect(store.exists(key)).rejects.toBeInstanceOf(TypeError);
          await expect(store.delete(key)).rejects.toBeInstanceOf(TypeError);
          expect(await store.list('')).toEqual([]);
        });
      }
    });

    describe('ping and description', () => {
      it('ping resolves on a working store, before and after writes', async () => {
        await store.ping();
        await store.put('k', Buffer.from('v'));
        await store.ping();
      });

      it('describes itself without secrets', () => {
        expect(store.description).toMatch(/^(file|s3):\/\//);
        expect(store.description).not.toMatch(/secret|password|S3RVER/i);
      });
    });

    describe('an unavailable store', () => {
      let broken: OpenedStore;
      beforeEach(async () => {
        broken = await options.openUnavailable();
      });
      afterEach(async () => {
        await broken.cleanup();
      });

      const calls: [string, (s: Store) => Promise<unknown>][] = [
        ['ping', (s) => s.ping()],
        ['put', (s) => s.put('manifest.json', Buffer.from('{}'))],
        ['get', (s) => s.get('manifest.json')],
        ['exists', (s) => s.exists('manifest.json')],
        ['delete', (s) => s.delete('manifest.json')],
        ['list', (s) => s.list('')],
      ];
      for (const [label, call] of calls) {
        it(`${label} throws StoreUnavailableError (never StoreNotFoundError)`, { timeout: 20_000 }, async () => {
          const err = await call(broken.store).then(
            () => undefined,
            (e: unknown) => e,
          );
          expect(err).toBeInstanceOf(StoreUnavailableError);
          expect((err as StoreUnavailableError).code).toBe('store.unavailable');
          expect((err as Error).cause).toBeDefined();
        });
      }
    });
  });
}
