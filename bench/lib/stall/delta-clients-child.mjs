// The delta clients of bench/stall.ts (a), in a process of their own so that their work does not
// delay the steady client the bench measures. Argument: JSON { url, key, name, etags, clients,
// seconds }: each client asks `name` with `A-IM: json-patch` and one of `etags` in rotation, as
// fast as answers come, for `seconds`; then prints the statuses counted as one JSON line.
import { Agent, request } from 'node:http';

const { url, key, name, etags, clients, seconds } = JSON.parse(process.argv[2]);
const agent = new Agent({ keepAlive: true, maxSockets: clients });
const counts = {};
const get = (etag) =>
  new Promise((resolve, reject) => {
    const headers = { 'x-api-key': key, 'a-im': 'json-patch', 'if-none-match': etag, 'accept-encoding': 'gzip' };
    const req = request(`${url}/v1/data/${name}`, { agent, headers }, (res) => {
      res.on('data', () => undefined);
      res.on('end', () => resolve(res.statusCode));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end();
  });
const end = Date.now() + seconds * 1000;
await Promise.all(
  Array.from({ length: clients }, async (_, c) => {
    for (let r = c; Date.now() < end; r++) {
      const status = await get(etags[r % etags.length]);
      counts[status] = (counts[status] ?? 0) + 1;
    }
  }),
);
agent.destroy();
process.stdout.write(`${JSON.stringify(counts)}\n`);
