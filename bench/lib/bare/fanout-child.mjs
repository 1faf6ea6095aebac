/**
 * The child process of bench/lib/bare/fanout.ts (never run by hand), plain JavaScript so that its
 * memory is that of a plain Node process: a bare node:http server of
 * server-sent events, nothing else (no framework, keys, log or limits). Every GET becomes a stream
 * on its socket, as the reader's streams are over HTTP/1.1; `run` writes one frame of the
 * reader's size to every stream at a given rate, in slices of 100 streams per turn of the event
 * loop as the reader does, and reports its CPU time (user and system, getrusage) and RSS.
 * BARE_MODE=net: a node:net server instead (the request's head read by hand, no HTTP objects at
 * all), the floor under node:http. BARE_MODE=fd: the same node:net server, but each frame written
 * with fs.writeSync on the socket's descriptor when nothing is queued on it (socket.write for the
 * rest after EAGAIN or a short write, counted as `fallbacks`): what Node's stream layer costs
 * above the system call. `perWrite` > 1: that many frames joined into each write.
 */
import { writeSync } from 'node:fs';
import { createServer } from 'node:http';
import { createServer as createNetServer } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';

/** @type {import('node:net').Socket[]} */
const streams = [];
const HEAD = 'HTTP/1.1 200 OK\r\ncontent-type: text/event-stream; charset=utf-8\r\ncache-control: no-store\r\nconnection: close\r\n\r\n';
const MODE = process.env.BARE_MODE ?? 'http';
const server =
  MODE === 'net' || MODE === 'fd'
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

/** User and system CPU of this process, ms (getrusage: microseconds, where /proc counts 10 ms ticks). */
function cpuMs() {
  const c = process.cpuUsage();
  return { user: c.user / 1000, system: c.system / 1000 };
}

let fallbacks = 0;
/** BARE_MODE=fd: one write(2) on the descriptor; what it did not take goes through the stream. */
function writeFd(socket, frame) {
  const fd = socket._handle?.fd;
  if (socket.writableLength === 0 && typeof fd === 'number' && fd >= 0) {
    let n = 0;
    try {
      n = writeSync(fd, frame);
    } catch {
      // EAGAIN (or the peer gone): the stream queues it and reports any error.
    }
    if (n === frame.length) return;
    fallbacks++;
    socket.write(n === 0 ? frame : frame.subarray(n));
    return;
  }
  fallbacks++;
  socket.write(frame);
}

let id = 1_000_000_000;
async function run(rate, seconds, frameBytes, perWrite = 1) {
  const cpu0 = cpuMs();
  fallbacks = 0;
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
      if (MODE === 'fd') for (let k = j; k < Math.min(j + 100, list.length); k++) writeFd(list[k], frame);
      else for (let k = j; k < Math.min(j + 100, list.length); k++) list[k].write(frame);
      writes += Math.min(100, list.length - j) * events;
      await new Promise((r) => setImmediate(r));
    }
    rssMax = Math.max(rssMax, process.memoryUsage.rss());
  }
  const cpu = cpuMs();
  const userMs = cpu.user - cpu0.user;
  const systemMs = cpu.system - cpu0.system;
  return { writes, cpuMs: userMs + systemMs, userMs, systemMs, fallbacks, rssMax, streams: streams.length };
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
