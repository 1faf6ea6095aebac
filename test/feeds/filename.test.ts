/**
 * Feed filenames: the registry derives exactly the valid names (`split`: site_live_<key>_<sport>.json
 * and site_pregame_<key>_<sport>.json; `combined-live`: those plus site_live_<key>.json; `livepre`:
 * site_livepre_<key>.json only), parseFilename says what each names and nothing else, and
 * feedKindOf tells the kind from the name.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig, type Bookmaker, type Config } from '../../src/config.js';
import { FEED_KINDS, feedKindOf } from '../../src/feeds/kind.js';
import { buildRegistry, parseFilename, type FeedRegistry } from '../../src/feeds/registry.js';
import { EXAMPLE_BOOKMAKERS, EXAMPLE_FEEDS, EXAMPLE_FILENAMES } from '../fixtures/corpus.js';

let dir: string;
let config: Config;
let registry: FeedRegistry;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'oddsfiles-filename-'));
  config = loadConfig({ env: {}, cwd: dir });
  registry = buildRegistry(config.bookmakers, config.sports);
});

afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('the example registry (embedded defaults)', () => {
  it('has the 38 filenames of the hand-written table, no more, no fewer', () => {
    expect(EXAMPLE_FILENAMES).toHaveLength(38);
    expect(new Set(EXAMPLE_FILENAMES).size).toBe(38);
    expect(registry.filenames).toEqual([...EXAMPLE_FILENAMES].sort());
    expect(registry.feeds.size).toBe(38);
  });

  it('lists its filenames sorted', () => {
    expect([...registry.filenames]).toEqual([...registry.filenames].sort());
  });

  it('knows the seven bookmakers with their public names', () => {
    expect([...registry.bookmakers.values()].map((b) => ({ key: b.key, name: b.name, feeds: b.feeds }))).toEqual(EXAMPLE_BOOKMAKERS.map((b) => ({ ...b })));
    expect(registry.bookmakers.get('hillview')?.name).toBe('StarBet');
  });

  it.each(EXAMPLE_FEEDS.map((f) => [f.filename, f] as const))('%s', (filename, feed) => {
    const info = parseFilename(registry, filename);
    expect(info).toEqual({ filename, bookmaker: feed.bookmaker, kind: feed.kind, sport: feed.sport });
  });

  it('gives each family its filenames', () => {
    const of = (key: string) => registry.filenames.filter((f) => parseFilename(registry, f)?.bookmaker === key);
    for (const key of ['northwind', 'bluewater', 'redstone', 'goldcrest', 'hillview']) {
      expect(of(key)).toHaveLength(6);
      expect(of(key).every((f) => /^site_(live|pregame)_[a-z]+_(soccer|basketball|tennis)\.json$/.test(f))).toBe(true);
    }
    expect(of('silverline')).toHaveLength(7);
    expect(of('silverline')).toContain('site_live_silverline.json');
    expect(of('oddsport')).toEqual(['site_livepre_oddsport.json']);
  });

  it("tells each feed's kind from its filename alone, as the hand-written table says", () => {
    for (const f of EXAMPLE_FEEDS) expect(feedKindOf(f.filename), f.filename).toBe(f.kind);
    expect(new Set(EXAMPLE_FEEDS.map((f) => f.kind))).toEqual(new Set(FEED_KINDS));
    for (const name of ['site_inplay_northwind_soccer.json', 'site_LIVE_northwind_soccer.json', 'live_northwind.json', 'site_live', ''])
      expect(feedKindOf(name), name).toBeUndefined();
  });
});

describe('names that are not feed filenames', () => {
  const invalid: [string, string][] = [
    // the corpus's unknown_filename cases
    ['odds.json', 'not a feed name'],
    ['SITE_LIVE_NORTHWIND_SOCCER.json', 'upper case'],
    ['site_live_nobody_soccer.json', 'unknown bookmaker'],
    ['site_live_northwind_cricket.json', 'unknown sport'],
    ['site_livepre_northwind.json', 'wrong family for a split bookmaker'],
    // more of the same kind
    ['Site_live_northwind_soccer.json', 'case matters anywhere'],
    ['site_live_northwind_Soccer.json', 'case matters in the sport'],
    ['site_live_northwind_soccer.JSON', 'case matters in the extension'],
    ['site_live_starbet_soccer.json', 'public name instead of the company key'],
    ['site_live_northwind.json', 'combined live file of a split bookmaker'],
    ['site_pregame_silverline.json', 'no combined pregame file'],
    ['site_livepre_silverline.json', 'combined-live bookmaker has no livepre file'],
    ['site_live_oddsport.json', 'livepre bookmaker has no live file'],
    ['site_live_oddsport_soccer.json', 'livepre bookmaker has no per-sport files'],
    ['site_pregame_oddsport_tennis.json', 'livepre bookmaker has no per-sport files'],
    ['site_inplay_northwind_soccer.json', 'unknown kind'],
    ['site_live_northwind_soccer_soccer.json', 'sport twice'],
    ['site__live_northwind_soccer.json', 'doubled separator'],
    ['site-live-northwind-soccer.json', 'wrong separator'],
    ['site_live_northwind_soccer', 'no extension'],
    ['site_live_northwind_soccer.json.json', 'extension twice'],
    ['site_live_northwind_soccer.yaml', 'other extension'],
    // path traversal and folders
    ['../site_live_northwind_soccer.json', 'parent folder'],
    ['../../etc/passwd', 'path traversal'],
    ['inbox/site_live_northwind_soccer.json', 'sub folder'],
    ['/site_live_northwind_soccer.json', 'absolute path'],
    ['./site_live_northwind_soccer.json', 'relative path'],
    ['..\\site_live_northwind_soccer.json', 'windows traversal'],
    ['site_live_northwind_soccer.json/', 'trailing slash'],
    ['%2e%2e%2fsite_live_northwind_soccer.json', 'URL-encoded traversal'],
    ['site_live_northwind%5Fsoccer.json', 'URL-encoded underscore'],
    // white space and temporary names
    ['site_live_northwind_soccer.json ', 'trailing space'],
    [' site_live_northwind_soccer.json', 'leading space'],
    ['site_live_northwind_soccer.json\n', 'trailing newline'],
    ['site_live_northwind_soccer.json\t', 'trailing tab'],
    ['site_live_northwind_soccer.json.tmp', 'temporary name (.tmp)'],
    ['site_live_northwind_soccer.json.part', 'partial name (.part)'],
    ['.site_live_northwind_soccer.json', 'hidden name'],
    ['site_live_northwind_soccer.json~', 'editor backup'],
    ['', 'empty'],
    ['.json', 'extension only'],
    ['.', 'dot'],
    ['..', 'dot dot'],
    // unicode lookalikes and invisible characters
    ['site_live_n\u043erthwind_soccer.json', 'Cyrillic o'],
    ['site_live_northwind_s\u043eccer.json', 'Cyrillic o in the sport'],
    ['site_live_northwind_soccer.js\u03bfn', 'Greek omicron'],
    ['site\uff3flive_northwind_soccer.json', 'fullwidth low line'],
    ['site_live_northwind_soccer\uff0ejson', 'fullwidth full stop'],
    ['site_live_northwind_soccer.json\u200b', 'zero-width space'],
    ['\ufeffsite_live_northwind_soccer.json', 'byte order mark'],
    ['site_live_northwind_soccer.json\u0000', 'NUL'],
    ['site_live_northwi\u0301nd_soccer.json', 'combining accent'],
    ['\uff53ite_live_northwind_soccer.json', 'fullwidth s'],
    // names that are special to JavaScript objects
    ['__proto__', 'prototype key'],
    ['constructor', 'constructor'],
    ['hasOwnProperty', 'object method'],
    ['toString', 'object method'],
  ];

  it.each(invalid)('%j (%s) is rejected', (name) => {
    expect(parseFilename(registry, name)).toBeUndefined();
    expect(registry.feeds.has(name)).toBe(false);
  });
});

describe('a registry built from another bookmaker list', () => {
  const bookmakers: Bookmaker[] = [
    { key: 'acme', name: 'ACME Bets', feeds: 'split' },
    { key: 'zeta-bet', name: 'Zeta', feeds: 'combined-live' },
    { key: 'omega', name: 'Omega', feeds: 'livepre' },
  ];
  const sports = ['soccer', 'ice-hockey'];

  it('derives exactly the names of each family for the given sports', () => {
    const r = buildRegistry(bookmakers, sports);
    expect(r.filenames).toEqual(
      [
        'site_live_acme_soccer.json',
        'site_pregame_acme_soccer.json',
        'site_live_acme_ice-hockey.json',
        'site_pregame_acme_ice-hockey.json',
        'site_live_zeta-bet.json',
        'site_live_zeta-bet_soccer.json',
        'site_pregame_zeta-bet_soccer.json',
        'site_live_zeta-bet_ice-hockey.json',
        'site_pregame_zeta-bet_ice-hockey.json',
        'site_livepre_omega.json',
      ].sort(),
    );
    expect(parseFilename(r, 'site_live_acme_ice-hockey.json')).toEqual({
      filename: 'site_live_acme_ice-hockey.json',
      bookmaker: 'acme',
      kind: 'live',
      sport: 'ice-hockey',
    });
    expect(parseFilename(r, 'site_live_zeta-bet.json')).toEqual({
      filename: 'site_live_zeta-bet.json',
      bookmaker: 'zeta-bet',
      kind: 'live',
      sport: null,
    });
    expect(parseFilename(r, 'site_livepre_omega.json')).toEqual({
      filename: 'site_livepre_omega.json',
      bookmaker: 'omega',
      kind: 'livepre',
      sport: null,
    });
    expect(r.bookmakers.get('acme')?.name).toBe('ACME Bets');
  });

  it('knows none of the example names', () => {
    const r = buildRegistry(bookmakers, sports);
    for (const name of EXAMPLE_FILENAMES) expect(parseFilename(r, name)).toBeUndefined();
    expect(parseFilename(r, 'site_live_acme_tennis.json')).toBeUndefined();
  });

  it('is a pure function of its input', () => {
    const a = buildRegistry(bookmakers, sports);
    const b = buildRegistry([...bookmakers].reverse(), [...sports].reverse());
    expect(a.filenames).toEqual(b.filenames);
    expect(Object.isFrozen(a.filenames)).toBe(true);
    expect(Object.isFrozen(parseFilename(a, 'site_livepre_omega.json'))).toBe(true);
  });

  it('with no sports, has only the combined files', () => {
    expect(buildRegistry(bookmakers, []).filenames).toEqual(['site_live_zeta-bet.json', 'site_livepre_omega.json']);
  });

  it('comes from the config file when it lists bookmakers and sports', async () => {
    const cwd = await mkdtemp(join(tmpdir(), 'oddsfiles-filename-cfg-'));
    try {
      await writeFile(
        join(cwd, 'oddsfiles.yaml'),
        ['bookmakers:', '  - { key: acme, name: ACME Bets, feeds: split }', '  - { key: omega, name: Omega, feeds: livepre }', 'sports: [darts]', ''].join(
          '\n',
        ),
      );
      const c = loadConfig({ env: {}, cwd });
      const r = buildRegistry(c.bookmakers, c.sports);
      expect(r.filenames).toEqual(['site_live_acme_darts.json', 'site_livepre_omega.json', 'site_pregame_acme_darts.json']);
      expect(parseFilename(r, 'site_live_northwind_soccer.json')).toBeUndefined();
    } finally {
      await rm(cwd, { recursive: true, force: true });
    }
  });
});
