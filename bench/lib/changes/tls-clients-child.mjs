/**
 * The child process of bench/changes-tls.ts (never run by hand), plain JavaScript: holds many
 * GET /v1/stream clients of one transport and counts their events without decoding them.
 * Transports: `http` (HTTP/1.1 on TCP), `tls` (HTTP/1.1 on TLS), `h2` (HTTP/2 on TLS, `mux`
 * streams per connection). Driven over IPC: `open`, `count`, `close`; each answered once.
 */
import { connect as h2connect } from 'node:http2';
import { connect as netConnect } from 'node:net';
import { connect as tlsConnect } from 'node:tls';

const ID = Buffer.from('id: ');
/** Each stream's way to go away. */
const closers = [];
let events = 0;

const count = (chunk) => {
  for (let i = chunk.indexOf(ID); i !== -1; i = chunk.indexOf(ID, i + 4)) events++;
};

/** An HTTP/1.1 stream on `socket`; resolves on its head. */
const h1 = (socket, key) =>
  new Promise((resolve, reject) => {
    let head = true;
    socket.on('error', reject);
    socket.on('data', (chunk) => {
      if (head) {
        head = false;
        if (!chunk.subarray(0, 12).toString('latin1').startsWith('HTTP/1.1 200')) return reject(new Error(chunk.subarray(0, 200).toString()));
        resolve();
      }
      count(chunk);
    });
    socket.write(`GET /v1/stream HTTP/1.1\r\nHost: localhost\r\nX-API-Key: ${key}\r\n\r\n`);
    closers.push(() => socket.destroy());
  });

/** `n` HTTP/2 streams on one session; resolves when every head came. */
const h2 = (url, key, n, ca) => {
  const session = h2connect(url, { ca });
  session.on('error', () => undefined);
  closers.push(() => session.destroy());
  return Promise.all(
    Array.from(
      { length: n },
      () =>
        new Promise((resolve, reject) => {
          const req = session.request({ ':path': '/v1/stream', 'x-api-key': key });
          req.on('response', (h) => (h[':status'] === 200 ? resolve() : reject(new Error(`status ${h[':status']}`))));
          req.on('data', count);
          req.on('error', reject);
        }),
    ),
  );
};

async function open({ transport, url, key, n, mux, ca }) {
  const { hostname, port } = new URL(url);
  const opts = { host: hostname, port: Number(port), ca, servername: 'localhost' };
  // A hundred connections at a time: the handshakes of thousands at once would only queue.
  const groups = transport === 'h2' ? Math.ceil(n / mux) : n;
  const per = (g) => (transport === 'h2' ? Math.min(mux, n - g * mux) : 1);
  for (let g = 0; g < groups; g += 100) {
    await Promise.all(
      Array.from({ length: Math.min(100, groups - g) }, (_, i) => {
        if (transport === 'h2') return h2(url, key, per(g + i), ca);
        if (transport === 'tls') {
          const socket = tlsConnect({ ...opts, ALPNProtocols: ['http/1.1'] });
          return new Promise((r, j) => socket.once('secureConnect', r).once('error', j)).then(() => h1(socket, key));
        }
        const socket = netConnect(opts.port, opts.host);
        return new Promise((r, j) => socket.once('connect', r).once('error', j)).then(() => h1(socket, key));
      }),
    );
  }
  return { opened: n };
}

process.on('message', (msg) => {
  const answer = (p) =>
    Promise.resolve(p).then(
      (r) => process.send({ ok: true, ...r }),
      (err) => process.send({ ok: false, error: String(err?.message ?? err) }),
    );
  if (msg.op === 'open') answer(open(msg));
  else if (msg.op === 'count') answer({ events });
  else if (msg.op === 'close') {
    for (const c of closers.splice(0)) c();
    events = 0;
    answer({});
  }
});
process.on('disconnect', () => process.exit(0));
