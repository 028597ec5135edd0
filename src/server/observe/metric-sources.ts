/**
 * The metrics read from their sources at scrape time, not per request: watchers held, store availability, the
 * sandbox pool's children, queue and restarts, the caches' memory and entries, the body cache's hits and misses.
 * Each source is optional (an app without a sandbox has no sandbox metrics).
 */
import { Counter, Gauge, type Registry } from 'prom-client';

/** What the scrape reads of the sandbox pool (src/expressions SandboxEvaluator, duck-typed). */
export interface SandboxState {
  pids(): number[];
  sparePids(): number[];
  queued(): Record<string, number>;
  replacements(): { renewals: number; spawns: number };
  /** Jobs answered from kept answers (src/expressions, SandboxOptions.answers). */
  answersGiven?(): number;
  /** Jobs answered with a remembered limit answer (src/expressions, SandboxOptions.runawayMemo). */
  runawaysRefused?(): number;
  /** Static halves the children hold (estimated bytes, entries). */
  childStatics?(): { bytes: number; entries: number };
  readonly options: { workers: number; spares: number; memoryMb?: number };
}

/** What the scrape reads of the process's cache budget (core/cache-budget.ts CacheBudget). */
export interface CacheState {
  readonly limitBytes: number;
  stats(): Map<string, { bytes: number; entries: number }>;
}

/** What the scrape reads of the stores (the registry's status()). */
export interface StoreState {
  status(): Array<{ name: string; available: boolean }>;
}

/** What the scrape reads of the named schemas (../schemas/registry.ts NamedSchemas). */
export interface SchemaState {
  names(): string[];
  /** Schemas whose file changed to something invalid since their version now serving was read. */
  staleCount(): number;
}

export interface MetricSources {
  sandbox?: SandboxState;
  stores?: StoreState;
  bodyCache?: { hits: number; misses: number };
  caches?: CacheState;
  /** Watch requests held open (SSE streams plus long polls). */
  watchers?: () => number;
  schemas?: SchemaState;
}

/** A counter whose value is read from elsewhere at scrape time. */
function readCounter(registry: Registry, name: string, help: string, labelNames: string[], read: (set: (labels: Record<string, string>, v: number) => void) => void): Counter<string> {
  return new Counter({
    name,
    help,
    labelNames,
    registers: [registry],
    collect() {
      this.reset();
      read((labels, v) => this.inc(labels, Math.max(0, v)));
    },
  });
}

/** Register the metrics of every source given; `storeCells` makes a store's own cells exist from the start. */
export function registerSourceMetrics(registry: Registry, sources: MetricSources, storeCells: (store: string) => void): void {
  const { sandbox, stores, bodyCache, watchers, caches, schemas } = sources;
  const registers = [registry];
  if (schemas) {
    new Gauge({
      name: 'cfgu_schemas',
      help: 'Named schemas the server holds (.configu `schemas`), by state: current, or stale (its file changed to something invalid; the last good version serves); the largest count of any worker',
      labelNames: ['state'],
      registers,
      // Every worker holds the same names and watches the same files.
      aggregator: 'max',
      collect() {
        const stale = schemas.staleCount();
        this.set({ state: 'current' }, schemas.names().length - stale);
        this.set({ state: 'stale' }, stale);
      },
    });
  }
  if (watchers) {
    new Gauge({
      name: 'cfgu_watchers',
      help: 'Watch requests held open: SSE streams plus long polls (summed across workers)',
      registers,
      collect() {
        this.set(watchers());
      },
    });
  }
  if (stores) storeMetrics(registry, stores, storeCells);
  if (sandbox) sandboxMetrics(registry, sandbox);
  if (caches || sandbox?.childStatics) {
    // Summed across workers (each worker has its own caches and ceiling).
    new Gauge({
      name: 'cfgu_cache_bytes',
      help: 'Estimated memory held by each cache, in bytes (body, schema, static, answers, watch: counted against the ceiling; sandbox_static: the sandbox children\'s static halves, bounded by their memory limit)',
      labelNames: ['cache'],
      registers,
      collect() {
        if (caches) for (const [name, s] of caches.stats()) this.set({ cache: name }, s.bytes);
        if (sandbox?.childStatics) this.set({ cache: 'sandbox_static' }, sandbox.childStatics().bytes);
      },
    });
    new Gauge({
      name: 'cfgu_cache_entries',
      help: 'Entries held by each cache',
      labelNames: ['cache'],
      registers,
      collect() {
        if (caches) for (const [name, s] of caches.stats()) this.set({ cache: name }, s.entries);
        if (sandbox?.childStatics) this.set({ cache: 'sandbox_static' }, sandbox.childStatics().entries);
      },
    });
  }
  if (caches) {
    new Gauge({
      name: 'cfgu_cache_limit_bytes',
      help: 'The ceiling of the caches\' estimated memory (limits.cacheMemoryMb), summed across workers',
      registers,
      collect() {
        this.set(caches.limitBytes);
      },
    });
  }
  if (bodyCache) {
    readCounter(registry, 'cfgu_body_cache_hits_total', 'Request bodies found already parsed in the body cache', [], (set) => set({}, bodyCache.hits));
    readCounter(registry, 'cfgu_body_cache_misses_total', 'Request bodies looked up in the body cache and parsed', [], (set) => set({}, bodyCache.misses));
  }
}

function storeMetrics(registry: Registry, stores: StoreState, storeCells: (store: string) => void): void {
  const registers = [registry];
  new Gauge({
    name: 'cfgu_store_up',
    help: 'Whether the last operation of every serving process reached the store (1) or not (0), by store',
    labelNames: ['store'],
    registers,
    // Across workers: up only when every worker's last contact succeeded.
    aggregator: 'min',
    collect() {
      for (const s of stores.status()) this.set({ store: s.name }, s.available ? 1 : 0);
    },
  });
  for (const s of stores.status()) storeCells(s.name);
}

function sandboxMetrics(registry: Registry, sandbox: SandboxState): void {
  const registers = [registry];
  new Gauge({
    name: 'cfgu_sandbox_children',
    help: 'Sandbox child processes alive, by state (active: taking jobs; spare: warm, waiting to take over)',
    labelNames: ['state'],
    registers,
    collect() {
      this.set({ state: 'active' }, sandbox.pids().length);
      this.set({ state: 'spare' }, sandbox.sparePids().length);
    },
  });
  new Gauge({
    name: 'cfgu_sandbox_jobs_queued',
    help: 'Sandbox jobs waiting for a child',
    registers,
    collect() {
      let n = 0;
      for (const v of Object.values(sandbox.queued())) n += v;
      this.set(n);
    },
  });
  const initial = sandbox.options.workers + sandbox.options.spares;
  readCounter(
    registry,
    'cfgu_sandbox_restarts_total',
    'Sandbox restarts, by kind: process (a child replaced after it died or was killed) or isolate (renewed in place after its memory limit or a full heap)',
    ['kind'],
    (set) => {
      const { renewals, spawns } = sandbox.replacements();
      set({ kind: 'process' }, Math.max(0, spawns - initial));
      set({ kind: 'isolate' }, renewals);
    },
  );
  readCounter(
    registry,
    'cfgu_sandbox_answers_kept_total',
    'Sandbox jobs answered from kept answers, without running (the same job of the same client, which read no clock or chance)',
    [],
    (set) => set({}, sandbox.answersGiven?.() ?? 0),
  );
  readCounter(
    registry,
    'cfgu_sandbox_runaways_refused_total',
    'Sandbox jobs answered with the limit answer of the same job of the same client within 5 minutes, without running',
    [],
    (set) => set({}, sandbox.runawaysRefused?.() ?? 0),
  );
}
