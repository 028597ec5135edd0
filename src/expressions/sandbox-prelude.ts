/**
 * Runs first inside the isolate, before any library module: minimal stand-ins for the web globals the bundled
 * libraries touch at load time. Chai 6 creates `new EventTarget()` and subclasses `Event` for its plugin events; the
 * stand-in below keeps no listeners once the sandbox is sealed, so it can never carry state from one job to the next.
 */

const state = { sealed: false };

class SandboxEvent {
  readonly type: string;
  constructor(type: string) {
    this.type = String(type);
  }
}

class SandboxEventTarget {
  addEventListener(): void {
    if (state.sealed) throw new TypeError('event listeners are not available in the sandbox');
  }
  removeEventListener(): void {}
  dispatchEvent(): boolean {
    return true;
  }
}

const g = globalThis as Record<string, unknown>;
if (typeof g.EventTarget !== 'function') g.EventTarget = SandboxEventTarget;
if (typeof g.Event !== 'function') g.Event = SandboxEvent;

/** Called by the runtime when it seals the sandbox. */
export function sealPrelude(): void {
  state.sealed = true;
}
