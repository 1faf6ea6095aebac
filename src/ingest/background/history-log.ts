/**
 * The store's copy of the history index (history-index.ts), what a rebuild reads when Redis lost
 * the index. Written in batches, never one object per publication:
 * - `history-log/<ms>-<random>.json`: one per write of a worker's pending records (at most once
 *   a second), with each file's members added and the newest member trimmed since its last one:
 *   `{ "files": { "<filename>": { "added": ["<member>", …], "trimmed": "<member>" } } }`.
 * - `history/<filename>/<newest>.<random>.batch.json`: a file's share of merged log objects,
 *   `{ "members": [...], "trimmed": "<member>" }`, named by the newest member it holds or trims.
 * - `history/<filename>/<member>.json`: one publication each (the form written before batches):
 *   read, and deleted once trimmed.
 * Trims always take a file's oldest publications (the commit script), so the newest trimmed
 * member stands for every member at or below it: those are gone, whichever object lists them.
 */
import { randomBytes } from 'node:crypto';
import { StoreNotFoundError } from '../../errors.js';
import type { Store } from '../../store/store.js';
import { inBatches } from './cleanup-batch.js';

export const LOG_PREFIX = 'history-log/';

/** What the store says of one file's history: members added, and the newest one trimmed. */
export interface FileFacts {
  readonly added: Set<string>;
  trimmed: string | undefined;
}

/** filename → its facts. */
export type HistoryFacts = Map<string, FileFacts>;

const MEMBER = String.raw`\d{15}\.\d{15}\.[0-9a-f]{64}\.\d{1,15}\.-?\d{1,16}`;
const FILE_KEY_RE = new RegExp(String.raw`/(${MEMBER})(\.[0-9a-f]{8}\.batch)?\.json$`);
const MEMBER_RE = /^\d{15}:\d{15}:[0-9a-f]{64}:\d{1,15}:-?\d{1,16}$/;

const dotted = (member: string) => member.replaceAll(':', '.');

export function logKey(nowMs: number): string {
  return `${LOG_PREFIX}${String(nowMs).padStart(15, '0')}-${randomBytes(4).toString('hex')}.json`;
}

export function fileBatchKey(filename: string, newest: string): string {
  return `history/${filename}/${dotted(newest)}.${randomBytes(4).toString('hex')}.batch.json`;
}

/** A key under `history/<filename>/`: the member it is named by, and whether it is a batch. */
export function parseFileKey(key: string): { readonly member: string; readonly batch: boolean } | undefined {
  const m = FILE_KEY_RE.exec(key);
  return m ? { member: m[1]!.replaceAll('.', ':'), batch: m[2] !== undefined } : undefined;
}

/** Members sort as publications do (fixed-width time and seq first): the later of two trims. */
export function later(a: string | undefined, b: string | undefined): string | undefined {
  if (a === undefined) return b;
  return b === undefined || a >= b ? a : b;
}

export function factsOf(facts: HistoryFacts, filename: string): FileFacts {
  let f = facts.get(filename);
  if (!f) facts.set(filename, (f = { added: new Set(), trimmed: undefined }));
  return f;
}

/** The members still retained: added and newer than the newest trim, oldest first. */
export function retainedMembers(f: FileFacts): string[] {
  return [...f.added].filter((m) => f.trimmed === undefined || m > f.trimmed).sort();
}

export function encodeLog(facts: HistoryFacts): Buffer {
  const files: Record<string, { added: string[]; trimmed?: string }> = {};
  for (const [filename, f] of facts) files[filename] = { added: retainedMembers(f), ...(f.trimmed !== undefined ? { trimmed: f.trimmed } : {}) };
  return Buffer.from(JSON.stringify({ files }));
}

export function encodeBatch(f: FileFacts): Buffer {
  return Buffer.from(JSON.stringify({ members: retainedMembers(f), ...(f.trimmed !== undefined ? { trimmed: f.trimmed } : {}) }));
}

const members = (v: unknown): string[] => (Array.isArray(v) ? v.filter((m): m is string => typeof m === 'string' && MEMBER_RE.test(m)) : []);
const member = (v: unknown): string | undefined => (typeof v === 'string' && MEMBER_RE.test(v) ? v : undefined);

function addInto(f: FileFacts, body: { added?: unknown; members?: unknown; trimmed?: unknown }): void {
  for (const m of members(body.added ?? body.members)) f.added.add(m);
  f.trimmed = later(f.trimmed, member(body.trimmed));
}

/** The store's objects as JSON; one gone meanwhile (a merge by another worker took it) is skipped. */
async function readObjects(store: Pick<Store, 'get'>, keys: readonly string[], use: (body: Record<string, unknown>) => void): Promise<void> {
  await inBatches(keys, async (key) => {
    let bytes: Buffer;
    try {
      bytes = await store.get(key);
    } catch (err) {
      if (err instanceof StoreNotFoundError) return;
      throw err;
    }
    let body: unknown;
    try {
      body = JSON.parse(bytes.toString('utf8'));
    } catch {
      return; // not ours to read; never written partially (puts are atomic)
    }
    if (body && typeof body === 'object') use(body as Record<string, unknown>);
  });
}

/** Every log object's facts, by file. */
export async function readLog(store: Pick<Store, 'get'>, keys: readonly string[]): Promise<HistoryFacts> {
  const facts: HistoryFacts = new Map();
  await readObjects(store, keys, (body) => {
    const files = body.files;
    if (!files || typeof files !== 'object') return;
    for (const [filename, f] of Object.entries(files as Record<string, unknown>)) {
      if (f && typeof f === 'object') addInto(factsOf(facts, filename), f as Record<string, unknown>);
    }
  });
  return facts;
}

/** Adds to `f` what the objects under `history/<filename>/` (`keys`) say. */
export async function readFileObjects(store: Pick<Store, 'get'>, keys: readonly string[], f: FileFacts): Promise<void> {
  const batches: string[] = [];
  for (const key of keys) {
    const p = parseFileKey(key);
    if (!p) continue;
    if (p.batch) batches.push(key);
    else f.added.add(p.member);
  }
  await readObjects(store, batches, (body) => addInto(f, body));
}

/** The retained members of `filename` as the store's records say, oldest first (what a rebuild of that file reads). */
export async function storedHistory(store: Pick<Store, 'get' | 'list'>, filename: string): Promise<string[]> {
  const f = factsOf(await readLog(store, await store.list(LOG_PREFIX)), filename);
  await readFileObjects(store, await store.list(`history/${filename}/`), f);
  return retainedMembers(f);
}
