/**
 * The output formats of `cfgu export --format`: each turns the exported values (key -> JSON value) into the text of
 * one file format. Pure functions of their input; the command picks one and writes its text.
 */
import YAML from 'yaml';
import ini from 'ini';
import type { ExportedConfigs, JsonValue } from '../core/index.js';
import { setOwn } from '../core/names.js';

export const FORMATS = ['json', 'dotenv', 'yaml', 'ini', 'properties', 'tfvars', 'configmap', 'secret'] as const;
export type Format = (typeof FORMATS)[number];

/** The text of a value in flat formats: strings as they are, other values as JSON. */
export const textOf = (v: JsonValue): string => (typeof v === 'string' ? v : JSON.stringify(v));

const DOTENV_BARE = /^[A-Za-z0-9_./:@%+,=-]*$/;

/**
 * `.env`: bare when every character is safe; else single quotes (literal, a newline is written as is: a multi-line
 * value) when the value has no `'`; else double quotes with `\\`, `\"`, `\n`, `\r` and `\$` escaped.
 */
export function toDotenv(configs: ExportedConfigs): string {
  return Object.entries(configs)
    .map(([k, v]) => {
      const t = textOf(v);
      if (DOTENV_BARE.test(t)) return `${k}=${t}`;
      if (!t.includes("'")) return `${k}='${t}'`;
      return `${k}="${t.replace(/[\\"$]/g, '\\$&').replace(/\n/g, '\\n').replace(/\r/g, '\\r')}"`;
    })
    .map((l) => `${l}\n`)
    .join('');
}

/**
 * INI (one section-less list), by the `ini` package: values bare when they read back unchanged, else a JSON string;
 * `;` and `#` in a bare value are backslash-escaped.
 */
export function toIni(configs: ExportedConfigs): string {
  return ini.stringify(Object.fromEntries(Object.entries(configs).map(([k, v]) => [k, textOf(v)])), { whitespace: false });
}

function escapeProperties(text: string, isKey: boolean): string {
  let out = '';
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!;
    const code = c.charCodeAt(0);
    if (c === '\\') out += '\\\\';
    else if (c === '\n') out += '\\n';
    else if (c === '\r') out += '\\r';
    else if (c === '\t') out += '\\t';
    else if (c === '\f') out += '\\f';
    else if (c === '=' || c === ':' || c === '#' || c === '!') out += `\\${c}`;
    else if (c === ' ' && (isKey || i === 0)) out += '\\ ';
    else if (code < 0x20 || code > 0x7e) out += `\\u${code.toString(16).padStart(4, '0')}`;
    else out += c;
  }
  return out;
}

/** Java `.properties` (ISO-8859-1 safe: every non-ASCII character as `\uXXXX`). */
export function toProperties(configs: ExportedConfigs): string {
  return Object.entries(configs)
    .map(([k, v]) => `${escapeProperties(k, true)}=${escapeProperties(textOf(v), false)}\n`)
    .join('');
}

function hclString(s: string): string {
  return `"${s
    .replace(/\\/g, '\\\\')
    .replace(/"/g, '\\"')
    .replace(/\n/g, '\\n')
    .replace(/\r/g, '\\r')
    .replace(/\t/g, '\\t')
    .replace(/([$%])\{/g, (_m, c: string) => `${c}${c}{`)}"`;
}

function hclValue(v: JsonValue, indent: string): string {
  if (v === null) return 'null';
  if (typeof v === 'string') return hclString(v);
  if (typeof v === 'number' || typeof v === 'boolean') return String(v);
  const inner = `${indent}  `;
  if (Array.isArray(v)) {
    if (!v.length) return '[]';
    return `[\n${v.map((x) => `${inner}${hclValue(x, inner)},`).join('\n')}\n${indent}]`;
  }
  const entries = Object.entries(v);
  if (!entries.length) return '{}';
  return `{\n${entries.map(([k, x]) => `${inner}${hclString(k)} = ${hclValue(x, inner)}`).join('\n')}\n${indent}}`;
}

/** Terraform `.tfvars` (HCL): strings quoted with `${`/`%{` escaped, numbers and booleans bare, lists and maps. */
export function toTfvars(configs: ExportedConfigs): string {
  return Object.entries(configs)
    .map(([k, v]) => `${k} = ${hclValue(v, '')}\n`)
    .join('');
}

/** A Kubernetes object name (a DNS subdomain: lower-case letters, digits, '-' and '.'; the length is checked apart). */
export const K8S_NAME = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

/** A Kubernetes ConfigMap (`data`: string values) or Secret (`type: Opaque`, `data`: base64 values), as YAML. */
export function toManifest(kind: 'ConfigMap' | 'Secret', name: string, configs: ExportedConfigs): string {
  const data: Record<string, string> = {};
  for (const [k, v] of Object.entries(configs)) setOwn(data, k, kind === 'Secret' ? Buffer.from(textOf(v), 'utf8').toString('base64') : textOf(v));
  const manifest: Record<string, unknown> = { apiVersion: 'v1', kind, metadata: { name } };
  if (kind === 'Secret') manifest.type = 'Opaque';
  manifest.data = data;
  const doc = new YAML.Document(manifest);
  // Every data value is a string for Kubernetes: quote them all so `"8080"` or `"true"` can never be read as another type.
  const items = (doc.get('data') as YAML.YAMLMap<YAML.Scalar, YAML.Scalar> | undefined)?.items ?? [];
  for (const pair of items) if (pair.value) pair.value.type = 'QUOTE_DOUBLE';
  return doc.toString({ lineWidth: 0 });
}

export function formatConfigs(format: Format, configs: ExportedConfigs, name: string | undefined): string {
  switch (format) {
    case 'json':
      return `${JSON.stringify(configs, null, 2)}\n`;
    case 'yaml':
      return Object.keys(configs).length ? YAML.stringify(configs, { lineWidth: 0 }) : '{}\n';
    case 'dotenv':
      return toDotenv(configs);
    case 'ini':
      return toIni(configs);
    case 'properties':
      return toProperties(configs);
    case 'tfvars':
      return toTfvars(configs);
    case 'configmap':
      return toManifest('ConfigMap', name!, configs);
    case 'secret':
      return toManifest('Secret', name!, configs);
  }
}
