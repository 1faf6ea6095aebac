/**
 * The child process of bench/lib/bare/fanout.ts (never run by hand), plain JavaScript so that its
 * memory is that of a plain Node process: a bare node:http server of
 * server-sent events, nothing else (no framework, keys, log or limits). Every GET becomes a stream
 * on its socket, as the reader's streams are over HTTP/1.1; `run` writes one frame of the
 * reader's size to every stream at a given rate, in slices of 100 streams per turn of the event
 * loop as the reader does, and reports its CPU time and RSS from /proc. BARE_MODE=net: a
 * node:net server instead (the request's head read by hand, no HTTP objects at all), the floor
 * under node:http. `perWrite` > 1: that many frames joined into each write.
 */
import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { createServer as createNetServer } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';

/** @type {import('node:net').Socket[]} */
const streams = [];
const HEAD = 'HTTP/1.1 200 OK\r\ncontent-type: text/event-stream; charset=utf-8\r\ncache-control: no-store\r\nconnection: close\r\n\r\n';
const server =
  process.env.BARE_MODE === 'net'
    ? createNetServer((socket) => {
        let head = '';
        const onData = (c) => {
          head += c.toString('latin1');
          if (!head.includes('\r\n\r\n')) return;
          socket.off('data', onData);
          socket.resume();
          socket.write(HEAD);
          streams.push(socket);
        };
        socket.on('data', onData);
        socket.on('error', () => {});
        socket.once('close', () => {
          const i = streams.indexOf(socket);
          if (i >= 0) streams.splice(i, 1);
        });
      })
    : createServer((_req, res) => {
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
async function run(rate, seconds, frameBytes, perWrite = 1) {
  const cpu0 = cpuMs();
  let writes = 0;
  let rssMax = process.memoryUsage.rss();
  const start = performance.now();
  let pending = [];
  for (let i = 0; i < rate * seconds; i++) {
    await sleep(Math.max(0, start + (i * 1000) / rate - performance.now()));
    const head = `id: ${++id}\nevent: change\ndata: `;
    pending.push(Buffer.from(`${head}${'x'.repeat(Math.max(0, frameBytes - head.length - 2))}\n\n`));
    if (pending.length < perWrite) continue;
    const frame = pending.length === 1 ? pending[0] : Buffer.concat(pending);
    const events = pending.length;
    pending = [];
    const list = [...streams];
    for (let j = 0; j < list.length; j += 100) {
      for (let k = j; k < Math.min(j + 100, list.length); k++) list[k].write(frame);
      writes += Math.min(100, list.length - j) * events;
      await new Promise((r) => setImmediate(r));
    }
    rssMax = Math.max(rssMax, process.memoryUsage.rss());
  }
  return { writes, cpuMs: cpuMs() - cpu0, rssMax, streams: streams.length };
}

process.on('message', (m) => {
  const reply =
    m.cmd === 'run' ? run(m.rate, m.seconds, m.frameBytes, m.perWrite) : Promise.resolve({ rss: process.memoryUsage.rss(), streams: streams.length });
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
