/** The fan-out part of bench:changes in its report: rows against the targets and a note. */
import { fmtMs, fmtX, median, quantile } from '../common/stats.js';

export interface FanOutResult {
  readonly n: number;
  readonly fan: { readonly ms: number[]; readonly missing: number; readonly behind: number };
  readonly fanT0: [number, number][];
  readonly fanRef: number[];
  /** Receive time at each sampled stream after the reference client's (the broadcast's spread). */
  readonly spread: number[];
  readonly skipped: number;
  /** Reader CPU while the changes flowed, ms. */
  readonly cpuFan: number;
  readonly rss0: number;
  readonly rssOpen: number;
  readonly rssMax: number;
  readonly without: { readonly rps: number; readonly p99ms: number };
  readonly withStreams: { readonly rps: number; readonly p99ms: number };
  /** The same /v1/data load, the reader's streams closed, while the bare server writes the same events to the same clients. */
  readonly withBare: { readonly rps: number; readonly p99ms: number };
  readonly conflated:
    { readonly n: number; readonly cpu: number; readonly changes: number; readonly idle: { readonly cpu: number; readonly changes: number } } | undefined;
  readonly floors: readonly { name: string; cpuMs: number; writes: number; rssStart: number; rssOpen: number; n: number }[];
  readonly bare: { n: number; rssStart: number; rssOpen: number; rssMax: number; writes: number; cpuMs: number };
}

export interface FanOutReportOptions {
  readonly streams: number;
  readonly sample: number;
  readonly fanRate: number;
  readonly fanSeconds: number;
  readonly fanConflate: number;
  readonly frameBytes: number;
  /** The reader's RSS once started. */
  readonly rssStart: number;
  /** Reader processes (`--processes`): the RSS budget is per process, the figures their sums. */
  readonly processes: number;
  readonly afterOtherParts: boolean;
  /** The /v1/data load: tool, connections, seconds. */
  readonly load: string;
  readonly kb: number;
}

const verdict = (ok: boolean) => (ok ? 'met' : '**missed**');
const pct = (v: number[]) => `${fmtMs(median(v))} / ${fmtMs(quantile(v, 0.99))}`;

export function fanOutReport(fo: FanOutResult, o: FanOutReportOptions): { rows: string[][]; notes: string[] } {
  const MB = 2 ** 20;
  const rows: string[][] = [];
  const notes: string[] = [];
  const rssLimit = o.processes * 100 * MB + fo.n * 10 * 1024;
  const ratio = fo.withStreams.rps / fo.without.rps;
  const writes = fo.n * fo.fanT0.length;
  rows.push([
    `fan-out: ${fo.n} streams${o.processes > 1 ? ` on ${o.processes} reader processes` : ''}, ${o.fanRate} changes/s, rename → event at ${fo.fan.ms.length / Math.max(1, fo.fanT0.length)} sampled streams`,
    `${pct(fo.fan.ms)} ms`,
    'p99 ≤ 100 ms',
    verdict(quantile(fo.fan.ms, 0.99) <= 100 && fo.n >= o.streams),
  ]);
  rows.push(['  the same at the reference client', `${pct(fo.fanRef)} ms`, '', '']);
  rows.push(['  the reference client (written to first) → the sampled streams', `${pct(fo.spread)} ms`, '', '']);
  rows.push([
    `fan-out: reader RSS, peak with the streams open${o.processes > 1 ? ` (${o.processes} processes summed)` : ''}`,
    `${(fo.rssMax / MB).toFixed(0)} MB`,
    `≤ ${(rssLimit / MB).toFixed(0)} MB`,
    verdict(fo.rssMax <= rssLimit),
  ]);
  rows.push([`fan-out: /v1/data throughput with the streams / without`, fmtX(ratio), '≥ 0.80×', verdict(ratio >= 0.8)]);
  rows.push([
    '  for comparison: /v1/data while the bare node:http server writes the same events to the same clients / without',
    fmtX(fo.withBare.rps / fo.without.rps),
    '',
    '',
  ]);
  const b = fo.bare;
  const cpuRatio = (fo.cpuFan / Math.max(1, writes)) * (b.writes / Math.max(1, b.cpuMs));
  rows.push([
    `fan-out: reader CPU per event written / bare node:http's (one event per write)`,
    `${fmtMs((fo.cpuFan * 1000) / Math.max(1, writes))} / ${fmtMs((b.cpuMs * 1000) / Math.max(1, b.writes))} µs: ${fmtX(cpuRatio)}`,
    '≤ 0.70×',
    verdict(cpuRatio <= 0.7),
  ]);
  for (const f of fo.floors) {
    const what = f.name === 'net' ? 'node:net server, one event per write' : 'bare node:http, 10 events per write';
    const perEvent = (f.cpuMs * 1000) / Math.max(1, f.writes);
    const rss = (f.rssOpen - f.rssStart) / Math.max(1, f.n) / 1024;
    rows.push([`  for comparison: ${what}`, `${fmtMs(perEvent)} µs per event, ${fmtMs(rss)} KB per stream`, '', '']);
  }
  const perStream = (fo.rssOpen - fo.rss0) / Math.max(1, fo.n);
  const barePerStream = (b.rssOpen - b.rssStart) / Math.max(1, b.n);
  rows.push([
    `fan-out: RSS per open stream, idle: reader / bare node:http`,
    `${fmtMs(perStream / 1024)} / ${fmtMs(barePerStream / 1024)} KB: ${fmtX(perStream / barePerStream)}`,
    '≤ 0.50×',
    verdict(perStream <= 0.5 * barePerStream),
  ]);
  if (fo.conflated) {
    const c = fo.conflated.cpu / Math.max(1, fo.cpuFan);
    rows.push([
      `fan-out: reader CPU with ?conflate=${o.fanConflate} / without (${fo.conflated.n} streams, same seconds)`,
      `${fo.conflated.cpu} / ${fo.cpuFan} ms: ${fmtX(c)}`,
      '≤ 0.20×',
      verdict(c <= 0.2),
    ]);
    const idle = fo.conflated.idle;
    rows.push([
      `  for comparison: the same changes with no stream open`,
      `${idle.cpu} ms (${idle.changes} changes): the streams' part ${fo.conflated.cpu - idle.cpu} / ${fo.cpuFan - idle.cpu} ms, ${fmtX((fo.conflated.cpu - idle.cpu) / Math.max(1, fo.cpuFan - idle.cpu))}`,
      '',
      '',
    ]);
  }
  notes.push(
    `Fan-out: ${fo.n} of ${o.streams} streams opened on ${o.processes > 1 ? `${o.processes} reader processes sharing the port` : 'the one reader'}; every ${o.sample}-th timed its events; ${fo.fanT0.length} changes timed (${fo.skipped} drops replaced in the inbox by the next before they were claimed, so never published); ${fo.fan.missing} sampled events missing, ${fo.fan.behind} streams behind at the end. Reader CPU while changes flowed: ${fmtMs(fo.cpuFan / (o.fanSeconds + 2) / 10)} % of a core, ${fmtMs((fo.cpuFan * 1000) / Math.max(1, writes))} µs per event written (${writes} writes). Reader RSS ${(o.rssStart / MB).toFixed(0)} MB once started, ${(fo.rss0 / MB).toFixed(0)} MB just before the streams opened${o.afterOtherParts ? ' (after the parts above)' : ''}, ${(fo.rssOpen / MB).toFixed(0)} MB with the streams open and idle, ${(fo.rssMax / MB).toFixed(0)} MB peak while changes flowed: ${fmtMs((fo.rssMax - fo.rss0) / Math.max(1, fo.n) / 1024)} KB per stream. Bare node:http reference (the same clients, ${b.n} streams, ${o.fanRate} frames/s of ${o.frameBytes} bytes): ${fmtMs((b.cpuMs * 1000) / Math.max(1, b.writes))} µs of CPU per event written (${b.writes} writes), RSS ${(b.rssStart / MB).toFixed(0)} MB started, ${(b.rssOpen / MB).toFixed(0)} MB with the streams open, ${(b.rssMax / MB).toFixed(0)} MB peak while writing. /v1/data of a ${o.kb} KB file (${o.load}, while changes flow at ${o.fanRate}/s): ${Math.round(fo.without.rps)} req/s without the streams, ${Math.round(fo.withStreams.rps)} req/s with them, ${Math.round(fo.withBare.rps)} req/s while the bare server wrote the events (p99 ${fmtMs(fo.without.p99ms)} / ${fmtMs(fo.withStreams.p99ms)} / ${fmtMs(fo.withBare.p99ms)} ms).`,
  );
  return { rows, notes };
}
