/**
 * Per-subject rate limits on POST /export (@fastify/rate-limit), off by default. Each budget is keyed by the kind of
 * credential and its identity (`credential:<name>`, `jwt:<sub>`, `preshared:<n>`), or the client address without
 * authentication (`ip:<address>`), so two kinds never share one. Counters live in the process, or in Redis when
 * replicas must share them. Over the limit: 429 problem+json with `Retry-After`.
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import rateLimit from '@fastify/rate-limit';
import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import { RateLimitedError } from '../../core/index.js';
import { redisDriver } from '../../stores/drivers.js';
import type { RateLimitSettings } from './access-settings.js';
import type { Principal } from './scopes.js';

/**
 * The key of a request's budget: the principal's kind and subject, else the client address. A JWT `sub` and a
 * credential's name may be the same text; their kinds keep their budgets apart.
 */
export function budgetKey(principal: Principal | null, ip: string): string {
  if (!principal || principal.kind === 'anonymous' || principal.subject === null) return `ip:${ip}`;
  // A preshared key's subject is already `preshared:<n>`.
  return principal.kind === 'preshared' ? principal.subject : `${principal.kind}:${principal.subject}`;
}

/** The route option that turns the limit on for a route (`config: rateLimitRouteConfig(...)`). */
export const rateLimitRouteConfig = (settings: RateLimitSettings) => (settings.enabled ? { rateLimit: {} } : {});

export async function registerRateLimit(
  app: FastifyInstance,
  settings: RateLimitSettings,
  subjectOf: (request: FastifyRequest) => string,
  logger: Logger | false,
): Promise<void> {
  if (!settings.enabled) return;
  let redis: Redis | undefined;
  if (settings.redisUrl) {
    // Fail fast instead of queueing while Redis is away: the limit is skipped (and logged), the request served.
    redis = new (redisDriver().Redis)(settings.redisUrl, { maxRetriesPerRequest: 1, enableOfflineQueue: false, connectTimeout: 2000, lazyConnect: false });
    redis.on('error', (e: Error) => {
      if (logger) logger.warn({ err: { type: e.name, message: e.message } }, 'rate-limit store (Redis) error; limits are not enforced meanwhile');
    });
    app.addHook('onClose', async () => {
      redis!.disconnect();
    });
    // Start with the connection up when Redis is there (so the first requests count); never wait beyond the
    // connect timeout: without Redis the server starts, unlimited, and says so in the log.
    await new Promise<void>((resolve) => {
      redis!.once('ready', () => resolve());
      redis!.once('error', () => resolve());
    });
  }
  await app.register(rateLimit, {
    global: false,
    max: settings.max,
    timeWindow: settings.windowSeconds * 1000,
    hook: 'onRequest',
    keyGenerator: subjectOf,
    ...(redis ? { redis, nameSpace: settings.redisPrefix, skipOnError: true } : {}),
    errorResponseBuilder: (_request, context) => {
      const error = new RateLimitedError(settings.max, settings.windowSeconds, Math.max(1, Math.ceil(context.ttl / 1000)));
      return Object.assign(error, { statusCode: 429 });
    },
  });
}
