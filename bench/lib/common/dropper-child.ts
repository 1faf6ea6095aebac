/**
 * The child process of bench/lib/common/dropper.ts (never run by hand): drops new versions of a list of
 * feeds into an inbox at a fixed rate, each written under a dot-name and renamed into place,
 * round-robin over the feeds.
 *
 * Messages in: {cmd:'start', inbox, rate} | {cmd:'stop'}. Out: {ready} | {stopped, sent, ms}.
 */
import { randomBytes } from 'node:crypto';
import { rename, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { FixtureFeed } from '../../../test/fixtures/corpus.js';
import { docTemplate, version, type DocTemplate } from './drops.js';
import { nowMs } from './stats.js';

interface Init {
  feeds: FixtureFeed[];
  bytes: number;
}

type Msg = { cmd: 'start'; inbox: string; rate: number } | { cmd: 'stop' };

const init = JSON.parse(process.env.DROPPER ?? '{}') as Init;
const templates: DocTemplate[] = init.feeds.map((f) => docTemplate(f, init.bytes));
let running: Promise<void> | undefined;
let stop = false;
let next = 0;

async function loop(inbox: string, rate: number): Promise<{ sent: number; ms: number }> {
  const t0 = nowMs();
  let sent = 0;
  while (!stop) {
    const due = Math.floor(((nowMs() - t0) * rate) / 1000) - sent;
    for (let i = 0; i < due && !stop; i++) {
      const t = templates[next++ % templates.length]!;
      const v = version(t);
      const tmp = join(inbox, `.bg-${randomBytes(4).toString('hex')}.tmp`);
      await writeFile(tmp, v.bytes);
      await rename(tmp, join(inbox, t.feed.filename));
      sent++;
    }
    await sleep(2);
  }
  return { sent, ms: nowMs() - t0 };
}

process.on('message', (m: Msg) => {
  if (m.cmd === 'start' && !running) {
    stop = false;
    running = loop(m.inbox, m.rate).then((r) => {
      running = undefined;
      process.send!({ stopped: true, ...r });
    });
  } else if (m.cmd === 'stop') {
    stop = true;
  }
});
process.on('disconnect', () => process.exit(0));
process.send!({ ready: true });
