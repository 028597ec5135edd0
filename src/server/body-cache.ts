/**
 * Parsed request bodies by their exact text. Clients of a configuration proxy send the same pipeline again and again;
 * parsing a large body (a 1,000-key schema is ~40 KB) is one of the biggest costs of a request. The text -> value
 * mapping never goes stale, so the only rule needed is a bound: total text size (default 4 MiB), least recently used
 * evicted first. Cached values are deep-frozen (core/frozen.ts), so no request can change what another one sees, and
 * the engine may cache what it derives from them by identity.
 */
import { freezeDeep } from '../core/frozen.js';

export class BodyCache {
  private readonly entries = new Map<string, unknown>();
  private bytes = 0;

  constructor(
    private readonly maxBytes = 4 * 1024 * 1024,
    /** Bodies smaller than this are cheap to parse and not worth a slot. */
    private readonly minBytes = 256,
  ) {}

  get(text: string): unknown {
    const value = this.entries.get(text);
    if (value === undefined) return undefined;
    this.entries.delete(text);
    this.entries.set(text, value);
    return value;
  }

  /** Freeze and keep a freshly parsed body; returns the (frozen) value. */
  add(text: string, value: unknown): unknown {
    if (value === null || typeof value !== 'object') return value;
    freezeDeep(value);
    if (text.length < this.minBytes || text.length > this.maxBytes / 4) return value;
    this.entries.set(text, value);
    this.bytes += text.length;
    while (this.bytes > this.maxBytes) {
      const oldest = this.entries.keys().next().value!;
      this.entries.delete(oldest);
      this.bytes -= oldest.length;
    }
    return value;
  }

  get size(): number {
    return this.entries.size;
  }
}
