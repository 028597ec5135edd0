/**
 * Authentication on the request path: the app's credentials (an authenticator the credentials' reload replaces), and
 * the onRequest hook that sets `request.cfguPrincipal` or answers 401. It runs after the request basics
 * (../http/request-basics.ts) and before the body is read, so a request without a valid credential is refused
 * before its body is parsed. Open without a credential: `/live`, `/ready`, a route served with its own key
 * (`/metrics` with a metrics key), CORS preflights, the docs when `docs.public` says so, and the console's files
 * (`/console`, `/console/`, `/console/assets/...`, when `console.enabled`: they hold no data; the page sends a token
 * with each of its API calls).
 */
import fp from 'fastify-plugin';
import { ConfigurationError } from '../../core/errors.js';
import { PROBLEM_CONTENT_TYPE, unauthorizedReply } from '../http/problem.js';
import { pathOf } from '../http/request-basics.js';
import { isConsolePath } from '../http/routes/console.js';
import type { ServerSettings } from '../process/settings.js';
import { createAuthenticator, type AuthResult } from './credentials.js';
import type { KeyLabels } from './key-labels.js';
import type { AuthenticatorHolder } from './watch-credentials.js';

/** The 401 (the error catalogue's row): the same body and headers for every refusal, whatever the reason. */
const DENIED = unauthorizedReply();
export const UNAUTHORIZED = JSON.stringify(DENIED.problem);

/** The app's credentials: the current authenticator (streams and long polls re-check through it) and its reload. */
export interface Credentials {
  holder: AuthenticatorHolder;
  /** See `app.cfgu.replaceCredentials` (../http/request-state.ts). */
  replace(next: ServerSettings['auth'], nextLabels?: KeyLabels): void;
  /** The same credentials judged by a new label table (a named schema changed). */
  relabel(nextLabels: KeyLabels): void;
}

/** `recheck` is called after each reload (the watch hub checks every watcher again). */
export function createCredentials(settings: ServerSettings, keyLabels: KeyLabels | undefined, recheck: () => void): Credentials {
  const holder: AuthenticatorHolder = { authenticator: createAuthenticator(settings, keyLabels), jwtClockSkewSeconds: settings.auth.jwt?.clockSkewSeconds ?? 0 };
  let labels = keyLabels;
  let auth = settings.auth;
  const replace = (next: ServerSettings['auth'], nextLabels: KeyLabels | undefined = labels): void => {
    if (!settings.auth.enabled || !next.enabled) throw new ConfigurationError('authentication can be turned on or off only by a restart', undefined, 'auth.enabled');
    holder.authenticator = createAuthenticator({ ...settings, auth: next }, nextLabels);
    labels = nextLabels;
    auth = next;
    holder.jwtClockSkewSeconds = next.jwt?.clockSkewSeconds ?? 0;
    recheck();
  };
  const relabel = (nextLabels: KeyLabels): void => {
    if (settings.auth.enabled) replace(auth, nextLabels);
  };
  return { holder, replace, relabel };
}

export interface AuthenticationOptions {
  holder: AuthenticatorHolder;
  settings: ServerSettings;
  /** True when `path` is served with its own key (the server's credentials do not apply to it). */
  ownKey(path: string): boolean;
}

/** The authentication hook; added only when authentication is on (a reload cannot turn it off or on). */
export const authentication = fp<AuthenticationOptions>(async (app, { holder, settings, ownKey }) => {
  if (!settings.auth.enabled) return;
  const docsOpen = settings.docs.public;
  const corsOn = settings.http.allowedOrigins.length > 0;
  const consoleOpen = settings.console.enabled;
  const isOpen = (method: string, path: string): boolean =>
    path === '/live' ||
    path === '/ready' ||
    ownKey(path) ||
    (corsOn && method === 'OPTIONS') ||
    (docsOpen && (path === '/openapi.json' || path === '/docs' || path.startsWith('/docs/'))) ||
    (consoleOpen && isConsolePath(path));

  app.addHook('onRequest', (request, reply, done) => {
    const authenticator = holder.authenticator;
    if (!authenticator || isOpen(request.method, pathOf(request.url))) return done();
    const finish = (result: AuthResult): void => {
      if ('principal' in result) {
        request.cfguPrincipal = result.principal;
        done();
        return;
      }
      // The reason is for the operator; the client gets the same answer whatever it was.
      request.cfguAuthFailure = result.reason;
      request.log[result.level ?? 'warn']({ reason: result.reason, ip: request.ip }, 'authentication failed');
      reply.code(401).headers(DENIED.headers).type(PROBLEM_CONTENT_TYPE).send(UNAUTHORIZED);
    };
    const result = authenticator.authenticate(request.headers.authorization);
    if (result instanceof Promise) {
      result.then(finish, (e: unknown) => finish({ reason: `verification failed (${(e as Error)?.name ?? 'error'})`, level: 'error' }));
    } else {
      finish(result);
    }
  });
});
