/**
 * What the app wires in to be seen from outside: Prometheus metrics (./metrics.ts) and OpenTelemetry traces
 * (./tracing.ts). `createObservation` wraps the stores and the sandbox once (timings and outcomes, for metrics,
 * ./observed-engine.ts); the request hooks are ./request-hooks.ts and `GET /metrics` is ../http/routes/metrics.ts.
 * With metrics and traces both off, nothing is wrapped and no hook is added.
 *
 * Traces pass their parent explicitly (no context manager): a sampled request gets its own engine (`evaluate` hands
 * it to the caller): the shared stores and sandbox wrapped once more for this request, each read and job a span under
 * the request's span or the running command's, and an observer that makes a span per command. A request its sampler
 * leaves out gets the shared engine: nothing is created for it beyond the sampler's answer. Watched pipelines
 * (../watch/hub.ts) are evaluated through `watchEvaluation`: counted, and traced as `cfgu.watch.evaluation`.
 *
 * Nothing in a metric or a span is a value: labels and attributes are route patterns, methods, statuses, store names,
 * rules and counts.
 */
import type { FastifyRequest } from 'fastify';
import { ROOT_CONTEXT, SpanKind, trace, type Context, type Tracer } from '@opentelemetry/api';
import { CfguError, ValidationError } from '../../core/errors.js';
import { keyCount } from '../../core/frozen.js';
import type { EvalCommandInput } from '../../core/types.js';
import type { ExpressionEvaluator } from '../../core/ports.js';
import type { StoreResolver } from '../../core/ports.js';
import { createKeyChecker, type KeyChecker } from '../access/credentials.js';
import type { ServerSettings } from '../process/settings.js';
import { ServerMetrics, type CacheState, type EvaluationRoute, type SandboxState, type SchemaState, type StoreState } from './metrics.js';
import { useWorkerMetrics } from './cluster-metrics.js';
import { observeEvaluator, observeStores, tracedRun, type Engine } from './observed-engine.js';
import type { TracedRequest } from './request-hooks.js';
import { activeTracer, endWith } from './tracing.js';

export type { Engine } from './observed-engine.js';

export interface ObservationInput {
  settings: ServerSettings;
  stores: StoreResolver;
  evaluator?: ExpressionEvaluator;
  bodyCache?: { hits: number; misses: number };
  /** The process's cache budget (core/cache-budget.ts): each cache's estimated bytes and entries, and the ceiling. */
  caches?: CacheState;
  /** Watch requests held open (SSE streams plus long polls). */
  watchers?: () => number;
  /** The named schemas (how many, how many stale). */
  schemas?: SchemaState;
}

export interface Observation {
  /** The stores as the engine should use them (wrapped when observed). */
  readonly stores: StoreResolver;
  readonly evaluator: ExpressionEvaluator | undefined;
  /** The metrics of this process (undefined when metrics are off). */
  readonly metrics: ServerMetrics | undefined;
  /** The metrics key's checker, when a metrics key is set. */
  readonly metricsKey: KeyChecker | undefined;
  /** The tracer, when traces are on. */
  readonly tracer: Tracer | undefined;
  /** Routes this module serves, with their methods (for 404/405). */
  readonly routes: Record<string, string[]>;
  /** True when `path` is served with its own key, so the server's bearer keys do not apply to it. */
  ownKey(path: string): boolean;
  /**
   * Evaluate one pipeline of `request` (a request of `route`) with the engine `run` is given: counted and timed by
   * route, traced under the request's span.
   */
  evaluate<T>(request: FastifyRequest, route: EvaluationRoute, commands: readonly EvalCommandInput[], run: (engine: Engine) => Promise<T>): Promise<T>;
  /** Evaluate a watched pipeline (first answer or re-evaluation after a change): counted, and a trace of its own. */
  watchEvaluation<T>(commands: readonly EvalCommandInput[], watchers: number, run: (engine: Engine) => Promise<T>): Promise<T>;
  /** An SSE stream ended (counted). */
  watchStreamEnded(reason: WatchEndReason): void;
}

/**
 * Why an SSE stream ended: the client went away, the server is shutting down, the client read too slowly, or its
 * credential ended it (the token expired, the credential is no longer accepted, its scope no longer covers the pipeline).
 */
export type WatchEndReason = 'client' | 'shutdown' | 'slow_client' | 'expired' | 'revoked' | 'scope';

const now = (): number => performance.now();

/** `ok`, or the error code without its prefix (`validation_failed`, `store_unavailable`, ...), or `error`. */
const outcomeOf = (e: unknown): string => (e instanceof CfguError ? e.code.replace(/^CFGU_/, '').toLowerCase() : 'error');

function keysOf(commands: readonly EvalCommandInput[]): number {
  let n = 0;
  for (const c of commands) {
    const keys = (c as { schema?: { keys?: unknown } } | null)?.schema?.keys;
    if (keys && typeof keys === 'object') n += keyCount(keys);
  }
  return n;
}

const isSandbox = (e: unknown): e is SandboxState & ExpressionEvaluator =>
  !!e && typeof (e as SandboxState).pids === 'function' && typeof (e as SandboxState).replacements === 'function';

const hasStatus = (s: unknown): s is StoreResolver & StoreState => typeof (s as StoreState).status === 'function';

function metricsOf(input: ObservationInput): ServerMetrics | undefined {
  if (!input.settings.metrics.enabled) return undefined;
  const metrics = new ServerMetrics({
    sandbox: isSandbox(input.evaluator) ? input.evaluator : undefined,
    stores: hasStatus(input.stores) ? input.stores : undefined,
    bodyCache: input.bodyCache,
    ...(input.caches ? { caches: input.caches } : {}),
    ...(input.watchers ? { watchers: input.watchers } : {}),
    ...(input.schemas ? { schemas: input.schemas } : {}),
  });
  useWorkerMetrics(metrics);
  return metrics;
}

export function createObservation(input: ObservationInput): Observation {
  const { settings } = input;
  const tracer = activeTracer();
  const metrics = metricsOf(input);
  const metricsKey = settings.metrics.enabled && settings.metrics.key ? createKeyChecker([settings.metrics.key]) : undefined;

  const observed = !!(metrics || tracer);
  const stores = observed ? observeStores(input.stores, metrics) : input.stores;
  const evaluator = observed && input.evaluator ? observeEvaluator(input.evaluator, metrics) : input.evaluator;
  const shared: Engine = { stores, ...(evaluator ? { expressions: evaluator } : {}) };
  /** The engine of one sampled evaluation: spans under `parent`. */
  const tracedEngine = (parent: Context): Engine => tracedRun(tracer!, parent, stores, evaluator);

  return {
    stores,
    evaluator,
    metrics,
    metricsKey,
    tracer,
    routes: metrics ? { '/metrics': ['GET', 'HEAD'] } : {},
    ownKey: (path) => !!metricsKey && path === '/metrics',
    evaluate(request, route, commands, run) {
      const s = tracer ? (request as TracedRequest).cfguTrace : null;
      const engine = s ? tracedEngine(s.ctx) : shared;
      return metrics ? counted(metrics, route, commands, () => run(engine)) : run(engine);
    },
    watchEvaluation(commands, watchers, run) {
      const count = <T>(p: Promise<T>): Promise<T> => (metrics ? countedWatch(metrics, p) : p);
      if (!tracer) return count(run(shared));
      const span = tracer.startSpan('cfgu.watch.evaluation', {
        kind: SpanKind.INTERNAL,
        attributes: { 'cfgu.watch.commands': commands.length, 'cfgu.watch.watchers': watchers },
      });
      if (!span.isRecording()) {
        span.end();
        return count(run(shared));
      }
      return endWith(span, count(run(tracedEngine(trace.setSpan(ROOT_CONTEXT, span)))));
    },
    watchStreamEnded(reason) {
      metrics?.watchStreamEnded(reason);
    },
  };
}

/** One request's evaluation, counted and timed (its size first, then its outcome and time, and each failed rule). */
function counted<T>(metrics: ServerMetrics, route: EvaluationRoute, commands: readonly EvalCommandInput[], run: () => Promise<T>): Promise<T> {
  const started = now();
  metrics.pipeline(route, commands.length, keysOf(commands));
  return run().then(
    (v) => {
      metrics.evaluation(route, 'ok', (now() - started) / 1000);
      return v;
    },
    (e: unknown) => {
      metrics.evaluation(route, outcomeOf(e), (now() - started) / 1000);
      if (e instanceof ValidationError) for (const f of e.failures) metrics.failure(f.rule);
      throw e;
    },
  );
}

/** One watch evaluation, counted by outcome. */
function countedWatch<T>(metrics: ServerMetrics, running: Promise<T>): Promise<T> {
  return running.then(
    (v) => {
      metrics.watchEvaluation('ok');
      return v;
    },
    (e: unknown) => {
      metrics.watchEvaluation(outcomeOf(e));
      throw e;
    },
  );
}
