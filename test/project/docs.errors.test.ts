/**
 * docs/errors.md lists every problem type the service can answer with, each with its status and
 * title, and no type the service no longer has. The types come from the one catalogue in
 * src/errors.ts, through the same HttpProblem the reader sends.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { HTTP_PROBLEMS, HttpProblem, type HttpProblemCode } from '../../src/errors.js';
import { ROOT } from '../helpers/service.js';

const page = readFileSync(join(ROOT, 'docs/errors.md'), 'utf8');

/** The problems as clients see them: type URI, status, title. */
const problems = (Object.keys(HTTP_PROBLEMS) as HttpProblemCode[]).map((code) => {
  const p = new HttpProblem(code, 'detail');
  return { type: p.type, status: p.status, title: p.title };
});

/** Table rows of the page that document a type: | `type` | status | title | when | */
const rows = new Map([...page.matchAll(/^\| `([^`]+)` \| (\d{3}) \| ([^|]+) \|/gm)].map((m) => [m[1]!, { status: Number(m[2]), title: m[3]!.trim() }]));

describe('docs/errors.md', () => {
  it('the source has problem types to check', () => {
    expect(problems.length).toBeGreaterThanOrEqual(10);
    expect(new Set(problems.map((p) => p.type)).size).toBe(problems.length);
  });

  it.each(problems)('documents $type with its status and title', ({ type, status, title }) => {
    const row = rows.get(type);
    expect(row, `a table row for ${type} in docs/errors.md`).toBeDefined();
    expect(row!.status).toBe(status);
    expect(row!.title).toBe(title);
  });

  it('lists no type the service does not have', () => {
    const known = new Set(problems.map((p) => p.type));
    const typeLike = new Set([...page.matchAll(/https?:\/\/[^\s`"|)]*\/problems\/[A-Za-z0-9_-]+/g)].map((m) => m[0]));
    expect(typeLike.size).toBeGreaterThan(0);
    for (const t of typeLike) expect(known.has(t), `${t} is on the page but not in src/errors.ts`).toBe(true);
    for (const t of rows.keys()) expect(known.has(t), `row ${t}`).toBe(true);
  });
});
