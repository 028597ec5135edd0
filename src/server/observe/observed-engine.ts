/**
 * The engine's ports, observed. For metrics, each store and the sandbox are wrapped once (reads, writes and jobs
 * timed and counted); for a sampled trace, `tracedRun` wraps them once more for one evaluation, each store read and
 * sandbox job a span under the running command's span, and a span per command. Nothing in a metric or a span is a
 * value: attributes are store names, counts and outcomes.
 */
import { trace } from '@opentelemetry/api';
import type { CommandInfo, EngineObserver } from '../../core/ports.js';
import type { ExpressionEvaluator, ExpressionJob, ExpressionResult, RunContext } from '../../core/ports.js';
import type { Config, ConfigQuery, ResolvedStore, SetListOptions, StoreResolver } from '../../core/ports.js';
import type { ServerMetrics } from './metrics.js';
import { inSpan, type Context, type Tracer } from './tracing.js';

/** What the engine is given to evaluate one pipeline. */
export interface Engine {
  stores: StoreResolver;
  expressions?: ExpressionEvaluator;
  /** A span per command (sampled requests only). */
  observer?: EngineObserver;
}

const now = (): number => performance.now();

/**
 * The engine of one sampled evaluation: store reads and sandbox jobs as spans under the running command's span (or
 * `root`, outside any command: the engine starts every store read before the first command), a span per command.
 * The engine runs a pipeline's commands one after the other, so "the running command" is one value.
 */
export function tracedRun(tracer: Tracer, root: Context, stores: StoreResolver, evaluator: ExpressionEvaluator | undefined): Engine {
  let current = root;
  const observer: EngineObserver = {
    command<T>(info: CommandInfo, run: () => Promise<T>): Promise<T> {
      const attributes = { 'cfgu.command.index': info.index, 'cfgu.command.keys': info.keys, ...(info.store !== undefined ? { 'cfgu.store.name': info.store } : {}) };
      return inSpan(tracer, 'cfgu.command', attributes, root, (span) => {
        current = trace.setSpan(root, span);
        return run().finally(() => {
          current = root;
        });
      });
    },
  };
  const traced: StoreResolver = {
    names: () => stores.names(),
    resolve(name) {
      const store = stores.resolve(name);
      const attributes = { 'cfgu.store.name': store.name, 'cfgu.store.type': store.type };
      return {
        name: store.name,
        type: store.type,
        read: (queries) =>
          inSpan(tracer, 'cfgu.store.read', { ...attributes, 'cfgu.store.queries': queries.length }, current, (span) =>
            store.read(queries).then((answer) => {
              span.setAttribute('cfgu.store.from_backup', answer.fromBackup);
              return answer;
            }),
          ),
        write: (configs) => inSpan(tracer, 'cfgu.store.write', { ...attributes, 'cfgu.store.configs': configs.length }, current, () => store.write(configs)),
        ...(store.list ? { list: (prefix: string, options?: SetListOptions) => inSpan(tracer, 'cfgu.store.list', attributes, current, () => store.list!(prefix, options)) } : {}),
        ...(store.watch ? { watch: store.watch.bind(store) } : {}),
      };
    },
  };
  const engine: Engine = { stores: traced, observer };
  if (evaluator) {
    engine.expressions = {
      run: (job, ctx) =>
        inSpan(tracer, 'cfgu.sandbox.job', { 'cfgu.sandbox.consts': job.consts.length, 'cfgu.sandbox.checks': expressionsOf(job) - job.consts.length }, current, (span) =>
          evaluator.run(job, ctx).then((result) => {
            let failed = 0;
            for (const o of result.consts) if (!o.ok) failed++;
            for (const o of result.tests) if (!o.ok) failed++;
            span.setAttribute('cfgu.sandbox.failed', failed);
            return result;
          }),
        ),
      renderTemplate: (template, ctx) => evaluator.renderTemplate(template, ctx),
      evaluateBoolean: (expression, ctx) => evaluator.evaluateBoolean(expression, ctx),
      renderTrusted: (template, variables) => evaluator.renderTrusted(template, variables),
      close: () => evaluator.close(),
    };
  }
  return engine;
}

const expressionsOf = (job: ExpressionJob): number => {
  let n = job.consts.length;
  for (const t of job.tests) n += t.expressions.length;
  return n;
};

/** Each resolved store wrapped once (by identity): reads and writes timed and counted. */
export function observeStores(stores: StoreResolver, metrics: ServerMetrics | undefined): StoreResolver {
  if (!metrics) return stores;
  const wrapped = new Map<ResolvedStore, ResolvedStore>();
  const wrap = (store: ResolvedStore): ResolvedStore => {
    const record = metrics.store(store.name);
    return {
      name: store.name,
      type: store.type,
      read: async (queries: readonly ConfigQuery[]) => {
        const started = now();
        try {
          const answer = await store.read(queries);
          record('read', answer.fromBackup ? 'backup' : 'ok', (now() - started) / 1000);
          return answer;
        } catch (e) {
          record('read', 'error', (now() - started) / 1000);
          throw e;
        }
      },
      write: async (configs: readonly Config[]) => {
        const started = now();
        try {
          await store.write(configs);
          record('write', 'ok', (now() - started) / 1000);
        } catch (e) {
          record('write', 'error', (now() - started) / 1000);
          throw e;
        }
      },
      ...(store.list ? { list: store.list.bind(store) } : {}),
      ...(store.watch ? { watch: store.watch.bind(store) } : {}),
    };
  };
  return {
    names: () => stores.names(),
    resolve(name) {
      const store = stores.resolve(name);
      let w = wrapped.get(store);
      if (!w) {
        w = wrap(store);
        wrapped.set(store, w);
      }
      return w;
    },
  };
}

/** The sandbox with its jobs timed and counted; everything else passes through. */
export function observeEvaluator(evaluator: ExpressionEvaluator, metrics: ServerMetrics | undefined): ExpressionEvaluator {
  if (!metrics) return evaluator;
  const record = (job: ExpressionJob, result: ExpressionResult | undefined, started: number) => {
    let time = 0;
    let memory = 0;
    if (result) {
      for (const o of result.consts) if (!o.ok) o.kind === 'time-limit' ? time++ : o.kind === 'memory-limit' && memory++;
      for (const o of result.tests) if (!o.ok) o.kind === 'time-limit' ? time++ : o.kind === 'memory-limit' && memory++;
    }
    metrics.sandboxJob((now() - started) / 1000, expressionsOf(job), time, memory);
  };
  return {
    run: async (job: ExpressionJob, ctx: RunContext | undefined) => {
      const started = now();
      let result: ExpressionResult | undefined;
      try {
        result = await evaluator.run(job, ctx);
        return result;
      } finally {
        record(job, result, started);
      }
    },
    renderTemplate: (template, ctx) => evaluator.renderTemplate(template, ctx),
    evaluateBoolean: (expression, ctx) => evaluator.evaluateBoolean(expression, ctx),
    renderTrusted: (template, variables) => evaluator.renderTrusted(template, variables),
    close: () => evaluator.close(),
  };
}
