// Benchmark fixture: two JSON-file stores with a few hundred values over a three-level set hierarchy, written into
// bench/.tmp/ (ignored by git), and the request bodies of every workload with the answer each must give.
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

export const SETS = ['', 'prod', 'prod/eu'];

/** Values of the main store: 150 generic keys over the hierarchy, plus the named keys of the small workloads. */
function mainConfigs() {
  const configs = [];
  for (let i = 0; i < 150; i++) {
    configs.push({ set: '', key: `K${i}`, value: `root-${i}` });
    if (i % 2 === 0) configs.push({ set: 'prod', key: `K${i}`, value: `prod-${i}` });
    if (i % 3 === 0) configs.push({ set: 'prod/eu', key: `K${i}`, value: String(i * 10) });
  }
  configs.push(
    { set: '', key: 'HOST', value: 'localhost' },
    { set: 'prod', key: 'HOST', value: 'db.prod.internal' },
    { set: 'prod/eu', key: 'HOST', value: 'db.eu.prod.internal' },
    { set: '', key: 'PORT', value: '5432' },
    { set: 'prod', key: 'DB_USER', value: 'app' },
    { set: 'prod/eu', key: 'REGION', value: 'eu-west-1' },
    { set: '', key: 'TIMEOUT_MS', value: '3000' },
    { set: 'prod', key: 'FEATURES', value: '{"search":true,"beta":false}' },
    { set: 'prod', key: 'REPLICAS', value: '3' },
    { set: '', key: 'SERVICE', value: 'checkout' },
  );
  for (let i = 0; i < 1000; i++) configs.push({ set: SETS[i % 3], key: `BIG_${i}`, value: String(i) });
  return configs;
}

function secretConfigs() {
  return [
    { set: '', key: 'DB_PASSWORD', value: 'hunter2' },
    { set: 'prod', key: 'DB_PASSWORD', value: 'prod-pass' },
    { set: 'prod/eu', key: 'API_TOKEN', value: 'tok-eu' },
  ];
}

/** 10 keys: two tests, one const, one default, a three-level set. */
export const tenKeys = {
  body: [
    {
      store: 'main',
      set: 'prod/eu',
      schema: {
        keys: {
          HOST: { test: 'validator.isFQDN($.value) || $.value === "localhost"' },
          PORT: { test: 'Number.isInteger($.value) && $.value > 0' },
          DB_USER: {},
          DB_URL: { const: 'postgres://{{ $.configs.DB_USER.value }}@{{ $.configs.HOST.value }}:{{ $.configs.PORT.value }}/app' },
          REGION: {},
          LOG_LEVEL: { default: 'info' },
          TIMEOUT_MS: {},
          FEATURES: {},
          REPLICAS: {},
          SERVICE: {},
        },
      },
    },
  ],
  expected: {
    HOST: 'db.eu.prod.internal',
    PORT: 5432,
    DB_USER: 'app',
    DB_URL: 'postgres://app@db.eu.prod.internal:5432/app',
    REGION: 'eu-west-1',
    LOG_LEVEL: 'info',
    TIMEOUT_MS: 3000,
    FEATURES: { search: true, beta: false },
    REPLICAS: 3,
    SERVICE: 'checkout',
  },
};

/** 100 keys: 10 tests, 10 consts, 20 defaults (the rest read from the store). */
function hundredKeys() {
  const keys = {};
  const expected = {};
  for (let i = 0; i < 70; i++) {
    const key = `K${i}`;
    keys[key] = i < 10 ? { test: '$.value !== ""' } : {};
    expected[key] = i % 3 === 0 ? i * 10 : i % 2 === 0 ? `prod-${i}` : `root-${i}`;
  }
  for (let i = 0; i < 20; i++) {
    keys[`D${i}`] = { default: i % 2 ? `d${i}` : i };
    expected[`D${i}`] = i % 2 ? `d${i}` : i;
  }
  for (let i = 0; i < 10; i++) {
    keys[`C${i}`] = { const: `{{ $.configs.K${i + 1}.storedValue }}-{{ $.configs.D${i}.value }}` };
    expected[`C${i}`] = `${expected[`K${i + 1}`]}-${expected[`D${i}`]}`;
  }
  return { body: [{ store: 'main', set: 'prod/eu', schema: { keys } }], expected };
}

/** Three commands over two stores, piped. */
export const pipeline = {
  body: [
    { store: 'main', set: 'prod/eu', schema: { keys: { HOST: {}, PORT: {}, DB_USER: {}, LOG_LEVEL: { default: 'warn' } } } },
    { store: 'secrets', set: 'prod/eu', schema: { keys: { DB_PASSWORD: { hidden: true }, API_TOKEN: { required: true } } } },
    {
      store: 'main',
      set: 'prod',
      schema: { keys: { LOG_LEVEL: { default: 'info' }, DSN: { const: '{{ $.configs.DB_USER.value }}:{{ $.configs.DB_PASSWORD.value }}@{{ $.configs.HOST.value }}' } } },
    },
  ],
  expected: {
    HOST: 'db.eu.prod.internal',
    PORT: 5432,
    DB_USER: 'app',
    // Both commands give LOG_LEVEL a default: the current (last) one stays.
    LOG_LEVEL: 'info',
    API_TOKEN: 'tok-eu',
    DSN: 'app:prod-pass@db.eu.prod.internal',
  },
};

function thousandKeys() {
  const keys = {};
  const expected = {};
  for (let i = 0; i < 1000; i++) {
    keys[`BIG_${i}`] = i % 10 === 0 ? { required: true } : {};
    expected[`BIG_${i}`] = i;
  }
  return { body: [{ store: 'main', set: 'prod/eu', schema: { keys } }], expected };
}

/** An endless loop, for the responsiveness check. */
export const runaway = {
  body: [{ store: 'main', schema: { keys: { SPIN: { default: 'x', test: '(() => { while (true) {} })()' } } } }],
};

export function writeFixture(dir) {
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'main.json'), JSON.stringify(mainConfigs()));
  writeFileSync(join(dir, 'secrets.json'), JSON.stringify(secretConfigs()));
  const configu = {
    stores: {
      main: { type: 'json-file', configuration: { path: './main.json' }, default: true },
      secrets: { type: 'json-file', configuration: { path: './secrets.json' } },
    },
  };
  writeFileSync(join(dir, '.configu'), JSON.stringify(configu, null, 2));
  return join(dir, '.configu');
}

export const workloads = [
  { name: 'GET /live', method: 'GET', path: '/live' },
  { name: '10 keys (2 tests, 1 const, 1 default)', method: 'POST', path: '/export', ...tenKeys },
  { name: '100 keys (10 tests, 10 consts, 20 defaults)', method: 'POST', path: '/export', ...hundredKeys() },
  { name: 'pipeline: 3 commands, 2 stores', method: 'POST', path: '/export', ...pipeline },
  { name: '1,000 keys, no expressions', method: 'POST', path: '/export', ...thousandKeys() },
];
