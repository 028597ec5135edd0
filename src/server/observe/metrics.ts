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
import { Registry, collectDefaultMetrics } from 'prom-client';
import { askPrimary, type MetricJson } from './cluster-metrics.js';
import { registerSourceMetrics, type MetricSources } from './metric-sources.js';

export type { CacheState, MetricSources, SandboxState, SchemaState, StoreState } from './metric-sources.js';
import { CellCounter, CellHistogram, HistogramCell, type CounterCell } from './metric-cells.js';

/** Seconds: from well under a millisecond (a cached `/live`) to the request timeout's order. */
const DURATION_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];
const COMMAND_BUCKETS = [1, 2, 3, 5, 10, 25, 50, 100];

const KEY_BUCKETS = [1, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 10000];

/** The cells of one route: its duration histogram and its counters by method and status, resolved once each. */
interface RouteCells {
  duration: HistogramCell;
  counters: Map<string, Map<number, CounterCell>>;
}

/** The route that evaluated a pipeline: the `route` label of the `cfgu_evaluation*` metrics. */
export type EvaluationRoute = 'export' | 'explain' | 'matrix';

/** The cells of one evaluating route: its outcomes and its histograms, resolved once each. */
interface EvaluationCells {
  outcome: Map<string, CounterCell>;
  duration: HistogramCell;
  commands: HistogramCell;
  keys: HistogramCell;
}

/** Recorder of one store's reads and writes (label sets resolved when the store is wrapped). */
export type StoreRecorder = (operation: 'read' | 'write', outcome: 'ok' | 'backup' | 'error', seconds: number) => void;


/** A registry with the default metrics of Node.js in it. */
function withDefaultMetrics(registry: Registry): Registry {
  collectDefaultMetrics({ register: registry });
  return registry;
}

/** The sandbox's limit kills, one cell per limit. */
function limitKillCells(registry: Registry): { time: CounterCell; memory: CounterCell } {
  const kills = new CellCounter('cfgu_sandbox_limit_kills_total', 'Expressions stopped by a sandbox limit, by limit (time, memory)', ['limit'], registry);
  return { time: kills.cell({ limit: 'time' }), memory: kills.cell({ limit: 'memory' }) };
}

export class ServerMetrics {
  /** The process's registry, with the default metrics of Node.js registered first. */
  readonly registry = withDefaultMetrics(new Registry());
  private readonly routes = new Map<string, RouteCells>();
  private readonly requests: CellCounter = new CellCounter('cfgu_http_requests_total', 'HTTP requests answered, by route, method and status code', ['route', 'method', 'status'], this.registry);
  private readonly requestDuration: CellHistogram = new CellHistogram(
    'cfgu_http_request_duration_seconds',
    'Time from the first byte of a request to the end of its answer, by route',
    ['route'],
    DURATION_BUCKETS,
    this.registry,
  );
  private readonly evaluations: CellCounter = new CellCounter(
    'cfgu_evaluations_total',
    'Pipelines evaluated, by route (export, explain, matrix) and outcome: ok, or the error code without its CFGU_ prefix',
    ['route', 'outcome'],
    this.registry,
  );
  private readonly evaluationDuration: CellHistogram = new CellHistogram(
    'cfgu_evaluation_duration_seconds',
    'Time to evaluate one pipeline (store reads, expressions, validation), whatever its outcome, by route',
    ['route'],
    DURATION_BUCKETS,
    this.registry,
  );
  private readonly evaluationCommands: CellHistogram = new CellHistogram('cfgu_evaluation_commands', 'Commands per evaluated pipeline, by route', ['route'], COMMAND_BUCKETS, this.registry);
  private readonly evaluationKeys: CellHistogram = new CellHistogram(
    'cfgu_evaluation_keys',
    'Keys declared per evaluated pipeline (all commands together), by route',
    ['route'],
    KEY_BUCKETS,
    this.registry,
  );
  private readonly evaluationCells = new Map<EvaluationRoute, EvaluationCells>();
  private readonly expressions: CounterCell = new CellCounter(
    'cfgu_expressions_total',
    'Expressions sent to the sandbox: each const template and each check (test, pattern, schema)',
    [],
    this.registry,
  ).cell();
  private readonly rule: (rule: string) => CounterCell = new CellCounter(
    'cfgu_evaluation_failures_total',
    'Validation failures reported to clients, by the rule that failed (required, pattern, enum, schema, test, const, ...)',
    ['rule'],
    this.registry,
  ).byLabel('rule');
  private readonly sandboxJobDuration: HistogramCell = new CellHistogram(
    'cfgu_sandbox_job_duration_seconds',
    "Time from handing one command's expressions to the sandbox to its answer, queueing included",
    [],
    DURATION_BUCKETS,
    this.registry,
  ).cell();
  private readonly limitKills = limitKillCells(this.registry);
  private readonly storeOperations: CellCounter = new CellCounter(
    'cfgu_store_operations_total',
    'Store reads and writes, by store, operation (read, write) and outcome (ok, backup, error)',
    ['store', 'operation', 'outcome'],
    this.registry,
  );
  private readonly storeDuration: CellHistogram = new CellHistogram(
    'cfgu_store_operation_duration_seconds',
    'Time of one batched store read or write (backup answers included), by store and operation',
    ['store', 'operation'],
    DURATION_BUCKETS,
    this.registry,
  );
  private readonly storeBackupAnswers: CellCounter = new CellCounter(
    'cfgu_store_backup_answers_total',
    'Reads answered from the backup because the store could not be reached, by store',
    ['store'],
    this.registry,
  );
  private readonly watchOutcome: (outcome: string) => CounterCell = new CellCounter(
    'cfgu_watch_evaluations_total',
    'Evaluations made for watch requests (SSE streams and long polls: the first answer and each re-evaluation after a change), by outcome: ok, or the error code without its CFGU_ prefix',
    ['outcome'],
    this.registry,
  ).byLabel('outcome');
  private readonly watchEnd: (reason: string) => CounterCell = new CellCounter(
    'cfgu_watch_streams_ended_total',
    'SSE streams ended, by reason (client: the client went away; shutdown: the server is stopping; slow_client: cut because the client did not read; expired, revoked, scope: ended by its credential)',
    ['reason'],
    this.registry,
  ).byLabel('reason');

  private readonly schemaReloadFailures: (schema: string) => CounterCell = new CellCounter(
    'cfgu_schema_reload_failures_total',
    'Changes of a named schema\'s file that could not be used (missing, not valid JSON or YAML, not a valid schema): the last good version kept serving, by schema; counted by every worker',
    ['schema'],
    this.registry,
  ).byLabel('schema');

  private readonly writes: CellCounter = new CellCounter(
    'cfgu_writes_total',
    'Requests of the write routes, by route (upsert, rollback, history) and outcome (written, unchanged, dry-run, read, refused: the HTTP status says why)',
    ['route', 'outcome'],
    this.registry,
  );
  private readonly writeCells = new Map<string, CounterCell>();

  constructor(sources: MetricSources = {}) {
    for (const name of sources.schemas?.names() ?? []) this.schemaReloadFailures(name);
    // Then the metrics read from their sources at scrape time (./metric-sources.ts); a store's cells exist from the start.
    registerSourceMetrics(this.registry, sources, (store) => {
      this.storeBackupAnswers.cell({ store });
      for (const outcome of ['ok', 'backup', 'error']) this.storeOperations.cell({ store, operation: 'read', outcome });
    });
  }

  /** One answered request of a write route: its route and outcome (both from fixed lists, never the request's text). */
  write(route: string, outcome: string): void {
    const key = `${route}\u0000${outcome}`;
    let c = this.writeCells.get(key);
    if (!c) {
      c = this.writes.cell({ route, outcome });
      this.writeCells.set(key, c);
    }
    c.value++;
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

  /** The cells of the pipelines `route` evaluates (its histograms listed from its first pipeline on). */
  private evaluated(route: EvaluationRoute): EvaluationCells {
    let c = this.evaluationCells.get(route);
    if (!c) {
      c = {
        outcome: new Map(),
        duration: this.evaluationDuration.cell({ route }),
        commands: this.evaluationCommands.cell({ route }),
        keys: this.evaluationKeys.cell({ route }),
      };
      this.evaluationCells.set(route, c);
    }
    return c;
  }

  /** The size of a pipeline `route` is about to evaluate. */
  pipeline(route: EvaluationRoute, commands: number, keys: number): void {
    const c = this.evaluated(route);
    c.commands.observe(commands);
    c.keys.observe(keys);
  }

  /** One pipeline evaluated by `route`. */
  evaluation(route: EvaluationRoute, outcome: string, seconds: number): void {
    const c = this.evaluated(route);
    let cell = c.outcome.get(outcome);
    if (!cell) {
      cell = this.evaluations.cell({ route, outcome });
      c.outcome.set(outcome, cell);
    }
    cell.value++;
    c.duration.observe(seconds);
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

  /** A change of the named schema `name` could not be used. */
  schemaReloadFailed(name: string): void {
    this.schemaReloadFailures(name).value++;
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
