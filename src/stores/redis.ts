/**
 * `redis` (ioredis): `url` (`redis://[user:password@]host:port[/db]`), or `host`, `port`, `username`, `password`,
 * `db`; `timeout` (ms, default 3000: connect and command timeout).
 *
 * Layout: see key-value.ts. A batch read is one MGET. A batch write is an optimistic transaction: WATCH the storage
 * keys, MGET them, compute the new values, MULTI/SET/DEL/EXEC; when another writer changed a watched key, EXEC aborts
 * and the write is retried (up to 20 times). Writes of one process are serialised (WATCH state is per connection).
 *
 * Commands never queue while the server is unreachable (`enableOfflineQueue: false`): they fail at once with
 * StoreUnavailableError, and the client keeps reconnecting in the background (back-off up to 2 s).
 */
import type { Redis, RedisOptions } from 'ioredis';
import { redisDriver } from './drivers.js';
import { StoreUnavailableError } from '../core/errors.js';
import { Mutex, unavailable, withTimeout, connectionSecrets } from './common.js';
import { applyKeyValueWrites, decodeKeyValue, storageKeys } from './key-value.js';
import type { Config, ConfigQuery, ConfigStore } from './types.js';

export interface RedisStoreOptions {
  url?: string;
  host?: string;
  port?: number;
  username?: string;
  password?: string;
  db?: number;
  timeoutMs?: number;
}

const MAX_WRITE_ATTEMPTS = 20;

export class RedisConfigStore implements ConfigStore {
  readonly type = 'redis';
  private client: Redis | undefined;
  private readonly writes = new Mutex();
  private readonly timeoutMs: number;

  constructor(
    readonly name: string,
    private readonly options: RedisStoreOptions,
  ) {
    this.timeoutMs = options.timeoutMs ?? 3000;
  }

  private secrets(): (string | undefined)[] {
    return connectionSecrets(this.options);
  }

  private makeClient(): Redis {
    const o = this.options;
    const common: RedisOptions = {
      lazyConnect: true,
      enableOfflineQueue: false,
      maxRetriesPerRequest: 1,
      connectTimeout: this.timeoutMs,
      commandTimeout: this.timeoutMs,
      retryStrategy: (times) => Math.min(100 * times, 2000),
      reconnectOnError: () => false,
    };
    if (o.username !== undefined) common.username = o.username;
    if (o.password !== undefined) common.password = o.password;
    if (o.db !== undefined) common.db = o.db;
    const client = o.url
      ? new (redisDriver().Redis)(o.url, common)
      : new (redisDriver().Redis)({ ...common, host: o.host ?? '127.0.0.1', port: o.port ?? 6379 });
    // Connection errors are reported per command; an unhandled 'error' event would only be noise.
    client.on('error', () => undefined);
    return client;
  }

  /** Make sure the client exists and has been asked to connect; wait for the first connection only. */
  private async ready(): Promise<Redis> {
    if (!this.client) this.client = this.makeClient();
    const c = this.client;
    if (c.status === 'wait' || c.status === 'end') {
      await withTimeout(c.connect(), this.timeoutMs + 500, 'redis connect');
    }
    return c;
  }

  private async guard<T>(fn: (c: Redis) => Promise<T>): Promise<T> {
    try {
      const c = await this.ready();
      if (c.status !== 'ready') throw new StoreUnavailableError(this.name, 'not connected (reconnecting)');
      return await withTimeout(fn(c), this.timeoutMs * 2 + 500, 'redis command');
    } catch (e) {
      throw unavailable(this.name, e, this.secrets());
    }
  }

  async init(): Promise<void> {
    try {
      // After a failed first connect the client reconnects in the background: only a live connection counts.
      if ((await this.ready()).status !== 'ready') throw new StoreUnavailableError(this.name, 'not connected (reconnecting)');
    } catch (e) {
      throw unavailable(this.name, e, this.secrets());
    }
  }

  async get(queries: readonly ConfigQuery[]): Promise<Config[]> {
    if (!queries.length) return [];
    const keys = storageKeys(queries);
    const values = await this.guard((c) => c.mget(...keys));
    const raw = new Map<string, string | undefined>();
    keys.forEach((k, i) => raw.set(k, values[i] ?? undefined));
    return decodeKeyValue(queries, raw);
  }

  async set(configs: readonly Config[]): Promise<void> {
    if (!configs.length) return;
    const keys = storageKeys(configs);
    await this.writes.run(() =>
      this.guard(async (c) => {
        for (let attempt = 0; attempt < MAX_WRITE_ATTEMPTS; attempt++) {
          await c.watch(...keys);
          let changes: Map<string, string | null>;
          try {
            const values = await c.mget(...keys);
            const current = new Map<string, string | undefined>();
            keys.forEach((k, i) => current.set(k, values[i] ?? undefined));
            changes = applyKeyValueWrites(configs, current);
          } catch (e) {
            await c.unwatch().catch(() => undefined);
            throw e;
          }
          if (!changes.size) {
            await c.unwatch();
            return;
          }
          const multi = c.multi();
          for (const [k, v] of changes) {
            if (v === null) multi.del(k);
            else multi.set(k, v);
          }
          const result = await multi.exec();
          if (result === null) continue; // a watched key changed: read again and retry
          const failed = result.find(([err]) => err);
          if (failed) throw failed[0];
          return;
        }
        throw new StoreUnavailableError(this.name, 'too many concurrent writers; try again', 1);
      }),
    );
  }

  async close(): Promise<void> {
    const c = this.client;
    this.client = undefined;
    if (!c) return;
    try {
      if (c.status === 'ready') await withTimeout(c.quit(), 1000, 'redis quit');
      else c.disconnect();
    } catch {
      c.disconnect();
    }
  }
}
