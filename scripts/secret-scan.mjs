// The whole-suite secret scan (docs/security.md, "The whole-suite scan"): reads the capture that the test processes
// wrote (test/helpers/capture.ts: `<folder>/<pid>.jsonl`, one `{ kind, file, text }` a line) and fails when
// - a record that is not output by design (kinds eval-pipe and const-value) holds the marker of a planted secret,
//   or the random tail of one (the values are in the capture too, kind planted, not scanned); each find is printed with its kind, its test file, and the text around it with every secret masked;
// - the capture is too small to mean anything: fewer records than the minimum (--min N, else CFGU_SECRET_SCAN_MIN,
//   else 2,000, the floor for a whole-suite run; scripts/test.mjs passes --min 0 when only some files run).
// Usage: node scripts/secret-scan.mjs <capture folder> [--min N]. Exit 0: clean; 1: a find or too few records; 2: usage.
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';

export const SECRET_MARKER = 'S3CR3T-cfgu-';
/** Not scanned: output by design (eval-pipe, const-value), and the list of planted values itself (planted). */
export const BY_DESIGN_KINDS = new Set(['eval-pipe', 'const-value', 'planted']);
export const DEFAULT_MIN = 2000;
/** A planted secret (`planted()`: marker, name, random hex), and what a find is printed with instead. */
const SECRET = /S3CR3T-cfgu-[A-Za-z0-9_-]*/g;
const MASK = '«secret»';
const AROUND = 120;

const TAIL = /-([0-9a-f]{10})$/;

/** The text around each secret of `text` (a marked value, or one of `tails`), secrets masked, on one line. */
export function masked(text, tails = []) {
  const parts = [];
  let t = text.replace(SECRET, MASK);
  for (const tail of tails) t = t.split(tail).join(MASK);
  for (const m of t.matchAll(new RegExp(MASK, 'g'))) {
    const from = Math.max(0, m.index - AROUND);
    const to = Math.min(t.length, m.index + m[0].length + AROUND);
    parts.push(`${from > 0 ? '…' : ''}${t.slice(from, to)}${to < t.length ? '…' : ''}`);
    if (parts.length === 3) break;
  }
  return parts.join(' | ').replace(/\r/g, '\\r').replace(/\n/g, '\\n');
}

/** Scan a capture folder: { records, byKind, finds, badLines }. */
export function scan(folder) {
  const byKind = {};
  const finds = [];
  let records = 0;
  let badLines = 0;
  const all = [];
  for (const name of readdirSync(folder).filter((n) => n.endsWith('.jsonl')).sort()) {
    for (const line of readFileSync(join(folder, name), 'utf8').split('\n')) {
      if (!line) continue;
      try {
        all.push(JSON.parse(line));
      } catch {
        badLines++; // a process killed in the middle of a write
      }
    }
  }
  // The random tails of the planted values (10 hex digits each): found without the marker, the value was cut.
  const tails = [...new Set(all.filter((r) => r.kind === 'planted').map((r) => TAIL.exec(r.text)?.[1]).filter(Boolean))];
  for (const r of all) {
    byKind[r.kind] = (byKind[r.kind] ?? 0) + 1;
    if (r.kind !== 'planted') records++; // what was captured; the planted values are not output
    if (BY_DESIGN_KINDS.has(r.kind) || typeof r.text !== 'string') continue;
    if (r.text.includes(SECRET_MARKER) || tails.some((t) => r.text.includes(t))) finds.push({ kind: r.kind, file: r.file, text: masked(r.text, tails) });
  }
  return { records, byKind, finds, badLines };
}

function main(argv) {
  const args = [...argv];
  let min = /^\d+$/.test(process.env.CFGU_SECRET_SCAN_MIN ?? '') ? Number(process.env.CFGU_SECRET_SCAN_MIN) : DEFAULT_MIN;
  const at = args.indexOf('--min');
  if (at !== -1) {
    if (!/^\d+$/.test(args[at + 1] ?? '')) return usage('--min needs a whole number');
    min = Number(args[at + 1]);
    args.splice(at, 2);
  }
  const folder = args[0];
  if (!folder || args.length !== 1) return usage('one capture folder expected');
  if (!existsSync(folder) || !statSync(folder).isDirectory()) return usage(`${folder} is not a folder`);
  const { records, byKind, finds, badLines } = scan(folder);
  const kinds = Object.entries(byKind)
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([k, n]) => `${k} ${n}`)
    .join(', ');
  console.error(`secret scan: ${records} records (${kinds || 'none'})${badLines ? `, ${badLines} unreadable line(s)` : ''}`);
  for (const f of finds) console.error(`secret scan: LEAK in ${f.kind} of ${f.file}: ${f.text}`);
  if (finds.length) {
    console.error(`secret scan: FAILED, ${finds.length} record(s) hold a planted secret`);
    return 1;
  }
  if (records < min) {
    console.error(`secret scan: FAILED, ${records} records is fewer than the ${min} a meaningful scan needs (--min or CFGU_SECRET_SCAN_MIN)`);
    return 1;
  }
  console.error('secret scan: no planted secret outside the by-design outputs');
  return 0;
}

function usage(why) {
  console.error(`secret scan: ${why}\nusage: node scripts/secret-scan.mjs <capture folder> [--min N]`);
  return 2;
}

if (process.argv[1] && import.meta.url === pathToFileURL(resolve(process.argv[1])).href) process.exit(main(process.argv.slice(2)));
