/**
 * Loading `.configu`: read, render with the environment, parse (YAML, which accepts JSON), validate (compiled Ajv
 * schema plus the rules a schema cannot say), normalise store types, resolve relative paths against the file's
 * folder, parse each store's settings for its kind (once: the store definitions carry them, typed, to the stores'
 * constructors). Every problem is one ConfigurationError whose message names the file and the property.
 */
import { Ajv, type ErrorObject } from 'ajv';
import { readFile } from 'node:fs/promises';
import { homedir } from 'node:os';
import { dirname, isAbsolute, join, resolve } from 'node:path';
import { ConfigurationError } from '../core/errors.js';
import { defineStore, type StoreDefinition } from '../stores/factory.js';
import { normaliseStoreType, STORE_TYPES } from '../stores/normalise.js';
import { NO_CONFIG_FILE, findConfigFile } from './find.js';
import { parseYaml } from './yaml.js';
import { renderVariables, type TemplateRenderer } from './render.js';
import { unknownPropertyMessage } from '../core/suggest.js';
import type { LoadedConfiguration } from './types.js';

export interface LoadConfigurationOptions {
  /** Path of the file; found with findConfigFile when omitted. */
  file?: string | undefined;
  /** Environment (template context, CONFIGU_CONFIG, XDG_CACHE_HOME, HOME). Default process.env. */
  env?: Record<string, string | undefined>;
  cwd?: string;
  /** Template renderer (the sandbox's `renderTrusted`); default: bare variable names only. */
  render?: TemplateRenderer | undefined;
}

const TOP_LEVEL = ['$schema', 'stores', 'backup', 'schemas', 'scripts', 'register', 'interface'] as const;
const STORE_PROPS = ['type', 'configuration', 'default', 'backup', 'readOnly'] as const;

/** The JSON shape of a `.configu` file (this project's own schema: the tests check it against the meta-schema). */
export const SCHEMA = {
  type: 'object',
  properties: {
    $schema: { type: 'string' },
    stores: {
      type: 'object',
      propertyNames: { minLength: 1 },
      additionalProperties: {
        type: 'object',
        properties: {
          type: { type: 'string', minLength: 1 },
          configuration: { type: 'object' },
          default: { type: 'boolean' },
          backup: { type: 'boolean' },
          readOnly: { type: 'boolean' },
        },
        required: ['type'],
        additionalProperties: false,
      },
    },
    backup: { type: 'string', minLength: 1 },
    schemas: { type: 'object', additionalProperties: { type: 'string', minLength: 1 } },
    scripts: { type: 'object', additionalProperties: { type: 'string' } },
    // Configu's own tools load store modules from these paths or URLs; cfgu never loads code from .configu.
    register: { type: 'array', items: { type: 'string', minLength: 1 } },
    interface: { type: 'object' },
  },
  additionalProperties: false,
} as const;

let compiled: ReturnType<Ajv['compile']> | undefined;
function validator() {
  // `validateSchema: false`: SCHEMA is this project's own (test/config/load.test.ts checks it against the
  // meta-schema); checking it here would compile the meta-schema at every start, about 60 ms of CPU.
  if (!compiled) compiled = new Ajv({ allErrors: true, strict: true, validateSchema: false }).compile(SCHEMA);
  return compiled;
}

/** `/stores/a.b/type` -> `stores["a.b"].type`; plain names stay dotted. */
function propertyPath(instancePath: string, extra?: string): string {
  const segments = instancePath
    .split('/')
    .slice(1)
    .map((s) => s.replace(/~1/g, '/').replace(/~0/g, '~'));
  if (extra !== undefined) segments.push(extra);
  let out = '';
  for (const s of segments) {
    if (/^[A-Za-z_$][A-Za-z0-9_$-]*$/.test(s)) out += out ? `.${s}` : s;
    else out += `[${JSON.stringify(s)}]`;
  }
  return out || '(top level)';
}

const TYPE_NAMES: Record<string, string> = {
  object: 'a mapping (object)',
  string: 'a string',
  boolean: 'a boolean (true or false)',
  number: 'a number',
  array: 'a list',
};

const describe = (v: unknown): string =>
  v === null ? 'null' : Array.isArray(v) ? 'a list' : typeof v === 'object' ? 'a mapping' : `${typeof v} ${JSON.stringify(v).slice(0, 40)}`;

function valueAt(data: unknown, instancePath: string): unknown {
  let v = data;
  for (const s of instancePath.split('/').slice(1)) {
    const key = s.replace(/~1/g, '/').replace(/~0/g, '~');
    v = v && typeof v === 'object' ? (v as Record<string, unknown>)[key] : undefined;
  }
  return v;
}

/** One readable message (and property path) for the most useful Ajv error. */
function explain(errors: ErrorObject[], data: unknown): { message: string; property: string } {
  const rank = (e: ErrorObject) =>
    e.keyword === 'additionalProperties' ? 0 : e.keyword === 'required' ? 1 : e.keyword === 'type' ? 2 : 3;
  const e = [...errors].sort((a, b) => rank(a) - rank(b) || a.instancePath.length - b.instancePath.length)[0]!;
  switch (e.keyword) {
    case 'additionalProperties': {
      const extra = String((e.params as { additionalProperty: string }).additionalProperty);
      const property = propertyPath(e.instancePath, extra);
      const known = e.instancePath === '' ? TOP_LEVEL : STORE_PROPS;
      return { property, message: unknownPropertyMessage(property, extra, known) };
    }
    case 'required': {
      const missing = String((e.params as { missingProperty: string }).missingProperty);
      const property = propertyPath(e.instancePath, missing);
      return { property, message: `${property} is required` };
    }
    case 'type': {
      const property = propertyPath(e.instancePath);
      const expected = String((e.params as { type: string }).type);
      return {
        property,
        message: `${property} must be ${TYPE_NAMES[expected] ?? expected}, not ${describe(valueAt(data, e.instancePath))}`,
      };
    }
    case 'minLength': {
      const property = propertyPath(e.instancePath);
      return { property, message: `${property} must not be empty` };
    }
    case 'propertyNames': {
      const property = propertyPath(e.instancePath);
      return { property, message: `${property} has an empty store name` };
    }
    default: {
      const property = propertyPath(e.instancePath);
      return { property, message: `${property} ${e.message ?? 'is invalid'}` };
    }
  }
}

function expandHome(p: string, env: Record<string, string | undefined>): string {
  if (p === '~' || p.startsWith('~/')) return join(env.HOME || homedir(), p.slice(1));
  return p;
}

/** The default backup database: `$XDG_CACHE_HOME/configu/config.db`, else `~/.cache/configu/config.db`. */
export function defaultBackupPath(env: Record<string, string | undefined> = process.env): string {
  const cache = env.XDG_CACHE_HOME && isAbsolute(env.XDG_CACHE_HOME) ? env.XDG_CACHE_HOME : join(env.HOME || homedir(), '.cache');
  return join(cache, 'configu', 'config.db');
}

/** Store settings that are file paths, by normalised type. */
const PATH_SETTINGS: Record<string, string[]> = { 'json-file': ['path'], sqlite: ['database'] };

function resolvePathSetting(value: unknown, folder: string, env: Record<string, string | undefined>): unknown {
  if (typeof value !== 'string' || value === '' || value === ':memory:' || value.startsWith('file:')) return value;
  return resolve(folder, expandHome(value, env));
}

/** The file's text, rendered with the environment (an unreadable file or a failed render: `fail`). */
async function readRendered(
  file: string,
  env: Record<string, string | undefined>,
  render: NonNullable<LoadConfigurationOptions['render']>,
  fail: (message: string, property?: string) => never,
): Promise<string> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    const reason =
      code === 'ENOENT' ? 'no such file' : code === 'EACCES' || code === 'EPERM' ? 'permission denied' : code === 'EISDIR' ? 'is a folder, not a file' : code ?? 'unreadable';
    return fail(`cannot read the file: ${reason}`);
  }

  // Render with the environment before parsing.
  const variables: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(env)) if (v !== undefined) variables[k] = v;
  try {
    const rendered = await render(text, variables);
    text = typeof rendered === 'string' ? rendered : rendered === undefined || rendered === null ? '' : String(rendered);
  } catch (e) {
    const reason = e instanceof Error ? e.message.split('\n')[0] : String(e);
    return fail(`cannot render the file with the environment: ${reason}`);
  }
  return text;
}

/** Each declared store's definition, its settings parsed once (nothing is built or connected). */
function storeDefinitions(
  root: Record<string, unknown>,
  folder: string,
  env: Record<string, string | undefined>,
  register: string[],
  fail: (message: string, property?: string) => never,
): StoreDefinition[] {
  const stores: StoreDefinition[] = [];
  const declared = (root.stores ?? {}) as Record<string, { type: string; configuration?: Record<string, unknown>; default?: boolean; backup?: boolean; readOnly?: boolean }>;
  for (const [name, def] of Object.entries(declared)) {
    const property = propertyPath(`/stores/${name.replace(/~/g, '~0').replace(/\//g, '~1')}/type`);
    const type = normaliseStoreType(def.type);
    if (!type) {
      // With modules under `register`, the kind most likely comes from one of them: say why it cannot be had here.
      const why = register.length ? ' (it may come from a module under `register`, which cfgu does not load)' : '';
      return fail(`${property}: unknown store type "${def.type}"${why}; known types: ${STORE_TYPES.join(', ')}`, property);
    }
    const configuration: Record<string, unknown> = { ...(def.configuration ?? {}) };
    for (const setting of PATH_SETTINGS[type] ?? []) {
      if (setting in configuration) configuration[setting] = resolvePathSetting(configuration[setting], folder, env);
    }
    // Parse the store's settings now, once (nothing is built or connected): a bad setting is a start-up error, not a
    // request error, and the stores are later built from the parsed settings.
    const base = propertyPath(`/stores/${name.replace(/~/g, '~0').replace(/\//g, '~1')}/configuration`);
    try {
      const readOnly = def.readOnly === true ? { readOnly: true } : {};
      stores.push(defineStore({ name, type, configuration, default: def.default === true, backup: def.backup === true, ...readOnly }, base));
    } catch (e) {
      if (e instanceof ConfigurationError) return fail(e.message, e.property);
      throw e;
    }
  }
  return stores;
}

/** Read, render, parse and validate a `.configu`. Throws ConfigurationError naming the file and the property. */
export async function loadConfiguration(options: LoadConfigurationOptions = {}): Promise<LoadedConfiguration> {
  const env = options.env ?? process.env;
  const cwd = resolve(options.cwd ?? process.cwd());
  const file = options.file ? resolve(cwd, options.file) : findConfigFile({ env, cwd });
  if (!file) {
    throw new ConfigurationError(
      NO_CONFIG_FILE,
      undefined,
      undefined,
    );
  }
  const fail = (message: string, property?: string): never => {
    throw new ConfigurationError(`${file}: ${message}`, file, property);
  };

  const text = await readRendered(file, env, options.render ?? renderVariables, fail);

  const parsed = parseYaml(text, 100);
  if (!parsed.ok) {
    const { line, column, message } = parsed.problem;
    return fail(`invalid YAML/JSON${line ? ` at line ${line}, column ${column}` : ''}: ${message}`);
  }
  let data = parsed.value;
  if (data === null || data === undefined) data = {};
  if (typeof data !== 'object' || Array.isArray(data)) {
    return fail(`the file must hold a mapping (object) with ${TOP_LEVEL.filter((p) => p !== '$schema').join(', ')}; found ${describe(data)}`);
  }
  const root = data as Record<string, unknown>;

  if (Object.prototype.hasOwnProperty.call(root, 'cache')) {
    return fail('property "cache" was renamed `backup` in v1: rename it to "backup"', 'cache');
  }
  const validate = validator();
  if (!validate(root)) {
    const { message, property } = explain(validate.errors ?? [], root);
    return fail(message, property);
  }

  const folder = dirname(file);
  const register = (root.register ?? []) as string[];
  const notices: string[] = [];
  if (register.length) {
    notices.push(
      `register: ${register.length} store module${register.length === 1 ? '' : 's'} ignored (${register.map((r) => JSON.stringify(r.slice(0, 200))).join(', ')}): ` +
        'cfgu never loads code named in .configu; its stores are built in',
    );
  }
  const stores = storeDefinitions(root, folder, env, register, fail);

  const defaults = stores.filter((s) => s.default);
  if (defaults.length > 1) {
    const names = defaults.map((s) => `"${s.name}"`);
    const list = names.length === 2 ? `${names[0]} and ${names[1]}` : `${names.slice(0, -1).join(', ')} and ${names.at(-1)}`;
    const verb = names.length === 2 ? 'both have' : 'all have';
    return fail(`stores ${list} ${verb} default: true; only one store can be the default`, 'stores');
  }
  const defaultStore = stores.length === 1 ? stores[0]!.name : defaults[0]?.name;

  const backup = typeof root.backup === 'string' ? resolve(folder, expandHome(root.backup, env)) : defaultBackupPath(env);
  const schemas: Record<string, string> = {};
  for (const [name, p] of Object.entries((root.schemas ?? {}) as Record<string, string>)) {
    schemas[name] = /^[a-z][a-z0-9+.-]*:\/\//i.test(p) ? p : resolve(folder, expandHome(p, env));
  }
  const scripts = { ...((root.scripts ?? {}) as Record<string, string>) };
  const iface = { ...((root.interface ?? {}) as Record<string, unknown>) };

  return { file, stores, defaultStore, backup, schemas, scripts, interface: iface, ...(notices.length ? { notices } : {}) };
}
