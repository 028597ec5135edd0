/**
 * The server's readiness state and its count of requests in flight.
 *   starting --markReady()--> ready --beginShutdown()--> stopping
 * `GET /ready` answers 200 only in `ready`. Shutdown is one-way: once stopping, markReady() does nothing.
 */
export type LifecycleState = 'starting' | 'ready' | 'stopping';

export class Lifecycle {
  #state: LifecycleState = 'starting';
  #inflight = 0;
  #idleWaiters: Array<() => void> = [];
  #stoppingListeners: Array<() => void> = [];

  get state(): LifecycleState {
    return this.#state;
  }
  get ready(): boolean {
    return this.#state === 'ready';
  }
  get stopping(): boolean {
    return this.#state === 'stopping';
  }
  get inflight(): number {
    return this.#inflight;
  }

  markReady(): void {
    if (this.#state === 'starting') this.#state = 'ready';
  }

  /** Returns false when shutdown had already begun. */
  beginShutdown(): boolean {
    if (this.#state === 'stopping') return false;
    this.#state = 'stopping';
    // Readiness is already 503 when the listeners run (watch streams end, long polls answer).
    const listeners = this.#stoppingListeners;
    this.#stoppingListeners = [];
    for (const l of listeners) l();
    return true;
  }

  /** Call `listener` once shutdown begins (at once when it already has). */
  onStopping(listener: () => void): void {
    if (this.#state === 'stopping') listener();
    else this.#stoppingListeners.push(listener);
  }

  requestStarted(): void {
    this.#inflight++;
  }

  requestEnded(): void {
    if (this.#inflight > 0) this.#inflight--;
    if (this.#inflight === 0 && this.#idleWaiters.length) {
      const waiters = this.#idleWaiters;
      this.#idleWaiters = [];
      for (const w of waiters) w();
    }
  }

  /** Resolves once no request is in flight, or after `maxMs`; true when idle. */
  whenIdle(maxMs: number): Promise<boolean> {
    if (this.#inflight === 0) return Promise.resolve(true);
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.#idleWaiters = this.#idleWaiters.filter((w) => w !== done);
        resolve(this.#inflight === 0);
      }, maxMs);
      timer.unref?.();
      const done = () => {
        clearTimeout(timer);
        resolve(true);
      };
      this.#idleWaiters.push(done);
    });
  }
}
