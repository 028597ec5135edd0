/**
 * Prometheus metrics (prom-client). Each serving process keeps its own registry; `GET /metrics` answers with the whole
 * server's numbers: in a cluster (`--workers N`), the worker that got the scrape asks the primary, the primary asks every
 * worker for its metrics over the cluster's IPC channel, adds them up (prom-client's aggregation: counters and
 * histograms summed, each gauge as declared) and sends the text back. The list of metrics and what each means is in
 * docs/operations.md.
 *
 * Recording is cheap on purpose: label sets are resolved once and kept (`child`), and everything that is a state
 * (sandbox children, queue length, store availability, body cache counts) is read at scrape time, not per request.
 */
import cluster from 'node:cluster';
import { AggregatorRegistry, Counter, Gauge, Histogram, Registry, collectDefaultMetrics, type MetricObjectWithValues, type MetricValue } from 'prom-client';

/** Seconds: from well under a millisecond (a cached `/live`) to the request timeout's order. */
const DURATION_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];
const COMMAND_BUCKETS = [1, 2, 3, 5, 10, 25, 50, 100];
type MetricJson = MetricObjectWithValues<MetricValue<string>>;

const KEY_BUCKETS = [1, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 10000];

/** What the scrape reads of the sandbox pool (src/expressions SandboxEvaluator, duck-typed). */
export interface SandboxState {
  pids(): number[];
  sparePids(): number[];
  queued(): Record<string, number>;
  replacements(): { renewals: number; spawns: number };
  readonly options: { workers: number; spares: number };
}

/** What the scrape reads of the stores (the registry's status()). */
export interface StoreState {
  status(): Array<{ name: string; available: boolean }>;
}

export interface MetricSources {
  sandbox?: SandboxState;
  stores?: StoreState;
  bodyCache?: { hits: number; misses: number };
  /** Watch requests held open (SSE streams plus long polls). */
  watchers?: () => number;
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

export class ServerMetrics {
  readonly registry = new Registry();
  private readonly requests: Counter<'route' | 'method' | 'status'>;
  private readonly requestDuration: Histogram<'route'>;
  private readonly requestChildren = new Map<string, { inc(): void }>();
  private readonly durationChildren = new Map<string, { observe(v: number): void }>();
  readonly evaluations: Counter<'outcome'>;
  readonly evaluationDuration: Histogram<string>;
  readonly evaluationCommands: Histogram<string>;
  readonly evaluationKeys: Histogram<string>;
  readonly expressions: Counter<string>;
  readonly failures: Counter<'rule'>;
  readonly sandboxJobDuration: Histogram<string>;
  readonly sandboxLimitKills: Counter<'limit'>;
  readonly storeOperations: Counter<'store' | 'operation' | 'outcome'>;
  readonly storeDuration: Histogram<'store' | 'operation'>;
  readonly storeBackupAnswers: Counter<'store'>;

  constructor(sources: MetricSources = {}) {
    const registers = [this.registry];
    collectDefaultMetrics({ register: this.registry });

    this.requests = new Counter({
      name: 'cfgu_http_requests_total',
      help: 'HTTP requests answered, by route, method and status code',
      labelNames: ['route', 'method', 'status'],
      registers,
    });
    this.requestDuration = new Histogram({
      name: 'cfgu_http_request_duration_seconds',
      help: 'Time from the first byte of a request to the end of its answer, by route',
      labelNames: ['route'],
      buckets: DURATION_BUCKETS,
      registers,
    });

    this.evaluations = new Counter({
      name: 'cfgu_evaluations_total',
      help: 'Pipelines evaluated (POST /export), by outcome: ok, or the error code without its CFGU_ prefix',
      labelNames: ['outcome'],
      registers,
    });
    this.evaluationDuration = new Histogram({
      name: 'cfgu_evaluation_duration_seconds',
      help: 'Time to evaluate one pipeline (store reads, expressions, validation), whatever its outcome',
      buckets: DURATION_BUCKETS,
      registers,
    });
    this.evaluationCommands = new Histogram({
      name: 'cfgu_evaluation_commands',
      help: 'Commands per evaluated pipeline',
      buckets: COMMAND_BUCKETS,
      registers,
    });
    this.evaluationKeys = new Histogram({
      name: 'cfgu_evaluation_keys',
      help: 'Keys declared per evaluated pipeline (all commands together)',
      buckets: KEY_BUCKETS,
      registers,
    });
    this.expressions = new Counter({
      name: 'cfgu_expressions_total',
      help: 'Expressions sent to the sandbox: each const template and each check (test, pattern, schema)',
      registers,
    });
    this.failures = new Counter({
      name: 'cfgu_evaluation_failures_total',
      help: 'Validation failures reported to clients, by the rule that failed (required, pattern, enum, schema, test, const, ...)',
      labelNames: ['rule'],
      registers,
    });

    this.sandboxJobDuration = new Histogram({
      name: 'cfgu_sandbox_job_duration_seconds',
      help: "Time from handing one command's expressions to the sandbox to its answer, queueing included",
      buckets: DURATION_BUCKETS,
      registers,
    });
    this.sandboxLimitKills = new Counter({
      name: 'cfgu_sandbox_limit_kills_total',
      help: 'Expressions stopped by a sandbox limit, by limit (time, memory)',
      labelNames: ['limit'],
      registers,
    });
    for (const limit of ['time', 'memory']) this.sandboxLimitKills.inc({ limit }, 0);

    this.storeOperations = new Counter({
      name: 'cfgu_store_operations_total',
      help: 'Store reads and writes, by store, operation (read, write) and outcome (ok, backup, error)',
      labelNames: ['store', 'operation', 'outcome'],
      registers,
    });
    this.storeDuration = new Histogram({
      name: 'cfgu_store_operation_duration_seconds',
      help: 'Time of one batched store read or write (backup answers included), by store and operation',
      labelNames: ['store', 'operation'],
      buckets: DURATION_BUCKETS,
      registers,
    });
    this.storeBackupAnswers = new Counter({
      name: 'cfgu_store_backup_answers_total',
      help: 'Reads answered from the backup because the store could not be reached, by store',
      labelNames: ['store'],
      registers,
    });

    const { sandbox, stores, bodyCache, watchers } = sources;
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
    if (stores) {
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
      for (const s of stores.status()) {
        this.storeBackupAnswers.inc({ store: s.name }, 0);
        for (const outcome of ['ok', 'backup', 'error']) this.storeOperations.inc({ store: s.name, operation: 'read', outcome }, 0);
      }
    }
    if (sandbox) {
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
        this.registry,
        'cfgu_sandbox_restarts_total',
        'Sandbox restarts, by kind: process (a child replaced after it died or was killed) or isolate (renewed in place after its memory limit or a full heap)',
        ['kind'],
        (set) => {
          const { renewals, spawns } = sandbox.replacements();
          set({ kind: 'process' }, Math.max(0, spawns - initial));
          set({ kind: 'isolate' }, renewals);
        },
      );
    }
    if (bodyCache) {
      readCounter(this.registry, 'cfgu_body_cache_hits_total', 'Request bodies found already parsed in the body cache', [], (set) => set({}, bodyCache.hits));
      readCounter(this.registry, 'cfgu_body_cache_misses_total', 'Request bodies looked up in the body cache and parsed', [], (set) => set({}, bodyCache.misses));
    }
  }

  /** One answered request. `route` is the route's pattern (never the raw path), or `none` when no route matched. */
  request(route: string, method: string, status: number, seconds: number): void {
    const id = `${route} ${method} ${status}`;
    let c = this.requestChildren.get(id);
    if (!c) {
      c = this.requests.labels({ route, method, status: String(status) });
      this.requestChildren.set(id, c);
    }
    c.inc();
    let h = this.durationChildren.get(route);
    if (!h) {
      h = this.requestDuration.labels({ route });
      this.durationChildren.set(route, h);
    }
    h.observe(seconds);
  }

  private readonly outcomeChildren = new Map<string, { inc(): void }>();

  /** One evaluated pipeline. */
  evaluation(outcome: string, seconds: number): void {
    let c = this.outcomeChildren.get(outcome);
    if (!c) {
      c = this.evaluations.labels({ outcome });
      this.outcomeChildren.set(outcome, c);
    }
    c.inc();
    this.evaluationDuration.observe(seconds);
  }

  /** The recorder of one store's reads and writes, label sets resolved once. */
  store(name: string): (operation: 'read' | 'write', outcome: 'ok' | 'backup' | 'error', seconds: number) => void {
    const counters = new Map<string, { inc(): void }>();
    const durations = {
      read: this.storeDuration.labels({ store: name, operation: 'read' }),
      write: this.storeDuration.labels({ store: name, operation: 'write' }),
    };
    const backups = this.storeBackupAnswers.labels({ store: name });
    return (operation, outcome, seconds) => {
      const id = `${operation} ${outcome}`;
      let c = counters.get(id);
      if (!c) {
        c = this.storeOperations.labels({ store: name, operation, outcome });
        counters.set(id, c);
      }
      c.inc();
      durations[operation].observe(seconds);
      if (outcome === 'backup') backups.inc();
    };
  }

  /** This process's metrics as JSON (what a worker sends the primary). */
  json(): Promise<MetricJson[]> {
    return this.registry.getMetricsAsJSON();
  }

  /** The text for a scrape: this process alone, or the whole cluster when this is a cluster worker. */
  async text(): Promise<string> {
    if (cluster.isWorker && process.send) return askPrimary();
    return this.registry.metrics();
  }

  get contentType(): string {
    return this.registry.contentType;
  }
}

// ---- Cluster aggregation over IPC --------------------------------------------------------------------------------

/** Worker -> primary: a scrape arrived, send back the cluster's text. */
interface ScrapeRequest { cfgu: 'metrics:scrape'; id: number }
/** Primary -> worker: the cluster's text (or why there is none). */
interface ScrapeAnswer { cfgu: 'metrics:text'; id: number; text?: string; error?: string }
/** Primary -> worker: send your metrics. */
interface CollectRequest { cfgu: 'metrics:collect'; id: number }
/** Worker -> primary: my metrics. */
interface CollectAnswer { cfgu: 'metrics:part'; id: number; metrics: MetricJson[] }

/** How long a scrape waits for the workers (a worker that does not answer in time is left out of that scrape). */
const COLLECT_WAIT_MS = 3000;

let current: ServerMetrics | undefined;
let workerListening = false;
let nextScrape = 1;
const pendingScrapes = new Map<number, { resolve: (text: string) => void; reject: (e: Error) => void; timer: NodeJS.Timeout }>();

/** In a worker: make `metrics` the registry this process reports to the primary (the last one built wins). */
export function useWorkerMetrics(metrics: ServerMetrics): void {
  current = metrics;
  if (workerListening || !cluster.isWorker) return;
  workerListening = true;
  process.on('message', (msg: unknown) => {
    const m = msg as CollectRequest | ScrapeAnswer | null;
    if (!m || typeof m !== 'object') return;
    if (m.cfgu === 'metrics:collect') {
      const id = m.id;
      const reply = (metrics: MetricJson[]) => process.send?.({ cfgu: 'metrics:part', id, metrics } satisfies CollectAnswer);
      if (!current) reply([]);
      else current.json().then(reply, () => reply([]));
    } else if (m.cfgu === 'metrics:text') {
      const waiting = pendingScrapes.get(m.id);
      if (!waiting) return;
      pendingScrapes.delete(m.id);
      clearTimeout(waiting.timer);
      if (typeof m.text === 'string') waiting.resolve(m.text);
      else waiting.reject(new Error(m.error ?? 'no metrics'));
    }
  });
}

function askPrimary(): Promise<string> {
  const id = nextScrape++;
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      pendingScrapes.delete(id);
      reject(new Error('the primary did not answer'));
    }, COLLECT_WAIT_MS * 2);
    timer.unref();
    pendingScrapes.set(id, { resolve, reject, timer });
    process.send!({ cfgu: 'metrics:scrape', id } satisfies ScrapeRequest);
  });
}

/**
 * In the primary: answer the workers' scrapes with the sum over every live worker. Each scrape asks every worker
 * afresh (no cache: Prometheus decides how often it scrapes).
 */
export function serveClusterMetrics(): void {
  let nextCollect = 1;
  const collecting = new Map<number, { parts: MetricJson[][]; waiting: Set<number>; done: () => void }>();
  cluster.on('message', (worker, msg: unknown) => {
    const m = msg as ScrapeRequest | CollectAnswer | null;
    if (!m || typeof m !== 'object') return;
    if (m.cfgu === 'metrics:part') {
      const c = collecting.get(m.id);
      if (!c || !c.waiting.delete(worker.id)) return;
      if (Array.isArray(m.metrics)) c.parts.push(m.metrics);
      if (c.waiting.size === 0) c.done();
    } else if (m.cfgu === 'metrics:scrape') {
      const scrapeId = m.id;
      const id = nextCollect++;
      const workers = Object.values(cluster.workers ?? {}).filter((w) => w && w.isConnected());
      const entry = { parts: [] as MetricJson[][], waiting: new Set(workers.map((w) => w!.id)), done: () => undefined as void };
      const finished = new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, COLLECT_WAIT_MS);
        entry.done = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      collecting.set(id, entry);
      for (const w of workers) w!.send({ cfgu: 'metrics:collect', id } satisfies CollectRequest);
      if (entry.waiting.size === 0) entry.done();
      void finished
        .then(() => {
          collecting.delete(id);
          return AggregatorRegistry.aggregate(entry.parts).metrics();
        })
        .then(
          (text) => ({ cfgu: 'metrics:text', id: scrapeId, text }) satisfies ScrapeAnswer,
          () => ({ cfgu: 'metrics:text', id: scrapeId, error: 'aggregation failed' }) satisfies ScrapeAnswer,
        )
        .then((answer) => {
          if (worker.isConnected()) worker.send(answer);
        });
    }
  });
}
