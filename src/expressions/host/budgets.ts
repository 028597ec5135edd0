/**
 * The budgets of one request (RunContext.usage): the CPU time of all its jobs (SandboxOptions.requestCpuMs) and the
 * sandboxes they may kill or make renew (SandboxOptions.requestRestarts). The job that takes a request over a budget
 * keeps its answer (its own limit already bounded it); every later job of the request fails at once: the pool checks
 * `usage.exceeded` when a job is submitted and again when it leaves the queue.
 */
import { BudgetExceededError } from '../../core/errors.js';
import type { RequestUsage } from '../../core/ports.js';

export class RequestBudgets {
  constructor(
    private readonly cpuMs: number,
    private readonly restarts: number,
  ) {}

  /** Add a job's CPU time to its request. */
  chargeCpu(usage: RequestUsage | undefined, cpuMs: number): void {
    if (!usage) return;
    usage.cpuMs += cpuMs;
    if (!usage.exceeded && usage.cpuMs > this.cpuMs) {
      usage.exceeded = new BudgetExceededError('cpu-budget', `the request's expressions used more than its CPU-time budget of ${this.cpuMs} ms`);
    }
  }

  /** Count a sandbox (isolate or child) that a job of the request killed or made renew. */
  chargeRestart(usage: RequestUsage | undefined): void {
    if (!usage) return;
    usage.restarts++;
    if (!usage.exceeded && usage.restarts > this.restarts) {
      usage.exceeded = new BudgetExceededError(
        'restart-budget',
        `the request's expressions caused more than ${this.restarts} sandbox restarts (its budget)`,
      );
    }
  }
}
