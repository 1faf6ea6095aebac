// The floor of bench/stall.ts (a): a bare node:http server that does only the work of answering,
// with bytes made in advance: a 226 with a fixed patch body for /v1/data/*, and small JSON for
// /v1/files and /healthz. Argument: JSON { patchBytes, filesBytes }. Prints its port, then serves
// until killed.
import { createServer } from 'node:http';

const { patchBytes, filesBytes } = JSON.parse(process.argv[2]);
const patch = Buffer.alloc(patchBytes, 0x61);
const files = Buffer.from(JSON.stringify({ files: [{ name: 'x'.repeat(Math.max(0, filesBytes - 40)) }] }));
const health = Buffer.from('{"status":"ok"}');
const server = createServer((req, res) => {
  if (req.url.startsWith('/v1/data/')) {
    res.writeHead(226, {
      'content-type': 'application/json-patch+json',
      'content-encoding': 'gzip',
      im: 'json-patch',
      etag: '"0123456789abcdef0123456789abcdef"',
    });
    res.end(patch);
  } else {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(req.url.startsWith('/healthz') ? health : files);
  }
});
server.keepAliveTimeout = 60_000;
server.listen(0, '127.0.0.1', () => process.stdout.write(`${server.address().port}\n`));
