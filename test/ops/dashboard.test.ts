/**
 * The queue dashboard in a real browser: Debian's Chromium driven by playwright-core (no browser
 * download) opens /admin/queues with the admin token (a header, the login prompt, or in the
 * address) and sees the queue "ingest" with its jobs and its translated labels; and, against
 * `oddsfiles start`, the settled jobs of a published and a rejected drop titled by filename and
 * outcome (the rejection marked, with its reason) and their times readable, with a screenshot.
 * Skipped, saying why, only when /usr/bin/chromium is absent (CI installs it).
 */
import { existsSync } from 'node:fs';
import { mkdtemp, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fastify, type FastifyInstance } from 'fastify';
import { Redis } from 'ioredis';
import { chromium, type BrowserContext } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createIngestQueue, type IngestQueue } from '../../src/ingest/queue.js';
import { createMetrics } from '../../src/ops/metrics.js';
import { registerOps } from '../../src/ops/ops-plugin.js';
import { jobData, jobTitle } from '../../src/ops/dashboard-format.js';
import { drop, pendingDrops, tinyDoc } from '../helpers/drops.js';
import { dropPrefix, TEST_REDIS_URL, uniquePrefix } from '../helpers/redis.js';
import { baseEnv, makeDataDir, startOddsfiles, waitFor, type RunningOddsfiles } from '../helpers/service.js';

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const HAVE_CHROMIUM = existsSync(CHROMIUM);
const TOKEN = 'dashboard-test-token-5c1d';

if (!HAVE_CHROMIUM) {
  console.warn(`ops.dashboard: SKIPPED: no Chromium at ${CHROMIUM} (apt-get install -y chromium, or set CHROMIUM_PATH)`);
}

describe.skipIf(!HAVE_CHROMIUM)(`queue dashboard in Chromium (${CHROMIUM})`, () => {
  const prefix = uniquePrefix('ops-dash');
  let connection: Redis;
  let queue: IngestQueue;
  let app: FastifyInstance;
  let url: string;
  let browser: BrowserContext;
  let profile: string;

  beforeAll(async () => {
    connection = new Redis(TEST_REDIS_URL, { maxRetriesPerRequest: null });
    queue = createIngestQueue(connection, prefix);
    await queue.add('drop', { name: 'site_live_northwind_soccer.json', receivedAt: Date.now() });
    await queue.add('drop', { name: 'site_pregame_hillview_tennis.json', receivedAt: Date.now() });
    app = fastify() as unknown as FastifyInstance;
    await registerOps(app, { config: { adminToken: TOKEN }, metrics: createMetrics({ defaultMetrics: false }), queue });
    url = await app.listen({ host: '127.0.0.1', port: 0 });
    profile = await mkdtemp(join(tmpdir(), 'oddsfiles-chromium-'));
    // A new, empty profile (--user-data-dir): playwright passes it for a persistent context.
    browser = await chromium.launchPersistentContext(profile, {
      executablePath: CHROMIUM,
      headless: true,
      args: [
        '--headless',
        '--no-sandbox',
        '--disable-gpu',
        '--disable-quic',
        '--no-first-run',
        '--disable-background-networking',
        '--disable-component-update',
        '--disable-sync',
      ],
      timeout: 60_000,
    });
  }, 90_000);

  afterAll(async () => {
    await browser?.close();
    await app?.close();
    await queue?.close();
    connection?.disconnect();
    await dropPrefix(prefix);
    if (profile) await rm(profile, { recursive: true, force: true });
  });

  it('without the token the browser is refused with the 401 problem (and offered a login)', async () => {
    const page = await browser.newPage();
    const seen: { status: number; type: string | undefined; challenge: string | undefined }[] = [];
    page.on('response', (r) => {
      if (new URL(r.url()).pathname === '/admin/queues')
        seen.push({ status: r.status(), type: r.headers()['content-type'], challenge: r.headers()['www-authenticate'] });
    });
    try {
      // Chromium meets a Basic challenge with no one to type a password: the navigation fails
      // (ERR_INVALID_AUTH_CREDENTIALS) or shows the 401 page, depending on the version.
      const outcome = await page.goto(`${url}/admin/queues`).then(
        (r) => `status ${r?.status()}`,
        (err: Error) => err.message,
      );
      expect(outcome).toMatch(/status 401|ERR_INVALID_AUTH_CREDENTIALS/);
      expect(seen[0]).toMatchObject({ status: 401, type: 'application/problem+json' });
      expect(seen[0]!.challenge).toMatch(/Basic realm="oddsfiles-admin"/);
      await expect(page.getByText('ingest', { exact: true }).count()).resolves.toBe(0);
    } finally {
      await page.close();
    }
  });

  it('with the token (Authorization: Bearer) it shows the queue "ingest" and its waiting jobs', async () => {
    await browser.setExtraHTTPHeaders({ authorization: `Bearer ${TOKEN}` });
    const page = await browser.newPage();
    try {
      const failed: string[] = [];
      page.on('response', (r) => {
        if (r.status() >= 400) failed.push(`${r.status()} ${r.url()}`);
      });
      const t0 = performance.now();
      const res = await page.goto(`${url}/admin/queues`);
      expect(res?.status()).toBe(200);
      // The queue list is rendered by the dashboard's script from its API: wait for it.
      await page.getByText('ingest', { exact: true }).first().waitFor({ timeout: 30_000 });
      const loadMs = Math.round(performance.now() - t0);
      expect(await page.title()).toBe('oddsfiles');

      // Open the queue: its waiting jobs are listed by name.
      await page.goto(`${url}/admin/queues/queue/ingest?status=waiting`);
      await page.getByText('site_live_northwind_soccer.json').first().waitFor({ timeout: 30_000 });
      expect(failed).toEqual([]);
      console.info(`ops.dashboard: dashboard rendered the queue list in ${loadMs} ms`);
    } finally {
      await page.close();
      await browser.setExtraHTTPHeaders({});
    }
  });

  it("through the browser's login prompt (Basic, the token as the password)", async () => {
    await browser.setHTTPCredentials({ username: 'operator', password: TOKEN });
    const page = await browser.newPage();
    try {
      const res = await page.goto(`${url}/admin/queues`);
      expect(res?.status()).toBe(200);
      await page.getByText('ingest', { exact: true }).first().waitFor({ timeout: 30_000 });
    } finally {
      await page.close();
      await browser.setHTTPCredentials(null);
    }
  });

  it('opened with the token in the address (http://operator:TOKEN@host/admin/queues) it loads its labels and the queue', async () => {
    // Browsers refuse fetch() relative to a page address with credentials in it: without the page
    // loading itself again without them, bull-board stayed at "Loading" (or showed raw label keys).
    const page = await browser.newPage();
    try {
      const locales: number[] = [];
      const failed: string[] = [];
      page.on('response', (r) => {
        if (new URL(r.url()).pathname.startsWith('/admin/queues/static/locales/')) locales.push(r.status());
        if (r.status() >= 400) failed.push(`${r.status()} ${r.url()}`);
      });
      const address = new URL('/admin/queues', url);
      address.username = 'operator';
      address.password = TOKEN;
      await page.goto(address.href);
      await page.getByText('ingest', { exact: true }).first().waitFor({ timeout: 30_000 });
      expect(page.url()).toBe(`${url}/admin/queues`);
      expect(locales).toContain(200);
      // A translated label: DASHBOARD.JOBS_COUNT is "{{count}} Jobs".
      await page
        .getByText(/^\d+ Jobs?$/)
        .first()
        .waitFor({ timeout: 30_000 });
      const text = await page.innerText('body');
      expect(text).not.toMatch(/\b[A-Z_]+\.[A-Z_]+\b/);
      expect(failed).toEqual([]);
    } finally {
      await page.close();
    }
  });
});

describe('job titles and data on the dashboard', () => {
  it('titles a job by its filename and outcome, a rejection marked with its reason; times as ISO 8601', () => {
    expect(jobTitle({ name: 'drop', data: { name: 'site_live_a.json', receivedAt: 1 } })).toBe('site_live_a.json');
    expect(jobTitle({ name: 'claim', data: { name: 'site_live_a.json', staged: true }, returnvalue: { outcome: 'published' } })).toBe(
      'site_live_a.json (upload) · published',
    );
    expect(
      jobTitle({ name: 'drop', data: { name: 'site_live_a.json' }, returnvalue: { outcome: 'rejected', reason: 'schema', detail: 'events: must be array' } }),
    ).toBe('✗ REJECTED site_live_a.json · schema: events: must be array');
    expect(
      jobTitle({ name: 'drop', data: { name: 'x.json' }, returnvalue: { outcome: 'rejected', reason: 'too_large', detail: 'z'.repeat(500) } }),
    ).toHaveLength('✗ REJECTED x.json · too_large: '.length + 161);
    expect(jobTitle({ name: 'other', data: 'not an object' })).toBe('other');
    expect(jobData({ name: 'a', receivedAt: Date.UTC(2026, 10, 27, 12, 0, 0) })).toEqual({ name: 'a', receivedAt: '2026-11-27T12:00:00.000Z' });
    expect(jobData({ name: 'a', receivedAt: 'later' })).toEqual({ name: 'a', receivedAt: 'later' });
  });
});

describe.skipIf(!HAVE_CHROMIUM)('queue dashboard of a running service in Chromium', () => {
  const prefix = uniquePrefix('ops-dash-e2e');
  const GOOD = 'site_live_northwind_soccer.json';
  const BAD = 'site_live_bluewater_soccer.json';
  let svc: RunningOddsfiles;
  let browser: BrowserContext;
  let profile: string;

  beforeAll(async () => {
    const dataDir = await makeDataDir('ops-dash-e2e');
    svc = await startOddsfiles(baseEnv(dataDir, prefix, { ADMIN_TOKEN: TOKEN }));
    const inbox = join(dataDir, 'inbox');
    await drop(inbox, GOOD, tinyDoc('northwind', 'soccer', new Date().toISOString()));
    await drop(inbox, BAD, '[1,2]');
    await waitFor(async () => (await pendingDrops(inbox)).length === 0, 30_000, 'both drops settled');
    await svc.waitForLog((l) => l.msg === 'rejected' || l.outcome === 'rejected');
    profile = await mkdtemp(join(tmpdir(), 'oddsfiles-chromium-'));
    browser = await chromium.launchPersistentContext(profile, {
      executablePath: CHROMIUM,
      headless: true,
      args: [
        '--headless',
        '--no-sandbox',
        '--disable-gpu',
        '--no-first-run',
        '--disable-background-networking',
        '--disable-component-update',
        '--disable-sync',
      ],
      timeout: 60_000,
    });
  }, 90_000);

  afterAll(async () => {
    await browser?.close();
    await svc?.stop();
    await dropPrefix(prefix);
    if (profile) await rm(profile, { recursive: true, force: true });
  });

  it('lists the completed jobs by filename and outcome, the rejection marked with its reason, and shows readable times', async () => {
    await browser.setExtraHTTPHeaders({ authorization: `Bearer ${TOKEN}` });
    const page = await browser.newPage();
    await page.setViewportSize({ width: 1280, height: 900 });
    try {
      await page.goto(`${svc.url}/admin/queues/queue/ingest?status=completed`);
      await page.getByText(`✗ REJECTED ${BAD} · not_an_object: the top level is an array`).first().waitFor({ timeout: 30_000 });
      await page.getByText(`${GOOD} · published`).first().waitFor({ timeout: 30_000 });
      const body = await page.innerText('body');
      // No job is titled by its kind alone any more.
      expect(body).not.toMatch(/^(drop|claim)$/m);
      // DASHBOARD_SCREENSHOT=<file.png> keeps it; otherwise it goes with the browser profile.
      const shot = process.env.DASHBOARD_SCREENSHOT ?? join(profile, 'dashboard-completed.png');
      await page.screenshot({ path: shot, fullPage: true });
      expect((await stat(shot)).size).toBeGreaterThan(10_000);
      console.info(`ops.dashboard: screenshot of the completed jobs at ${shot}`);
      // The jobs' data (shown open): receivedAt as an ISO time, not milliseconds since the epoch.
      expect(body).toMatch(/receivedAt"?:\s*"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z"/);
      expect(body).not.toMatch(/receivedAt"?:\s*\d{13}/);
    } finally {
      await page.close();
      await browser.setExtraHTTPHeaders({});
    }
  });
});
