/**
 * Test doubles for the engine's two seams, for core unit tests only (never shipped):
 * - MemoryResolver: a StoreResolver over Maps that counts round trips, to check batching.
 * - HostEvaluator: evaluates expressions in the TEST process with `new Function`. It exists so the engine's plumbing
 *   (ordering, mapping of outcomes to rules, messages) can be tested without the sandbox; the sandbox itself and the
 *   engine running on it are tested in test/expressions and test/core/engine-sandbox.test.ts.
 */
import { coerceValue, declaredTypeOf } from '../../src/core/coerce.js';
import { UnknownStoreError, StoreUnavailableError } from '../../src/core/errors.js';
import { parseTemplate, stringifyTemplateValue } from '../../src/core/template.js';
import type { Config, ConfigQuery, ResolvedStore, SetListing, SetListOptions, StoreResolver } from '../../src/core/ports.js';
import { byCodePoint, isUnder, listArguments, listingFromRows } from '../../src/stores/listing.js';
import type { ConfigView, ExpressionEvaluator, ExpressionJob, ExpressionResult, TestOutcome, ConstOutcome } from '../../src/core/ports.js';

export class MemoryStore implements ResolvedStore {
  readonly data = new Map<string, string>();
  reads = 0;
  writes = 0;
  lists = 0;
  down = false;
  constructor(
    readonly name: string,
    readonly type = 'in-memory',
    configs: Config[] = [],
  ) {
    for (const c of configs) this.data.set(`${c.set}\u0000${c.key}`, c.value);
  }
  async read(queries: readonly ConfigQuery[]) {
    this.reads++;
    if (this.down) throw new StoreUnavailableError(this.name, 'connection refused');
    const configs: Config[] = [];
    for (const q of queries) {
      const value = this.data.get(`${q.set}\u0000${q.key}`);
      if (value) configs.push({ set: q.set, key: q.key, value });
    }
    return { configs, fromBackup: false };
  }
  /** ConfigStore.list over the map, by the shared listing rules (src/stores/listing.ts). */
  async list(prefix: string, options?: SetListOptions): Promise<SetListing> {
    this.lists++;
    if (this.down) throw new StoreUnavailableError(this.name, 'connection refused');
    const { prefix: p, limits } = listArguments(prefix, options);
    const rows = [...this.data.keys()]
      .map((pair) => ({ set: pair.slice(0, pair.indexOf('\u0000')), key: pair.slice(pair.indexOf('\u0000') + 1) }))
      .filter((r) => isUnder(p, r.set))
      .sort((a, b) => byCodePoint(a.set, b.set) || byCodePoint(a.key, b.key));
    return listingFromRows(p, limits, rows.slice(0, limits.keys + 1));
  }
  async write(configs: readonly Config[]) {
    this.writes++;
    for (const c of configs) {
      if (c.value === '') this.data.delete(`${c.set}\u0000${c.key}`);
      else this.data.set(`${c.set}\u0000${c.key}`, c.value);
    }
  }
  get(set: string, key: string) {
    return this.data.get(`${set}\u0000${key}`);
  }
}

export class MemoryResolver implements StoreResolver {
  readonly stores = new Map<string, MemoryStore>();
  constructor(
    stores: MemoryStore[],
    readonly defaultName?: string,
  ) {
    for (const s of stores) this.stores.set(s.name, s);
  }
  resolve(name: string | undefined): ResolvedStore {
    const found = this.stores.get(name ?? this.defaultName ?? '');
    if (!found) throw new UnknownStoreError(name, this.names());
    return found;
  }
  names() {
    return [...this.stores.keys()];
  }
}

// JSONSchema stand-in for the host evaluator: enough for the engine's tests (type checks only).
const JSONSchema = {
  validate(schema: { type?: string }, data: unknown) {
    const kind = Array.isArray(data) ? 'array' : data === null ? 'null' : typeof data;
    if (schema.type && schema.type !== kind && !(schema.type === 'integer' && Number.isInteger(data))) {
      throw new Error(`must be ${schema.type}`);
    }
    return true;
  },
};

function run(source: string, $: unknown): unknown {
  return new Function('$', 'JSONSchema', `return (${source});`)($, JSONSchema);
}

export class HostEvaluator implements ExpressionEvaluator {
  jobs: ExpressionJob[] = [];
  async run(job: ExpressionJob): Promise<ExpressionResult> {
    this.jobs.push(job);
    const configs: Record<string, ConfigView> = structuredClone(job.configs);
    const consts: ConstOutcome[] = [];
    for (const c of job.consts) {
      try {
        const $ = { ...configs[c.key], configs, input: job.input };
        const text = parseTemplate(c.template)
          .map((p) => (p.kind === 'text' ? p.text : stringifyTemplateValue(run(p.source, $))))
          .join('');
        const cfgu = configs[c.key]!.cfgu;
        configs[c.key] = { ...configs[c.key]!, storedValue: text, value: coerceValue(text, declaredTypeOf(cfgu)), origin: 'const' };
        consts.push({ key: c.key, ok: true, value: text });
      } catch (e) {
        consts.push({ key: c.key, ok: false, kind: 'error', message: (e as Error).message });
      }
    }
    const tests: TestOutcome[] = [];
    for (const t of job.tests) {
      t.expressions.forEach((source, index) => {
        try {
          const ok = Boolean(run(source, { ...configs[t.key], configs, input: job.input }));
          if (!ok) tests.push({ key: t.key, index, ok: false, kind: 'falsy', message: 'evaluated to false' });
        } catch (e) {
          tests.push({ key: t.key, index, ok: false, kind: 'error', message: (e as Error).message });
        }
      });
    }
    return { consts, tests };
  }
  async renderTemplate(): Promise<string> {
    throw new Error('not used by core tests');
  }
  async evaluateBoolean(): Promise<boolean> {
    throw new Error('not used by core tests');
  }
  async renderTrusted(): Promise<string> {
    throw new Error('not used by core tests');
  }
  async close() {}
}

/**
 * A resolver over `registry()` (read when a store is resolved, so a suite may build its registry later) that records
 * the name of every store read in `reads` (`list:<name>` for a listing): the access suites check that a refused
 * request reads nothing.
 */
export function countingResolver(registry: () => StoreResolver, reads: string[]): StoreResolver {
  return {
    resolve(name) {
      const store = registry().resolve(name);
      return {
        name: store.name,
        type: store.type,
        read: (queries) => {
          reads.push(store.name);
          return store.read(queries);
        },
        write: (configs) => store.write(configs),
        ...(store.list
          ? {
              list: (prefix: string, options?: SetListOptions) => {
                reads.push(`list:${store.name}`);
                return store.list!(prefix, options);
              },
            }
          : {}),
      };
    },
    names: () => registry().names(),
  };
}
