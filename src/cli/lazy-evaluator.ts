/**
 * The expression sandbox of a command, started lazily: only when a schema, a `.configu` template, a `--filter` or a
 * `--template` needs it.
 */
import { SandboxUnavailableError } from '../core/index.js';
import { onlyVariableNames, renderVariables } from '../config/render.js';
import { createSandboxEvaluator, expressionOptionsFromEnv } from '../expressions/index.js';
import type { ExpressionEvaluator, ExpressionJob, ExpressionResult } from '../core/ports.js';

export type TrustedEvaluator = ExpressionEvaluator & { renderTrusted?: (template: string, vars: Record<string, unknown>) => unknown };

/** The expression sandbox, started on first use only (spawn, isolate, bundle and seal: ~0.4 s on an idle 2-core machine, ~0.5 s of CPU). */
export class LazyEvaluator implements ExpressionEvaluator {
  private started: Promise<TrustedEvaluator> | undefined;
  constructor(
    private readonly env: NodeJS.ProcessEnv,
    private readonly progress: <T>(label: string, step: () => Promise<T>) => Promise<T>,
    /** A sandbox owned by the caller: used as it is, never closed here. */
    private readonly shared?: TrustedEvaluator,
  ) {}

  get isStarted(): boolean {
    return this.started !== undefined;
  }

  private sandbox(): Promise<TrustedEvaluator> {
    if (this.shared) return (this.started ??= Promise.resolve(this.shared));
    // One command line evaluates one thing at a time: one sandbox process is enough, and no warm spare (a command
    // that lives seconds would start a second process, ~0.5 s of CPU, for a child that almost never dies; one that
    // does is replaced). The environment's CONFIGU_EXPRESSION_* settings still apply.
    this.started ??= Promise.resolve().then(
      async () => (await createSandboxEvaluator({ workers: 1, spares: 0, ...expressionOptionsFromEnv(this.env) })) as TrustedEvaluator,
    );
    return this.started;
  }

  /** Start the sandbox now, without waiting (it takes a moment; overlap it with other work). */
  warm(): void {
    this.sandbox().catch(() => undefined);
  }

  async run(job: ExpressionJob): Promise<ExpressionResult> {
    const s = await this.progress('starting the expression sandbox', () => this.sandbox());
    return s.run(job);
  }

  async renderTemplate(template: string, context: unknown): Promise<string> {
    return (await this.sandbox()).renderTemplate(template, context);
  }

  async evaluateBoolean(expression: string, context: unknown): Promise<boolean> {
    return (await this.sandbox()).evaluateBoolean(expression, context);
  }

  /** Render a trusted template (`.configu`): bare variable names on the host, anything else in the sandbox. */
  async renderTrusted(template: string, vars: Record<string, unknown>): Promise<string> {
    if (onlyVariableNames(template)) return renderVariables(template, vars);
    const s = await this.sandbox();
    if (!s.renderTrusted) throw new SandboxUnavailableError('the expression sandbox cannot render trusted templates');
    return String(await s.renderTrusted(template, vars));
  }

  async close(): Promise<void> {
    if (!this.started || this.shared) return;
    const s = await this.started.catch(() => undefined);
    await s?.close();
  }
}
