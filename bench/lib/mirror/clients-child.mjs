// Many consumers in one process for bench/mirror.ts: `stream` runs @oddsfiles/client (what the
// mirror runs, without writing a folder), `poll` asks every file once a second with
// If-None-Match, as a consumer without the change feed would. Argument: JSON { url, key, n, mode,
// files }. Prints "ready" once every consumer holds every file; on "go" (stdin) counts from zero;
// on "stop" prints what it counted as one JSON line and exits.
import { createInterface } from 'node:readline';
import { createClient } from '@oddsfiles/client';

const { url, key, n, mode, files } = JSON.parse(process.argv[2]);
let counting = false;
const out = { updates: 0, patches: 0, wireBytes: 0, lagMs: [], requests: 0, notModified: 0, errors: 0 };
const clients = [];
let ready = 0;
const isReady = () => ++ready === n && process.stdout.write('ready\n');

async function stream() {
  const client = createClient({
    url,
    key,
    onNotice: () => {
      if (counting) out.errors++;
    },
  });
  clients.push(client);
  let was = false;
  for await (const c of client.changes()) {
    if (!was && client.files.size === files) {
      was = true;
      isReady();
    }
    if (!counting || c.type !== 'update') continue;
    out.updates++;
    if (c.via === 'patch') out.patches++;
    out.wireBytes += c.wireBytes;
    if (out.lagMs.length < 20_000) out.lagMs.push(c.lagMs.published);
  }
}

async function poll() {
  const headers = { 'x-api-key': key, 'accept-encoding': 'gzip' };
  const names = (await (await fetch(`${url}/v1/files`, { headers })).json()).files;
  const etags = new Map();
  for (let round = 0; ; round++) {
    const started = Date.now();
    for (const name of names) {
      const h = etags.has(name) ? { ...headers, 'if-none-match': etags.get(name) } : headers;
      try {
        const res = await fetch(`${url}/v1/data/${name}`, { headers: h });
        await res.arrayBuffer();
        if (counting) out.requests++;
        if (res.status === 304) {
          if (counting) out.notModified++;
        } else if (res.ok) {
          etags.set(name, res.headers.get('etag'));
          if (counting) out.updates++;
        } else if (counting) out.errors++;
      } catch {
        if (counting) out.errors++;
      }
    }
    if (round === 0) isReady();
    await new Promise((r) => setTimeout(r, Math.max(0, 1000 - (Date.now() - started))));
  }
}

for (let i = 0; i < n; i++) void (mode === 'stream' ? stream() : poll()).catch((err) => process.stderr.write(`client: ${err.message}\n`));
createInterface({ input: process.stdin }).on('line', (line) => {
  if (line === 'go') counting = true;
  if (line === 'stop') {
    process.stdout.write(`${JSON.stringify(out)}\n`);
    for (const c of clients) c.close();
    setTimeout(() => process.exit(0), 50);
  }
});
