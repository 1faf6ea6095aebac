/**
 * The fan-out part of bench:changes: many streams on the reader, changes of one file at a steady
 * rate: latency at sampled streams, the reader's RSS and CPU, /v1/data throughput with and without
 * the streams, the same streams conflated, then the same clients on a bare node:http server of
 * events (bare/fanout.ts) and any further floors.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { BareFanout } from '../bare/fanout.js';
import { monoUs, type Span } from '../common/profile.js';
import type { Bench } from './bench.js';
import type { FanOutResult } from './fanout-report.js';
import { runLoad } from '../common/load.js';
import { quiesce } from '../common/proc.js';
import { log } from '../common/run.js';
import { fmtMs, median, nowMs, quantile } from '../common/stats.js';

export interface FanOutOptions {
  readonly streams: number;
  /** Every N-th stream times its events. */
  readonly sample: number;
  readonly fanRate: number;
  readonly fanSeconds: number;
  /** `?conflate=` of the conflated run (0: none). */
  readonly fanConflate: number;
  readonly loadConnections: number;
  readonly loadSeconds: number;
  /** Environment of the bare servers. */
  readonly env: Record<string, string>;
  /** More references: net, joined. */
  readonly floors: readonly string[];
  /** The file of the /v1/data load. */
  readonly dataFile: string;
}

const pct = (v: number[]) => `${fmtMs(median(v))} / ${fmtMs(quantile(v, 0.99))}`;

/** The part's measurements; `spans` names the stretches of time a reader profile is cut into. */
export function fanOutPart(o: FanOutOptions): { measureFanOut(bench: Bench): Promise<FanOutResult>; readonly spans: Span[] } {
  const spans: Span[] = [];

  /** Drops of the measured feed at `rate`/s until stop(): their [position, rename time]. */
  function dropLoop(bench: Bench, rate: number): () => Promise<{ t0: [number, number][]; skipped: number }> {
    let stop = false;
    const done = (async () => {
      const out: Promise<[number, number] | undefined>[] = [];
      const start = nowMs();
      for (let i = 0; !stop; i++) {
        await sleep(Math.max(0, start + (i * 1000) / rate - nowMs()));
        const d = await bench.drop(bench.template);
        out.push(d.event.then((e) => (e ? ([e.id, d.t0] as [number, number]) : undefined)));
      }
      const all = await Promise.all(out);
      const got = all.filter((x) => x !== undefined);
      return { t0: got, skipped: all.length - got.length };
    })();
    return async () => {
      stop = true;
      return done;
    };
  }

  /** /v1/data of the loaded feed under load while changes flow at `--fan-rate`. */
  async function loadData(bench: Bench) {
    const stop = dropLoop(bench, o.fanRate);
    const r = await runLoad({
      url: `${bench.base}/v1/data/${o.dataFile}`,
      headers: { 'x-api-key': bench.sys.key },
      connections: o.loadConnections,
      seconds: o.loadSeconds,
    });
    await stop();
    return r;
  }

  /** Part 3: many streams on the one reader, then the same on a bare node:http server of events. */
  async function measureFanOut(bench: Bench): Promise<FanOutResult> {
    const without = await loadData(bench);
    await quiesce(bench.pids());
    const rss0 = bench.readerRss();
    const t1 = Date.now();
    const n = await bench.openStreams(o.streams, bench.sys.key, o.sample);
    log(`fan-out: ${n} streams open in ${((Date.now() - t1) / 1000).toFixed(1)} s`);
    await quiesce(bench.pids(), { maxMs: 10_000 });
    const rssOpen = bench.readerRss();
    let rssMax = rssOpen;
    const rssTimer = setInterval(() => (rssMax = Math.max(rssMax, bench.readerRss())), 250);
    const cpu0 = bench.readerCpu();
    const fromUs = monoUs();
    const stopFan = dropLoop(bench, o.fanRate);
    await sleep(o.fanSeconds * 1000);
    const { t0: fanT0, skipped } = await stopFan();
    await sleep(2000);
    const cpuFan = bench.readerCpu() - cpu0;
    spans.push({ label: `${n} streams, changes at ${o.fanRate}/s`, fromUs, toUs: monoUs() });
    const refAt = new Map([...bench.seen.values()].map((e) => [e.id, e.at]));
    // The broadcast's spread: each sampled stream's receive time after the reference client's, the
    // first stream written to (the ingest path left out).
    const spread = await bench.latencies(
      fanT0.map(([id]) => [id, refAt.get(id)!]),
      true,
    );
    const fan = await bench.latencies(fanT0);
    const fanRef = fanT0.map(([id, t0]) => refAt.get(id)! - t0);
    const withStreams = await loadData(bench);
    clearInterval(rssTimer);
    await Promise.all(bench.children.map((c) => c.closeAll()));
    const conflated = o.fanConflate > 0 ? await measureConflated(bench) : undefined;
    // The floor: a bare node:http server of events, the same clients, the same rate and frame size.
    const bare = await BareFanout.start(o.env);
    const bareStart = (await bare.idle()).rss;
    const bareN = await bench.openStreams(o.streams, 'bare', o.sample, bare.url);
    await quiesce([...bench.pids(), bare.pid], { maxMs: 10_000 });
    const bareOpen = (await bare.idle()).rss;
    const bareRun = await bare.run(o.fanRate, o.fanSeconds, bench.frameBytes);
    // What the machine leaves /v1/data when these events go to these clients at all: the reader's
    // /v1/data (its streams closed) while the bare server writes the same events.
    const [, withBare] = await Promise.all([bare.run(o.fanRate, o.loadSeconds + 2, bench.frameBytes), sleep(1000).then(() => loadData(bench))]);
    await Promise.all(bench.children.map((c) => c.closeAll()));
    bare.stop();
    const floors: { name: string; cpuMs: number; writes: number; rssStart: number; rssOpen: number; n: number }[] = [];
    for (const name of o.floors) floors.push({ name, ...(await measureFloor(bench, name)) });
    const r = {
      without,
      withStreams,
      withBare,
      rss0,
      rssOpen,
      rssMax,
      n,
      fan,
      fanT0,
      skipped,
      fanRef,
      spread: spread.ms,
      cpuFan,
      conflated,
      floors,
      bare: { n: bareN, rssStart: bareStart, rssOpen: bareOpen, ...bareRun },
    };
    log(`fan-out: p50/p99 ${pct(fan.ms)} ms at ${fan.ms.length / Math.max(1, fanT0.length)} sampled streams; RSS ${(rssMax / 2 ** 20).toFixed(0)} MB`);
    return r;
  }

  /** Another reference, the same clients and rate: `net` a node:net server, `joined` node:http with 10 events per write. */
  async function measureFloor(bench: Bench, name: string) {
    const ref = await BareFanout.start({ ...o.env, ...(name === 'net' ? { BARE_MODE: 'net' } : {}) });
    const rssStart = (await ref.idle()).rss;
    const n = await bench.openStreams(o.streams, 'bare', 0, ref.url);
    await quiesce([...bench.pids(), ref.pid], { maxMs: 10_000 });
    const rssOpen = (await ref.idle()).rss;
    const r = await ref.run(o.fanRate, o.fanSeconds, bench.frameBytes, name === 'joined' ? 10 : 1);
    await Promise.all(bench.children.map((c) => c.closeAll()));
    ref.stop();
    return { cpuMs: r.cpuMs, writes: r.writes, rssStart, rssOpen, n };
  }

  /** The reader's CPU for `--fan-seconds` of changes at `--fan-rate` (and 2 s after), with what is open now. */
  async function changesCpu(bench: Bench, label: string) {
    await quiesce(bench.pids(), { maxMs: 10_000 });
    const cpu0 = bench.readerCpu();
    const fromUs = monoUs();
    const stop = dropLoop(bench, o.fanRate);
    await sleep(o.fanSeconds * 1000);
    const { t0 } = await stop();
    await sleep(2000);
    spans.push({ label, fromUs, toUs: monoUs() });
    return { cpu: bench.readerCpu() - cpu0, changes: t0.length };
  }

  /**
   * The same streams asking for `?conflate=`: the reader's CPU for the same seconds of changes; and
   * with no stream open, the part of it no stream causes (installing each version, the feed).
   */
  async function measureConflated(bench: Bench) {
    const idle = await changesCpu(bench, 'no streams, the same changes');
    const n = await bench.openStreams(o.streams, bench.sys.key, 0, `${bench.base}?conflate=${o.fanConflate}`);
    const { cpu, changes } = await changesCpu(bench, `${n} streams ?conflate=${o.fanConflate}`);
    await Promise.all(bench.children.map((c) => c.closeAll()));
    log(`fan-out conflated: ${n} streams, reader CPU ${cpu} ms for ${changes} changes; no streams: ${idle.cpu} ms for ${idle.changes}`);
    return { n, cpu, changes, idle };
  }

  return { measureFanOut, spans };
}
