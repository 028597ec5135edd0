/**
 * `cfgu token create`: make a new random bearer token for the proxy and print it once, followed by the `.configu`
 * entry (its SHA-256, the stores and set patterns it may read) to paste under `interface.proxy.auth.credentials`.
 * Nothing is written anywhere: the token exists only in this output, the server only ever sees its hash.
 */
import { createHash, randomBytes } from 'node:crypto';
import YAML from 'yaml';
import { resolveSettings } from '../../server/process/resolve-settings.js';
import { GLOBAL_HELP, list, parseCommandLine, rejectPositionals, str } from '../args.js';
import { EXIT_OK, EXIT_USAGE, flagError } from '../errors.js';
import { processIO, type CommandIO } from '../io.js';
import { runCommand } from '../session.js';

export const tokenUsage = `Usage: cfgu token create --name NAME --store STORE... --set PATTERN... [--label LABEL]... [--key KEY]... [--metrics]

Create a scoped bearer token for the proxy. The token is printed once, with the entry to paste
under interface.proxy.auth.credentials in .configu; the entry holds the token's SHA-256, never
the token, so the file can be shared and versioned.

Options:
  --name NAME        the credential's name (the audit log's subject): letters, digits, ._:@-
  --store STORE      a store the token may name; repeatable; * for every store
  --set PATTERN      a set path pattern the token may read; repeatable: staging (that set only),
                     staging/** (staging and everything below), */eu (one segment, then eu),
                     "" or / (the root set, only when named)
  --label LABEL      only keys with this label (or named by --key); repeatable
  --key KEY          only these keys (* matches any run of characters); repeatable
  --metrics          may also read GET /metrics (which names every store) when no metrics key is set

${GLOBAL_HELP}

Example:
  cfgu token create --name ci-staging --store main --set 'staging/**'`;

const OPTIONS = {
  name: { type: 'string' },
  store: { type: 'string', multiple: true },
  set: { type: 'string', multiple: true },
  label: { type: 'string', multiple: true },
  key: { type: 'string', multiple: true },
  metrics: { type: 'boolean' },
} as const;

/** A new token: a prefix that says what it is (and lets secret scanners find it), then 256 random bits. */
export const newToken = (): string => `cfgu_${randomBytes(32).toString('base64url')}`;

export function tokenCommand(argv: string[], io: CommandIO = processIO()): Promise<number> {
  return runCommand('token', argv, async (session) => {
    const [action, ...rest] = argv;
    if (action === undefined || action === '--help' || action === '-h') {
      session.io.stdout.write(`${tokenUsage}\n`);
      return action === undefined ? EXIT_USAGE : EXIT_OK;
    }
    if (action !== 'create') throw flagError(`unknown action "${action}" (cfgu token create ...)`);
    const { values: v, positionals } = parseCommandLine('token', rest, OPTIONS);
    if (v.help) {
      session.io.stdout.write(`${tokenUsage}\n`);
      return EXIT_OK;
    }
    rejectPositionals(positionals);
    const name = str(v.name);
    if (!name) throw flagError('--name is required');
    const stores = list(v.store);
    if (!stores.length) throw flagError('give at least one --store (or --store "*" for every store)');
    const sets = list(v.set);
    if (!sets.length) throw flagError('give at least one --set pattern (e.g. --set "staging/**"; --set "" for the root set)');
    const token = newToken();
    const entry: Record<string, unknown> = { name, sha256: createHash('sha256').update(token, 'utf8').digest('hex'), stores, sets };
    if (list(v.label).length) entry.labels = list(v.label);
    if (list(v.key).length) entry.keys = list(v.key);
    if (v.metrics === true) entry.metrics = true;
    // The entry is checked exactly as the server will load it, so what is printed is what starts.
    try {
      resolveSettings({ fileSettings: { auth: { credentials: [entry] } }, env: {} });
    } catch (e) {
      const flag = { name: 'name', stores: 'store', sets: 'set', labels: 'label', keys: 'key' } as Record<string, string>;
      throw flagError((e as Error).message.replace(/^interface\.proxy\.auth\.credentials\[0\]\.(\w+)/, (_, p: string) => `--${flag[p] ?? p}`));
    }
    const yaml = YAML.stringify([entry], { flowCollectionPadding: false }).trimEnd();
    session.io.stdout.write(
      [
        `# The token of "${name}" (shown only now; the server keeps only its SHA-256):`,
        token,
        '# Paste under interface.proxy.auth.credentials in .configu:',
        yaml,
        '',
      ].join('\n'),
    );
    return EXIT_OK;
  }, io);
}
