/**
 * Command-line options of a bench, parsed with Node's util.parseArgs. Each option carries its
 * description, so `--help` prints them all; `--quick` (every bench has it) swaps in small values
 * for a smoke run that proves the bench works end to end (its figures mean nothing).
 */
import { basename } from 'node:path';
import { parseArgs } from 'node:util';

interface Described {
  readonly description: string;
}

export type OptionSpec =
  | (Described & { readonly type: 'number'; readonly default?: number; readonly quick?: number })
  | (Described & { readonly type: 'string'; readonly default?: string; readonly quick?: string; readonly choices?: readonly string[] })
  /** Repeatable: `--env A=1 --env B=2`. */
  | (Described & { readonly type: 'strings' })
  | (Described & { readonly type: 'boolean' });

type ValueOf<S> = S extends { type: 'number' }
  ? S extends { default: number }
    ? number
    : number | undefined
  : S extends { type: 'string' }
    ? S extends { default: string }
      ? string
      : string | undefined
    : S extends { type: 'strings' }
      ? string[]
      : boolean;

export type BenchArgs<O> = { readonly [K in keyof O]: ValueOf<O[K]> } & {
  readonly quick: boolean;
  /** The arguments as given (for the report's "Run:" line). */
  readonly argv: readonly string[];
};

const BUILT_IN: Record<string, OptionSpec> = {
  quick: { type: 'boolean', description: 'a smoke run: few samples, short loads, nothing written to docs/ (the figures mean nothing)' },
  help: { type: 'boolean', description: 'print this help and exit' },
};

/**
 * Parse process.argv for a bench. `--help` prints the summary and the options and exits 0; an
 * unknown option or a bad value prints the error and exits 2, before anything is started.
 */
export function benchArgs<const O extends Record<string, OptionSpec>>(
  summary: string,
  options: O,
  argv: readonly string[] = process.argv.slice(2),
): BenchArgs<O> {
  const all: Record<string, OptionSpec> = { ...options, ...BUILT_IN };
  const script = `bench/${basename(process.argv[1] ?? 'bench.ts')}`;
  const fail = (msg: string): never => {
    process.stderr.write(`${script}: ${msg}\n(see npx tsx ${script} --help)\n`);
    process.exit(2);
  };
  let values: Record<string, string | boolean | (string | boolean)[] | undefined>;
  try {
    const config = Object.fromEntries(
      Object.entries(all).map(([name, s]) => [
        name,
        s.type === 'boolean' ? { type: 'boolean' as const } : { type: 'string' as const, multiple: s.type === 'strings' },
      ]),
    );
    values = parseArgs({ args: [...argv], options: config, strict: true, allowPositionals: false }).values;
  } catch (err) {
    return fail((err as Error).message);
  }
  if (values.help) {
    process.stdout.write(`${summary}\n\nUsage: npx tsx ${script} [options]\n\n${helpLines(all).join('\n')}\n`);
    process.exit(0);
  }
  const quick = values.quick === true;
  const out: Record<string, unknown> = { quick, argv };
  for (const [name, s] of Object.entries(options)) {
    const given = values[name];
    if (s.type === 'boolean') out[name] = given === true;
    else if (s.type === 'strings') out[name] = (given as string[] | undefined) ?? [];
    else {
      const raw = (given as string | undefined) ?? (quick && s.quick !== undefined ? s.quick : s.default);
      if (raw === undefined) out[name] = undefined;
      else if (s.type === 'number') {
        const n = Number(raw);
        if (String(raw).trim() === '' || !Number.isFinite(n)) fail(`--${name} takes a number, not "${raw}"`);
        out[name] = n;
      } else {
        if (s.choices && !s.choices.includes(String(raw))) fail(`--${name} takes ${s.choices.join(' | ')}, not "${raw}"`);
        out[name] = String(raw);
      }
    }
  }
  return out as BenchArgs<O>;
}

function helpLines(all: Record<string, OptionSpec>): string[] {
  const left = Object.entries(all).map(([name, s]) => {
    const value = s.type === 'number' ? ' N' : s.type === 'string' ? ` ${s.choices?.join('|') ?? 'VALUE'}` : s.type === 'strings' ? ' VALUE' : '';
    return `  --${name}${value}`;
  });
  const width = Math.max(...left.map((l) => l.length)) + 2;
  return Object.values(all).map((s, i) => {
    const notes = [
      ...(s.type === 'strings' ? ['repeatable'] : []),
      ...((s.type === 'number' || s.type === 'string') && s.default !== undefined ? [`default ${s.default}`] : []),
      ...((s.type === 'number' || s.type === 'string') && s.quick !== undefined ? [`--quick: ${s.quick}`] : []),
    ];
    return `${left[i]!.padEnd(width)}${s.description}${notes.length ? ` (${notes.join('; ')})` : ''}`;
  });
}

/** `NAME=VALUE` strings (from a repeatable option such as `--env`) as an environment. */
export function envOf(pairs: readonly string[], option = 'env'): Record<string, string> {
  return Object.fromEntries(
    pairs.map((p) => {
      const i = p.indexOf('=');
      if (i <= 0) throw new Error(`--${option} takes NAME=VALUE, not "${p}"`);
      return [p.slice(0, i), p.slice(i + 1)];
    }),
  );
}

/** The command line as the report quotes it. */
export function commandLine(args: { readonly argv: readonly string[] }): string {
  return `npx tsx bench/${basename(process.argv[1] ?? 'bench.ts')}${args.argv.length ? ` ${args.argv.join(' ')}` : ''}`;
}
