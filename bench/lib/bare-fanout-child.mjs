/**
 * The child process of bench/lib/bare-fanout.ts (never run by hand), plain JavaScript so that its
 * memory is that of a plain Node process: a bare node:http server of
 * server-sent events, nothing else (no framework, keys, log or limits). Every GET becomes a stream
 * on its socket, as the reader's streams are over HTTP/1.1; `run` writes one frame of the
 * reader's size to every stream at a given rate, in slices of 500 streams per turn of the event
 * loop as the reader does, and reports its CPU time and RSS from /proc.
 */
import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';

/** @type {import('node:net').Socket[]} */
const streams = [];
const server = createServer((_req, res) => {
  res.useChunkedEncodingByDefault = false;
  res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-store' });
  res.flushHeaders();
  streams.push(res.socket);
  res.once('close', () => streams.splice(streams.indexOf(res.socket), 1));
});

/** User + system CPU of this process, ms. */
function cpuMs() {
  const f = readFileSync('/proc/self/stat', 'utf8').split(') ')[1].split(' ');
  return (Number(f[11]) + Number(f[12])) * 10;
}

let id = 1_000_000_000;
async function run(rate, seconds, frameBytes) {
  const cpu0 = cpuMs();
  let writes = 0;
  let rssMax = process.memoryUsage.rss();
  const start = performance.now();
  for (let i = 0; i < rate * seconds; i++) {
    await sleep(Math.max(0, start + (i * 1000) / rate - performance.now()));
    const head = `id: ${++id}\nevent: change\ndata: `;
    const frame = Buffer.from(`${head}${'x'.repeat(Math.max(0, frameBytes - head.length - 2))}\n\n`);
    const list = [...streams];
    for (let j = 0; j < list.length; j += 500) {
      for (let k = j; k < Math.min(j + 500, list.length); k++) list[k].write(frame);
      writes += Math.min(500, list.length - j);
      await new Promise((r) => setImmediate(r));
    }
    rssMax = Math.max(rssMax, process.memoryUsage.rss());
  }
  return { writes, cpuMs: cpuMs() - cpu0, rssMax, streams: streams.length };
}

process.on('message', (m) => {
  const reply = m.cmd === 'run' ? run(m.rate, m.seconds, m.frameBytes) : Promise.resolve({ rss: process.memoryUsage.rss(), streams: streams.length });
  reply.then(
    (r) => process.send(r),
    (err) => process.send({ error: String(err) }),
  );
});
process.on('disconnect', () => process.exit(0));
server.listen(0, '127.0.0.1', () => {
  const a = server.address();
  process.send({ port: typeof a === 'object' && a ? a.port : 0 });
});
