// Helpers shared by the benchmark scripts: a free port, the process tree of a server, the load generator in its own
// process (bench/load.mjs), and waiting for a server to be ready.
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');

export const freePort = () =>
  new Promise((resolve) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });

/** Every pid in the tree below `pid` (the primary, its workers, their sandbox processes). */
export function tree(pid) {
  const out = [pid];
  for (let i = 0; i < out.length; i++) {
    try {
      const kids = readFileSync(`/proc/${out[i]}/task/${out[i]}/children`, 'utf8').trim();
      if (kids) out.push(...kids.split(/\s+/).map(Number));
    } catch {
      /* gone */
    }
  }
  return out;
}

export function load(options) {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [join(root, 'bench/load.mjs'), JSON.stringify(options)], { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    child.stdout.on('data', (d) => (out += d));
    child.on('exit', (code) => (code === 0 ? resolve(JSON.parse(out)) : reject(new Error(`load generator exited ${code}`))));
  });
}

export async function waitReady(base, ms = 60000) {
  const until = Date.now() + ms;
  while (Date.now() < until) {
    try {
      if ((await fetch(`${base}/ready`)).status === 200) return;
    } catch {
      /* not listening yet */
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error('the server did not become ready');
}
