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
import { AggregatorRegistry, Counter, Gauge, Registry, collectDefaultMetrics, type MetricObjectWithValues, type MetricValue } from 'prom-client';
import { CellCounter, CellHistogram, HistogramCell, type CounterCell } from './metric-cells.js';

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

export interface MetricSources {
  sandbox?: SandboxState;
  stores?: StoreState;
  bodyCache?: { hits: number; misses: number };
  caches?: CacheState;
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

/** The cells of one route: its duration histogram and its counters by method and status, resolved once each. */
interface RouteCells {
  duration: HistogramCell;
  counters: Map<string, Map<number, CounterCell>>;
}

/** Recorder of one store's reads and writes (label sets resolved when the store is wrapped). */
export type StoreRecorder = (operation: 'read' | 'write', outcome: 'ok' | 'backup' | 'error', seconds: number) => void;

export class ServerMetrics {
  readonly registry = new Registry();
  private readonly requests: CellCounter;
  private readonly requestDuration: CellHistogram;
  private readonly routes = new Map<string, RouteCells>();
  private readonly outcome: (outcome: string) => CounterCell;
  private readonly evaluationDuration: HistogramCell;
  private readonly evaluationCommands: HistogramCell;
  private readonly evaluationKeys: HistogramCell;
  private readonly expressions: CounterCell;
  private readonly rule: (rule: string) => CounterCell;
  private readonly sandboxJobDuration: HistogramCell;
  private readonly limitKills: { time: CounterCell; memory: CounterCell };
  private readonly storeOperations: CellCounter;
  private readonly storeDuration: CellHistogram;
  private readonly storeBackupAnswers: CellCounter;
  private readonly watchOutcome: (outcome: string) => CounterCell;
  private readonly watchEnd: (reason: string) => CounterCell;

  constructor(sources: MetricSources = {}) {
    const registers = [this.registry];
    const r = this.registry;
    collectDefaultMetrics({ register: this.registry });

    this.requests = new CellCounter('cfgu_http_requests_total', 'HTTP requests answered, by route, method and status code', ['route', 'method', 'status'], r);
    this.requestDuration = new CellHistogram(
      'cfgu_http_request_duration_seconds',
      'Time from the first byte of a request to the end of its answer, by route',
      ['route'],
      DURATION_BUCKETS,
      r,
    );

    this.outcome = new CellCounter(
      'cfgu_evaluations_total',
      'Pipelines evaluated (POST /export), by outcome: ok, or the error code without its CFGU_ prefix',
      ['outcome'],
      r,
    ).byLabel('outcome');
    this.evaluationDuration = new CellHistogram(
      'cfgu_evaluation_duration_seconds',
      'Time to evaluate one pipeline (store reads, expressions, validation), whatever its outcome',
      [],
      DURATION_BUCKETS,
      r,
    ).cell();
    this.evaluationCommands = new CellHistogram('cfgu_evaluation_commands', 'Commands per evaluated pipeline', [], COMMAND_BUCKETS, r).cell();
    this.evaluationKeys = new CellHistogram('cfgu_evaluation_keys', 'Keys declared per evaluated pipeline (all commands together)', [], KEY_BUCKETS, r).cell();
    this.expressions = new CellCounter(
      'cfgu_expressions_total',
      'Expressions sent to the sandbox: each const template and each check (test, pattern, schema)',
      [],
      r,
    ).cell();
    this.rule = new CellCounter(
      'cfgu_evaluation_failures_total',
      'Validation failures reported to clients, by the rule that failed (required, pattern, enum, schema, test, const, ...)',
      ['rule'],
      r,
    ).byLabel('rule');

    this.sandboxJobDuration = new CellHistogram(
      'cfgu_sandbox_job_duration_seconds',
      "Time from handing one command's expressions to the sandbox to its answer, queueing included",
      [],
      DURATION_BUCKETS,
      r,
    ).cell();
    const kills = new CellCounter('cfgu_sandbox_limit_kills_total', 'Expressions stopped by a sandbox limit, by limit (time, memory)', ['limit'], r);
    this.limitKills = { time: kills.cell({ limit: 'time' }), memory: kills.cell({ limit: 'memory' }) };

    this.storeOperations = new CellCounter(
      'cfgu_store_operations_total',
      'Store reads and writes, by store, operation (read, write) and outcome (ok, backup, error)',
      ['store', 'operation', 'outcome'],
      r,
    );
    this.storeDuration = new CellHistogram(
      'cfgu_store_operation_duration_seconds',
      'Time of one batched store read or write (backup answers included), by store and operation',
      ['store', 'operation'],
      DURATION_BUCKETS,
      r,
    );
    this.storeBackupAnswers = new CellCounter(
      'cfgu_store_backup_answers_total',
      'Reads answered from the backup because the store could not be reached, by store',
      ['store'],
      r,
    );
    this.watchOutcome = new CellCounter(
      'cfgu_watch_evaluations_total',
      'Evaluations made for watch requests (SSE streams and long polls: the first answer and each re-evaluation after a change), by outcome: ok, or the error code without its CFGU_ prefix',
      ['outcome'],
      r,
    ).byLabel('outcome');
    this.watchEnd = new CellCounter(
      'cfgu_watch_streams_ended_total',
      'SSE streams ended, by reason (client: the client went away; shutdown: the server is stopping; slow_client: cut because the client did not read; expired, revoked, scope: ended by its credential)',
      ['reason'],
      r,
    ).byLabel('reason');

    const { sandbox, stores, bodyCache, watchers, caches } = sources;
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
        this.storeBackupAnswers.cell({ store: s.name });
        for (const outcome of ['ok', 'backup', 'error']) this.storeOperations.cell({ store: s.name, operation: 'read', outcome });
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
      readCounter(
        this.registry,
        'cfgu_sandbox_answers_kept_total',
        'Sandbox jobs answered from kept answers, without running (the same job of the same client, which read no clock or chance)',
        [],
        (set) => set({}, sandbox.answersGiven?.() ?? 0),
      );
      readCounter(
        this.registry,
        'cfgu_sandbox_runaways_refused_total',
        'Sandbox jobs answered with the limit answer of the same job of the same client within 5 minutes, without running',
        [],
        (set) => set({}, sandbox.runawaysRefused?.() ?? 0),
      );
    }
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
      readCounter(this.registry, 'cfgu_body_cache_hits_total', 'Request bodies found already parsed in the body cache', [], (set) => set({}, bodyCache.hits));
      readCounter(this.registry, 'cfgu_body_cache_misses_total', 'Request bodies looked up in the body cache and parsed', [], (set) => set({}, bodyCache.misses));
    }
  }

  /** One answered request. `route` is the route's pattern (never the raw path), or `none` when no route matched. */
  request(route: string, method: string, status: number, seconds: number): void {
    let r = this.routes.get(route);
    if (!r) {
      r = { duration: this.requestDuration.cell({ route }), counters: new Map() };
      this.routes.set(route, r);
    }
    let byStatus = r.counters.get(method);
    if (!byStatus) {
      byStatus = new Map();
      r.counters.set(method, byStatus);
    }
    let c = byStatus.get(status);
    if (!c) {
      c = this.requests.cell({ route, method, status: String(status) });
      byStatus.set(status, c);
    }
    c.value++;
    r.duration.observe(seconds);
  }

  /** The size of a pipeline about to be evaluated. */
  pipeline(commands: number, keys: number): void {
    this.evaluationCommands.observe(commands);
    this.evaluationKeys.observe(keys);
  }

  /** One evaluated pipeline (POST /export). */
  evaluation(outcome: string, seconds: number): void {
    this.outcome(outcome).value++;
    this.evaluationDuration.observe(seconds);
  }

  /** One validation failure reported to a client. */
  failure(rule: string): void {
    this.rule(rule).value++;
  }

  /** One sandbox job: its time, its expressions, and the expressions a limit stopped. */
  sandboxJob(seconds: number, expressions: number, timeKills: number, memoryKills: number): void {
    this.sandboxJobDuration.observe(seconds);
    this.expressions.value += expressions;
    this.limitKills.time.value += timeKills;
    this.limitKills.memory.value += memoryKills;
  }

  /** One evaluation made for a watch request (SSE or long poll). */
  watchEvaluation(outcome: string): void {
    this.watchOutcome(outcome).value++;
  }

  /** One SSE stream ended. */
  watchStreamEnded(reason: 'client' | 'shutdown' | 'slow_client' | 'expired' | 'revoked' | 'scope'): void {
    this.watchEnd(reason).value++;
  }

  /** The recorder of one store's reads and writes, label sets resolved once. */
  store(name: string): StoreRecorder {
    const cells = {} as Record<'read' | 'write', Record<'ok' | 'backup' | 'error', CounterCell | undefined>>;
    cells.read = { ok: undefined, backup: undefined, error: undefined };
    cells.write = { ok: undefined, backup: undefined, error: undefined };
    const durations = {
      read: this.storeDuration.cell({ store: name, operation: 'read' }),
      write: this.storeDuration.cell({ store: name, operation: 'write' }),
    };
    const backups = this.storeBackupAnswers.cell({ store: name });
    return (operation, outcome, seconds) => {
      const byOutcome = cells[operation];
      (byOutcome[outcome] ??= this.storeOperations.cell({ store: name, operation, outcome })).value++;
      durations[operation].observe(seconds);
      if (outcome === 'backup') backups.value++;
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
