/** V8 CPU profiles (.cpuprofile, from `node --cpu-prof`) summed by package, file and function. */
import { readFileSync } from 'node:fs';
import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { table } from './report.js';
import { fmtInt } from './stats.js';

/** A stretch of the run (µs on the monotonic clock V8's profiles use), to cut a profile by. */
export interface Span {
  readonly label: string;
  readonly fromUs: number;
  readonly toUs: number;
}

export const monoUs = (): number => Number(process.hrtime.bigint() / 1000n);

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
}

/** Where a profile frame belongs: a package, a file of the project, a Node module, or a V8 bucket. */
function groupOf(frame: ProfileNode['callFrame']): string {
  const { url, functionName } = frame;
  if (!url) return functionName.startsWith('(') ? functionName : `(native) ${functionName}`;
  const nm = /node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(url);
  if (nm) return nm[1]!;
  const src = /\/dist\/((?:src|workers)\/.*?)\.js$/.exec(url);
  if (src) return src[1]!;
  if (url.startsWith('node:'))
    return url
      .replace(/^node:internal\//, 'node:')
      .split('/')
      .slice(0, 2)
      .join('/');
  return url;
}

/**
 * Self time grouped, and the top functions; idle time left out (shares are of the busy time).
 * `span`: only the samples between these times (µs, the profile's monotonic clock).
 */
export function summarizeProfile(
  path: string,
  top = 12,
  span?: { fromUs: number; toUs: number },
): { busyMs: number; groups: [string, number][]; functions: [string, number][] } {
  const p = JSON.parse(readFileSync(path, 'utf8')) as { nodes: ProfileNode[]; samples: number[]; timeDeltas: number[]; startTime: number };
  const byId = new Map(p.nodes.map((n) => [n.id, n]));
  const groups = new Map<string, number>();
  const fns = new Map<string, number>();
  let busy = 0;
  let at = p.startTime;
  for (let i = 0; i < p.samples.length; i++) {
    at += p.timeDeltas[i] ?? 0;
    const node = byId.get(p.samples[i]!);
    const dt = (p.timeDeltas[i + 1] ?? 0) / 1000;
    if (span && (at < span.fromUs || at >= span.toUs)) continue;
    if (!node || node.callFrame.functionName === '(idle)') continue;
    busy += dt;
    const g = groupOf(node.callFrame);
    groups.set(g, (groups.get(g) ?? 0) + dt);
    const f = `${node.callFrame.functionName || '(anonymous)'} ${g}${node.callFrame.url ? `:${node.callFrame.lineNumber + 1}` : ''}`;
    fns.set(f, (fns.get(f) ?? 0) + dt);
  }
  const sorted = (m: Map<string, number>) => [...m].sort((a, b) => b[1] - a[1]).slice(0, top);
  return { busyMs: busy, groups: sorted(groups), functions: sorted(fns) };
}

/** A summary as two tables (self time by package or file, top functions), each followed by a blank line. */
export function profileTables(s: ReturnType<typeof summarizeProfile>): string[] {
  const share = (ms: number) => `${Math.round((ms / s.busyMs) * 100)} %`;
  return [
    table(
      ['self time by package / file', 'ms', 'share'],
      s.groups.map(([g, ms]) => [g, fmtInt(ms), share(ms)]),
    ),
    '',
    table(
      ['top functions (self)', 'ms', 'share'],
      s.functions.map(([g, ms]) => [g.replace(/\|/g, '/'), fmtInt(ms), share(ms)]),
    ),
    '',
  ];
}

/** The CPU profiles in `dir` (`--cpu-prof`), whole and cut to each span: self time by file and the top functions. */
export async function profileReport(dir: string, spans: readonly Span[]): Promise<string[]> {
  const lines: string[] = [];
  for (const f of await readdir(dir))
    for (const span of [undefined, ...spans]) {
      const s = summarizeProfile(join(dir, f), 25, span);
      lines.push(`### reader profile ${f}${span ? `, ${span.label}` : ', whole run'}: ${fmtInt(s.busyMs)} ms busy`, '');
      lines.push(...profileTables(s));
    }
  return lines;
}
