/**
 * The proxy server's public surface.
 *
 *   const app = await buildServer({ registry, evaluator, settings: settingsWith({ auth: { enabled: false } }), ready: true });
 *   const res = await app.inject({ method: 'POST', url: '/export', payload: [...] });
 */
export { buildServer, type BuildServerOptions } from './http/app.js';
export { Lifecycle, type LifecycleState } from './process/lifecycle.js';
export {
  resolveSettings,
  settingsWith,
  DEFAULT_SETTINGS,
  SETTINGS_ENV_VARS,
  type ServerSettings,
  type SettingsFlags,
  type SettingsOverrides,
} from './process/settings.js';
export { toProblem, PROBLEM_CONTENT_TYPE, PROBLEM_TYPES, type Problem } from './http/problem.js';
export { createKeyChecker } from './access/credentials.js';
export { createLogger } from './observe/logger.js';
