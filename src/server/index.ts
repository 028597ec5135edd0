/**
 * The proxy server's public surface.
 *
 *   const app = await buildServer({ registry, evaluator, settings: settingsWith({ auth: { enabled: false } }), ready: true });
 *   const res = await app.inject({ method: 'POST', url: '/export', payload: [...] });
 */
export { buildServer, type BuildServerOptions } from './http/app.js';
export { Lifecycle, type LifecycleState } from './process/lifecycle.js';
export { settingsWith, DEFAULT_SETTINGS, type ServerSettings, type SettingsOverrides } from './process/settings.js';
export { resolveSettings, SETTINGS_ENV_VARS, type SettingsFlags } from './process/resolve-settings.js';
export { toProblem, PROBLEM_CONTENT_TYPE, PROBLEM_TYPES, type Problem } from './http/problem.js';
export { createKeyChecker } from './access/credentials.js';
export { createLogger } from './observe/logger.js';
