/**
 * The proxy server's public surface.
 *
 *   const app = await buildServer({ registry, evaluator, settings: settingsWith({ auth: { enabled: false } }), ready: true });
 *   const res = await app.inject({ method: 'POST', url: '/export', payload: [...] });
 */
export { buildServer, type BuildServerOptions } from './app.js';
export { Lifecycle, type LifecycleState } from './lifecycle.js';
export {
  resolveSettings,
  settingsWith,
  DEFAULT_SETTINGS,
  SETTINGS_ENV_VARS,
  type ServerSettings,
  type SettingsFlags,
  type SettingsOverrides,
} from './settings.js';
export { toProblem, PROBLEM_CONTENT_TYPE, PROBLEM_TYPES, type Problem } from './problem.js';
export { createKeyChecker } from './auth.js';
export { createLogger } from './logger.js';
