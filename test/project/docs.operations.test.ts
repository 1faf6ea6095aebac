/**
 * The operator documents stay true to the code: every metric the alert rules and the Grafana
 * dashboard query is one the service exports, every alert has its runbook section, every metric,
 * environment variable and config default is in docs/operations.md, and (when Prometheus'
 * promtool is installed) the rules and the dashboard's queries parse and the main alerts fire on
 * the series they are meant for.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse } from 'yaml';
import { describe, expect, it } from 'vitest';
import { DEFAULT_FILE_CONFIG } from '../../src/config.js';
import { createMetrics } from '../../src/ops/metrics.js';

const ROOT = resolve(fileURLToPath(import.meta.url), '../../..');
const read = (p: string) => readFile(join(ROOT, p), 'utf8');

interface Rule {
  alert: string;
  expr: string;
  for?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
}

const PROMTOOL = (() => {
  const r = spawnSync('promtool', ['--version'], { encoding: 'utf8' });
  return r.status === 0 ? 'promtool' : undefined;
})();

/** Names of series an expression reads (metric names followed by {, [, space, ) or end). */
function metricNames(expr: string): string[] {
  return [...new Set([...expr.matchAll(/\b(oddsfiles_[a-z0-9_]+)/g)].map((m) => m[1]!))];
}

async function exportedNames(): Promise<Set<string>> {
  const metrics = createMetrics();
  const names = new Set<string>();
  for (const m of await metrics.registry.getMetricsAsJSON()) {
    names.add(m.name);
    if (String(m.type) === 'histogram') for (const s of ['_bucket', '_sum', '_count']) names.add(m.name + s);
  }
  return names;
}

async function dashboardExprs(): Promise<string[]> {
  const dash = JSON.parse(await read('docs/grafana-dashboard.json')) as {
    panels: { targets?: { expr: string }[] }[];
    templating: { list: { definition?: string }[] };
  };
  return [...dash.panels.flatMap((p) => (p.targets ?? []).map((t) => t.expr)), ...dash.templating.list.flatMap((v) => (v.definition ? [v.definition] : []))];
}

describe('operator documents', () => {
  it('the alert rules query only metrics the service exports, and each has a runbook section', async () => {
    const doc = parse(await read('docs/prometheus-alerts.yml')) as { groups: { name: string; rules: Rule[] }[] };
    const rules = doc.groups.flatMap((g) => g.rules);
    expect(rules.length).toBeGreaterThanOrEqual(10);
    const names = await exportedNames();
    const ops = await read('docs/operations.md');
    for (const rule of rules) {
      for (const n of metricNames(rule.expr)) expect(names.has(n), `${rule.alert}: ${n}`).toBe(true);
      expect(rule.labels?.severity, rule.alert).toMatch(/^(critical|warning|info)$/);
      expect(rule.annotations?.runbook).toBe(`docs/operations.md#${rule.alert.toLowerCase()}`);
      expect(ops, `runbook section for ${rule.alert}`).toContain(`### ${rule.alert}`);
    }
    // The four things the issue asks to alert on.
    const alerts = rules.map((r) => r.alert);
    expect(alerts).toEqual(
      expect.arrayContaining(['OddsfilesFeedStale', 'OddsfilesRejectionRateHigh', 'OddsfilesQueueBacklogGrowing', 'OddsfilesRedisDown', 'OddsfilesStoreDown']),
    );
  });

  it('the Grafana dashboard is valid JSON, linked from operations.md (not copied), and queries only exported metrics', async () => {
    const text = await read('docs/grafana-dashboard.json');
    const dash = JSON.parse(text) as { uid: string; panels: { id: number; type: string; gridPos: object; datasource?: { uid: string } }[] };
    expect(dash.uid).toBe('oddsfiles-ops');
    const ids = dash.panels.map((p) => p.id);
    expect(new Set(ids).size).toBe(ids.length);
    for (const p of dash.panels) {
      expect(p.gridPos).toBeDefined();
      if (p.type !== 'row') expect(p.datasource?.uid).toBe('${datasource}');
    }
    const names = await exportedNames();
    const exprs = await dashboardExprs();
    expect(exprs.length).toBeGreaterThan(20);
    for (const e of exprs) for (const n of metricNames(e)) expect(names.has(n), `${n} in ${e}`).toBe(true);
    // operations.md links the file; a copy in the page would drift from it.
    const ops = await read('docs/operations.md');
    expect(ops).toContain('](grafana-dashboard.json)');
    expect(ops).not.toContain('"__inputs"');
    expect(ops).not.toContain(`"uid": "${dash.uid}"`);
  });

  it('operations.md describes every metric the service exports', async () => {
    const ops = await read('docs/operations.md');
    const metrics = createMetrics();
    const names = (await metrics.registry.getMetricsAsJSON()).map((m) => m.name).filter((n) => !/^oddsfiles_(process|nodejs)_/.test(n));
    expect(names.length).toBeGreaterThanOrEqual(15);
    for (const n of names) expect(ops, n).toContain(`\`${n}\``);
    expect(ops).toContain('`oddsfiles_process_*`, `oddsfiles_nodejs_*`');
  });

  it("operations.md's config file is the embedded defaults, whole", async () => {
    const ops = await read('docs/operations.md');
    const section = ops.slice(ops.indexOf('### The config file'));
    const block = /```yaml\n([\s\S]*?)```/.exec(section)?.[1];
    expect(block, 'the YAML block under "The config file"').toBeDefined();
    expect(parse(block!)).toEqual(DEFAULT_FILE_CONFIG);
  });

  describe.skipIf(!PROMTOOL)('with promtool', () => {
    it('promtool checks the rules and every dashboard query', async () => {
      const dir = await mkdtemp(join(tmpdir(), 'oddsfiles-promtool-'));
      try {
        execFileSync('promtool', ['check', 'rules', join(ROOT, 'docs/prometheus-alerts.yml')], { encoding: 'utf8' });
        // The dashboard's queries as recording rules, with Grafana's variables filled in.
        const exprs = (await dashboardExprs()).filter((e) => !e.startsWith('label_values('));
        const rules = exprs.map(
          (e, i) => `      - record: dashboard:q${i}\n        expr: ${JSON.stringify(e.replaceAll('$__rate_interval', '5m').replaceAll('$bookmaker', '.*'))}`,
        );
        await writeFile(join(dir, 'dashboard.yml'), `groups:\n  - name: dashboard\n    rules:\n${rules.join('\n')}\n`);
        execFileSync('promtool', ['check', 'rules', join(dir, 'dashboard.yml')], { encoding: 'utf8' });
      } finally {
        await rm(dir, { recursive: true, force: true });
      }
    });

    it('the main alerts fire on the series they are meant for, and only on those', async () => {
      const dir = await mkdtemp(join(tmpdir(), 'oddsfiles-promtool-'));
      try {
        await writeFile(join(dir, 'alerts.test.yml'), PROMTOOL_TESTS.replace('RULES', join(ROOT, 'docs/prometheus-alerts.yml')));
        const r = spawnSync('promtool', ['test', 'rules', join(dir, 'alerts.test.yml')], { encoding: 'utf8' });
        expect(r.stdout + r.stderr).toContain('SUCCESS');
        expect(r.status).toBe(0);
      } finally {
        await rm(dir, { recursive: true, force: true });
      }
    });
  });
});

// Two readers (r1, r2) report the same shared state; alerts must fire once, not per process.
const PROMTOOL_TESTS = `
rule_files: [RULES]
evaluation_interval: 1m
tests:
  - interval: 1m
    input_series:
      - series: 'oddsfiles_feed_age_seconds{filename="site_live_northwind_soccer.json",bookmaker="northwind",kind="live",instance="r1"}'
        values: '10+15x20'
      - series: 'oddsfiles_feed_age_seconds{filename="site_live_northwind_soccer.json",bookmaker="northwind",kind="live",instance="r2"}'
        values: '10+15x20'
      - series: 'oddsfiles_feed_age_seconds{filename="site_pregame_redstone_soccer.json",bookmaker="redstone",kind="pregame",instance="r1"}'
        values: '100+15x20'
      - series: 'oddsfiles_feed_stale_after_seconds{kind="live",instance="r1"}'
        values: '30x20'
      - series: 'oddsfiles_feed_stale_after_seconds{kind="pregame",instance="r1"}'
        values: '900x20'
      - series: 'oddsfiles_feed_stale_after_seconds{kind="live",instance="r2"}'
        values: '30x20'
      - series: 'oddsfiles_feed_stale_after_seconds{kind="pregame",instance="r2"}'
        values: '900x20'
    alert_rule_test:
      - eval_time: 1m
        alertname: OddsfilesFeedStale
        exp_alerts: []
      - eval_time: 6m
        alertname: OddsfilesFeedStale
        exp_alerts:
          - exp_labels: { severity: warning, filename: site_live_northwind_soccer.json, bookmaker: northwind, kind: live }
            exp_annotations:
              summary: "Feed site_live_northwind_soccer.json is stale"
              description: "site_live_northwind_soccer.json (northwind, live) was generated 1m 40s ago, beyond its stale_after threshold."
              runbook: docs/operations.md#oddsfilesfeedstale

  - interval: 1m
    input_series:
      - series: 'oddsfiles_drops_total{outcome="published",instance="w1"}'
        values: '0+60x40'
      - series: 'oddsfiles_drops_total{outcome="rejected",instance="w1"}'
        values: '0x10 0+12x30'
      - series: 'oddsfiles_drops_total{outcome="rejected",instance="w2"}'
        values: '0x40'
    alert_rule_test:
      - eval_time: 9m
        alertname: OddsfilesRejectionRateHigh
        exp_alerts: []
      - eval_time: 30m
        alertname: OddsfilesRejectionRateHigh
        exp_alerts:
          - exp_labels: { severity: warning }
            exp_annotations:
              summary: "16.67% of the drops are rejected"
              description: "The share of rejected drops is above 5% over 15 minutes. \`oddsfiles status\` and \`oddsfiles rejected list\` show which files and why."
              runbook: docs/operations.md#oddsfilesrejectionratehigh

  - interval: 1m
    input_series:
      - series: 'oddsfiles_queue_jobs{queue="ingest",state="waiting",instance="r1"}'
        values: '0+10x40'
      - series: 'oddsfiles_queue_jobs{queue="ingest",state="waiting",instance="w1"}'
        values: '0+10x40'
      - series: 'oddsfiles_queue_jobs{queue="ingest",state="delayed",instance="r1"}'
        values: '0x40'
      - series: 'oddsfiles_queue_workers{queue="ingest",instance="r1"}'
        values: '2x40'
    alert_rule_test:
      - eval_time: 4m
        alertname: OddsfilesQueueBacklogGrowing
        exp_alerts: []
      - eval_time: 30m
        alertname: OddsfilesQueueBacklogGrowing
        exp_alerts:
          - exp_labels: { severity: warning, queue: ingest }
            exp_annotations:
              summary: "The ingest queue backlog is growing (300 waiting)"
              description: "More than 50 drops wait and the number keeps rising: workers are too few, too slow, or stuck."
              runbook: docs/operations.md#oddsfilesqueuebackloggrowing
      - eval_time: 30m
        alertname: OddsfilesNoWorkers
        exp_alerts: []

  - interval: 1m
    input_series:
      - series: 'oddsfiles_queue_jobs{queue="ingest",state="waiting",instance="r1"}'
        values: '3x10'
      - series: 'oddsfiles_queue_workers{queue="ingest",instance="r1"}'
        values: '1 1 0x8'
      - series: 'oddsfiles_dependency_up{dependency="redis",instance="w1"}'
        values: '1 1 0x8'
      - series: 'oddsfiles_dependency_up{dependency="store",instance="w1"}'
        values: '1x10'
    alert_rule_test:
      - eval_time: 9m
        alertname: OddsfilesNoWorkers
        exp_alerts:
          - exp_labels: { severity: critical, queue: ingest }
            exp_annotations:
              summary: "No worker is processing the ingest queue"
              description: "Drops are queued and no BullMQ worker is connected: nothing will be published."
              runbook: docs/operations.md#oddsfilesnoworkers
      - eval_time: 5m
        alertname: OddsfilesRedisDown
        exp_alerts:
          - exp_labels: { severity: critical, instance: w1 }
            exp_annotations:
              summary: "Redis does not answer w1"
              description: "No queue, no publishing, no key changes, no rate limits shared across readers while Redis is away. Readers keep serving what they hold."
              runbook: docs/operations.md#oddsfilesredisdown
      - eval_time: 9m
        alertname: OddsfilesStoreDown
        exp_alerts: []
`;
