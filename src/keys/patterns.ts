/**
 * Allow-list patterns: `*` matches any run of characters, everything else matches
 * itself. Filenames have no `/`, so no glob library is needed: a pattern compiles to an anchored
 * regular expression with every other character escaped.
 */
import type { Plan } from '../config.js';
import type { KeyRecord } from './types.js';

const PATTERN_RE = /^[A-Za-z0-9._*-]{1,128}$/;

/** Why a pattern is unusable, or undefined when it is fine. */
export function patternProblem(pattern: string): string | undefined {
  if (PATTERN_RE.test(pattern)) return undefined;
  return `invalid pattern ${JSON.stringify(pattern)}: use letters, digits, . _ - and * (any run of characters)`;
}

/** A predicate over filenames matching any of the patterns. */
export function compilePatterns(patterns: readonly string[]): (filename: string) => boolean {
  if (patterns.includes('*')) return () => true;
  const usable = patterns.filter((p) => patternProblem(p) === undefined);
  if (usable.length === 0) return () => false;
  const source = usable.map((p) => p.split('*').map(escapeRegExp).join('.*')).join('|');
  const re = new RegExp(`^(?:${source})$`);
  return (filename) => re.test(filename);
}

/** A key's effective allow-list: its own patterns plus those of its plan, without repeats. */
export function effectiveAllow(record: Pick<KeyRecord, 'plan' | 'allow'>, plans: Readonly<Record<string, Plan>>): string[] {
  const plan = record.plan === null ? undefined : plans[record.plan];
  return [...new Set([...record.allow, ...(plan?.allow ?? [])])];
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}
