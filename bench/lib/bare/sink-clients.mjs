/**
 * The child process of bench/write-floor.ts (never run by hand), plain JavaScript: opens many
 * TCP connections to one port on 127.0.0.1, sends a minimal HTTP GET head on each (so that the
 * node:http and node:net servers start a stream; the C server ignores it), waits for each
 * response head, then reads and discards everything, counting the bytes after the head. Driven
 * over IPC: `open` (resolves once every head came), `count`, `close`; each answered once.
 */
import { connect } from 'node:net';

const REQUEST = 'GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n';
/** @type {import('node:net').Socket[]} */
const sockets = [];
let bodyBytes = 0;

/** One connection; resolves once the response head has come. */
const stream = (port) =>
  new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    sockets.push(socket);
    let head = '';
    socket.once('error', reject);
    socket.once('connect', () => socket.write(REQUEST));
    socket.on('data', (chunk) => {
      if (head === undefined) {
        bodyBytes += chunk.length;
        return;
      }
      head += chunk.toString('latin1');
      const end = head.indexOf('\r\n\r\n');
      if (end < 0) return;
      bodyBytes += head.length - end - 4;
      head = undefined;
      socket.off('error', reject);
      socket.on('error', () => undefined);
      resolve();
    });
  });

async function open({ port, n }) {
  // A hundred connections at a time: thousands at once would only queue in the backlog.
  for (let i = 0; i < n; i += 100) await Promise.all(Array.from({ length: Math.min(100, n - i) }, () => stream(port)));
  return { opened: n };
}

process.on('message', (msg) => {
  const answer = (p) =>
    Promise.resolve(p).then(
      (r) => process.send({ ok: true, ...r }),
      (err) => process.send({ ok: false, error: String(err?.message ?? err) }),
    );
  if (msg.op === 'open') answer(open(msg));
  else if (msg.op === 'count') answer({ bodyBytes });
  else if (msg.op === 'close') {
    for (const s of sockets.splice(0)) s.destroy();
    bodyBytes = 0;
    answer({});
  }
});
process.on('disconnect', () => process.exit(0));
