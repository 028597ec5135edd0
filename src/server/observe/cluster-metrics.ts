/**
 * The metrics of a cluster (`--workers N`): the worker that got a scrape asks the primary, the primary asks every
 * worker for its metrics over the cluster's IPC channel, adds them up (prom-client's aggregation: counters and
 * histograms summed, each gauge as declared) and sends the text back. Each scrape asks every worker afresh.
 */
import cluster from 'node:cluster';
import { AggregatorRegistry, type MetricObjectWithValues, type MetricValue } from 'prom-client';

export type MetricJson = MetricObjectWithValues<MetricValue<string>>;

/** What a worker reports of itself (./metrics.ts ServerMetrics). */
interface WorkerMetrics {
  json(): Promise<MetricJson[]>;
}

/** Worker -> primary: a scrape arrived, send back the cluster's text. */
interface ScrapeRequest { cfgu: 'metrics:scrape'; id: number }
/** Primary -> worker: the cluster's text (or why there is none). */
interface ScrapeAnswer { cfgu: 'metrics:text'; id: number; text?: string; error?: string }
/** Primary -> worker: send your metrics. */
interface CollectRequest { cfgu: 'metrics:collect'; id: number }
/** Worker -> primary: my metrics. */
interface CollectAnswer { cfgu: 'metrics:part'; id: number; metrics: MetricJson[] }

/** How long a scrape waits for the workers (a worker that does not answer in time is left out of that scrape). */
const COLLECT_WAIT_MS = 3000;

let current: WorkerMetrics | undefined;
let workerListening = false;
let nextScrape = 1;
const pendingScrapes = new Map<number, { resolve: (text: string) => void; reject: (e: Error) => void; timer: NodeJS.Timeout }>();

/** In a worker: make `metrics` the registry this process reports to the primary (the last one built wins). */
export function useWorkerMetrics(metrics: WorkerMetrics): void {
  current = metrics;
  if (workerListening || !cluster.isWorker) return;
  workerListening = true;
  process.on('message', (msg: unknown) => {
    const m = msg as CollectRequest | ScrapeAnswer | null;
    if (!m || typeof m !== 'object') return;
    if (m.cfgu === 'metrics:collect') {
      const id = m.id;
      const reply = (metrics: MetricJson[]) => process.send?.({ cfgu: 'metrics:part', id, metrics } satisfies CollectAnswer);
      if (!current) reply([]);
      else current.json().then(reply, () => reply([]));
    } else if (m.cfgu === 'metrics:text') {
      const waiting = pendingScrapes.get(m.id);
      if (!waiting) return;
      pendingScrapes.delete(m.id);
      clearTimeout(waiting.timer);
      if (typeof m.text === 'string') waiting.resolve(m.text);
      else waiting.reject(new Error(m.error ?? 'no metrics'));
    }
  });
}

/** In a worker: the cluster's metrics text, from the primary. */
export function askPrimary(): Promise<string> {
  const id = nextScrape++;
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      pendingScrapes.delete(id);
      reject(new Error('the primary did not answer'));
    }, COLLECT_WAIT_MS * 2);
    timer.unref();
    pendingScrapes.set(id, { resolve, reject, timer });
    process.send!({ cfgu: 'metrics:scrape', id } satisfies ScrapeRequest);
  });
}

/**
 * In the primary: answer the workers' scrapes with the sum over every live worker. Each scrape asks every worker
 * afresh (no cache: Prometheus decides how often it scrapes).
 */
export function serveClusterMetrics(): void {
  let nextCollect = 1;
  const collecting = new Map<number, { parts: MetricJson[][]; waiting: Set<number>; done: () => void }>();
  cluster.on('message', (worker, msg: unknown) => {
    const m = msg as ScrapeRequest | CollectAnswer | null;
    if (!m || typeof m !== 'object') return;
    if (m.cfgu === 'metrics:part') {
      const c = collecting.get(m.id);
      if (!c || !c.waiting.delete(worker.id)) return;
      if (Array.isArray(m.metrics)) c.parts.push(m.metrics);
      if (c.waiting.size === 0) c.done();
    } else if (m.cfgu === 'metrics:scrape') {
      const scrapeId = m.id;
      const id = nextCollect++;
      const workers = Object.values(cluster.workers ?? {}).filter((w) => w && w.isConnected());
      const entry = { parts: [] as MetricJson[][], waiting: new Set(workers.map((w) => w!.id)), done: () => undefined as void };
      const finished = new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, COLLECT_WAIT_MS);
        entry.done = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      collecting.set(id, entry);
      for (const w of workers) w!.send({ cfgu: 'metrics:collect', id } satisfies CollectRequest);
      if (entry.waiting.size === 0) entry.done();
      void finished
        .then(() => {
          collecting.delete(id);
          return AggregatorRegistry.aggregate(entry.parts).metrics();
        })
        .then(
          (text) => ({ cfgu: 'metrics:text', id: scrapeId, text }) satisfies ScrapeAnswer,
          () => ({ cfgu: 'metrics:text', id: scrapeId, error: 'aggregation failed' }) satisfies ScrapeAnswer,
        )
        .then((answer) => {
          if (worker.isConnected()) worker.send(answer);
        });
    }
  });
}
