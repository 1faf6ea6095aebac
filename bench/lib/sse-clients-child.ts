/**
 * The child process of bench/lib/sse-clients.ts (never run by hand): holds many /v1/stream
 * connections (raw sockets) or waiting /v1/changes long-polls and reports when each event or
 * answer arrived, on the clock the parent uses (nowMs()).
 *
 * Messages in: open | latencies | wait | waited | close (see ClientsChild). Out: one reply each.
 */
import { Agent, request } from 'node:http';
import { SseSocket } from './sse-clients.js';
import { nowMs } from './stats.js';

type Msg =
  | { cmd: 'open'; base: string; key: string; count: number; since: number; sampleEvery: number; batch: number }
  | { cmd: 'latencies'; t0: [number, number][] }
  | { cmd: 'wait'; base: string; key: string; count: number; since: number; waitS: number }
  | { cmd: 'waited' }
  | { cmd: 'close' };

const streams: SseSocket[] = [];
/** position → receive times at the sampled streams. */
let received = new Map<number, number[]>();
let sampled = 0;
let polls: Promise<{ at: number; change: boolean }>[] = [];
const agent = new Agent({ keepAlive: true, maxSockets: Number.POSITIVE_INFINITY });

async function open(m: Extract<Msg, { cmd: 'open' }>): Promise<{ opened: number; failed: number; error?: string }> {
  let opened = 0;
  let failed = 0;
  let error: string | undefined;
  for (let i = 0; i < m.count; i += m.batch) {
    const batch: SseSocket[] = [];
    for (let j = i; j < Math.min(m.count, i + m.batch); j++) {
      const sample = (streams.length + batch.length) % m.sampleEvery === 0;
      if (sample) sampled++;
      batch.push(
        new SseSocket(m.base, m.key, m.since, (e) => {
          if (!sample) return;
          let at = received.get(e.id);
          if (!at) received.set(e.id, (at = []));
          at.push(e.at);
        }),
      );
    }
    const settled = await Promise.allSettled(batch.map((s) => s.opened));
    settled.forEach((r, k) => {
      if (r.status === 'fulfilled') {
        opened++;
        streams.push(batch[k]!);
      } else {
        failed++;
        error ??= String((r.reason as Error).message);
        batch[k]!.close();
      }
    });
  }
  return { opened, failed, ...(error ? { error } : {}) };
}

function latencies(t0: [number, number][]): { ms: number[]; missing: number; behind: number; events: number } {
  const ms: number[] = [];
  let missing = 0;
  for (const [id, t] of t0) {
    const at = received.get(id) ?? [];
    for (const a of at) ms.push(a - t);
    missing += sampled - at.length;
  }
  const last = Math.max(0, ...t0.map(([id]) => id));
  const behind = streams.filter((s) => s.lastId < last).length;
  const events = streams.reduce((n, s) => n + s.events, 0);
  received = new Map();
  return { ms, missing, behind, events };
}

/** One long-poll: when its answer's head came, and whether it carried a change. */
function poll(base: string, key: string, since: number, waitS: number): Promise<{ at: number; change: boolean }> {
  const url = new URL(`/v1/changes?since=${since}&wait=${waitS}`, base);
  return new Promise((resolve) => {
    const req = request(url, { agent, headers: { 'x-api-key': key } }, (res) => {
      const at = nowMs();
      let body = '';
      res.setEncoding('utf8').on('data', (c: string) => (body += c));
      res.on('end', () => {
        let change = false;
        try {
          change = res.statusCode === 200 && (JSON.parse(body) as { changes: unknown[] }).changes.length > 0;
        } catch {
          /* not JSON */
        }
        resolve({ at, change });
      });
    });
    req.on('error', () => resolve({ at: Number.NaN, change: false }));
    req.end();
  });
}

async function handle(m: Msg): Promise<unknown> {
  switch (m.cmd) {
    case 'open':
      return open(m);
    case 'latencies':
      return latencies(m.t0);
    case 'wait':
      polls = Array.from({ length: m.count }, () => poll(m.base, m.key, m.since, m.waitS));
      return { sent: polls.length };
    case 'waited': {
      const r = await Promise.all(polls);
      return { at: r.map((x) => x.at), withChange: r.filter((x) => x.change).length };
    }
    case 'close': {
      const closed = streams.length;
      for (const s of streams.splice(0)) s.close();
      sampled = 0;
      received = new Map();
      return { closed };
    }
  }
}

process.on('message', (m: Msg) => {
  handle(m).then(
    (r) => process.send!(r),
    (err: unknown) => process.send!({ error: String(err) }),
  );
});
process.on('disconnect', () => process.exit(0));
process.send!({ ready: true });
