/**
 * HTTP load on keep-alive connections: wrk (one thread, in its own process) when installed, else
 * autocannon in the bench's process. Any non-2xx/3xx answer or socket error fails the run.
 */
import { spawn } from 'node:child_process';
import autocannon from 'autocannon';
import { which } from './machine.js';

export interface LoadSpec {
  readonly url: string;
  readonly headers: Record<string, string>;
  readonly connections: number;
  readonly seconds: number;
}

export interface LoadResult {
  readonly rps: number;
  readonly p99ms: number;
  readonly mbps: number;
  readonly requests: number;
}

const WRK = which('wrk');

/** What generates the load, as the reports name it. */
export const loadTool = WRK ? 'wrk, 1 thread' : 'autocannon in the bench process';

export async function runLoad(spec: LoadSpec): Promise<LoadResult> {
  return WRK ? wrk(WRK, spec) : viaAutocannon(spec);
}

async function wrk(bin: string, spec: LoadSpec): Promise<LoadResult> {
  const hdr = Object.entries(spec.headers).flatMap(([k, v]) => ['-H', `${k}: ${v}`]);
  const child = spawn(bin, ['-t1', `-c${spec.connections}`, `-d${spec.seconds}s`, '--latency', ...hdr, spec.url], { stdio: ['ignore', 'pipe', 'pipe'] });
  let text = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (c: string) => (text += c));
  child.stderr.setEncoding('utf8').on('data', (c: string) => (stderr += c));
  const status = await new Promise<number | null>((r) => child.once('exit', r));
  const bad = /Non-2xx or 3xx responses: (\d+)/.exec(text);
  const errors = /Socket errors: (.*)/.exec(text);
  if (status !== 0 || bad || (errors && /timeout [1-9]|read [1-9]|write [1-9]|connect [1-9]/.test(errors[1]!)))
    throw new Error(`wrk ${spec.url}: ${text}${stderr}`);
  const p99 = /99%\s+([\d.]+)(us|ms|s)\b/.exec(text);
  const unit = { us: 0.001, ms: 1, s: 1000 } as const;
  const transfer = /Transfer\/sec:\s+([\d.]+)(B|KB|MB|GB)/.exec(text);
  const scale = { B: 1, KB: 1024, MB: 1024 ** 2, GB: 1024 ** 3 } as const;
  return {
    rps: Number(/Requests\/sec:\s+([\d.]+)/.exec(text)?.[1]),
    p99ms: p99 ? Number(p99[1]) * unit[p99[2] as keyof typeof unit] : Number.NaN,
    mbps: transfer ? (Number(transfer[1]) * scale[transfer[2] as keyof typeof scale]) / 1e6 : Number.NaN,
    requests: Number(/(\d+) requests in/.exec(text)?.[1]),
  };
}

async function viaAutocannon(spec: LoadSpec): Promise<LoadResult> {
  const r = await autocannon({ url: spec.url, connections: spec.connections, duration: spec.seconds, headers: spec.headers });
  if (r.non2xx + r.errors + r.timeouts > 0) throw new Error(`${spec.url}: ${r.non2xx} non-2xx, ${r.errors} errors, ${r.timeouts} timeouts`);
  return { rps: r.requests.average, p99ms: r.latency.p99, mbps: r.throughput.average / 1e6, requests: r.requests.total };
}
