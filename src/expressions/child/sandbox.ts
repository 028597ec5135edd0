/**
 * Making a sandbox in the child process: a new isolate with the library bundle loaded (with V8's code cache when there
 * is one), the realm sealed (with the build's warm-up plan when there is one), its caches bounded, and the job path
 * warmed up. child/main.ts makes one at start and one at each renewal.
 */
import { readFileSync } from 'node:fs';
import type IVM from 'isolated-vm';
import type { Ivm } from '../isolated-vm.js';
import { SANDBOX_FILENAME } from '../wire/protocol.js';
import { readCodeCache, readWarmPlan } from './prepared.js';

export interface Sandbox {
  isolate: IVM.Isolate;
  handle: IVM.Reference<(line: string) => string>;
  partial: IVM.Reference<(kind: string, message: string) => string>;
  sealReport: string;
  startupMs: number;
  /** Whether V8 took the code cache it was given ('none' when there was none). */
  codeCache: 'accepted' | 'rejected' | 'none';
}

export class SandboxMaker {
  private readonly source: string;
  /** The build's warm-up plan for this bundle (prepared.ts), as the runtime's `seal` takes it; else the full warm-up. */
  private readonly warmPlan: string;
  /**
   * V8's compiled code for the bundle: the build's (prepared.ts), else made by this process's first isolate before any
   * job ran; later isolates of this process reuse it. It is code derived from the bundle's text only (V8 checks it
   * against the source), never heap state.
   */
  private codeCache: IVM.ExternalCopy<ArrayBuffer> | undefined;

  constructor(
    private readonly ivm: Ivm,
    private readonly options: { bundle: string; memoryMb: number },
  ) {
    this.source = readFileSync(options.bundle, 'utf8');
    this.warmPlan = readWarmPlan(options.bundle, this.source) ?? 'full';
    const built = readCodeCache(options.bundle);
    this.codeCache = built ? new ivm.ExternalCopy(built) : undefined;
  }

  /** A fresh isolate with the bundle loaded and the realm sealed. */
  create(): Sandbox {
    const { ivm, options, source, warmPlan } = this;
    const started = performance.now();
    const isolate = new ivm.Isolate({ memoryLimit: options.memoryMb });
    const context = isolate.createContextSync();
    const given = this.codeCache;
    // With both options, V8 makes a cache only when it did not take the one given (another Node's, say).
    const script = isolate.compileScriptSync(source, {
      filename: SANDBOX_FILENAME,
      produceCachedData: true,
      ...(given ? { cachedData: given } : {}),
    }) as IVM.Script & IVM.CachedDataResult & { cachedDataRejected?: boolean };
    const cacheUse = given ? (script.cachedDataRejected ? 'rejected' : 'accepted') : 'none';
    if (cacheUse !== 'accepted' && script.cachedData) this.codeCache = script.cachedData;
    script.runSync(context);
    script.release();
    const runtime = context.global.getSync('__cfguRuntime', { reference: true }) as IVM.Reference<Record<string, unknown>>;
    const handle = runtime.getSync('handle', { reference: true }) as IVM.Reference<(line: string) => string>;
    const partial = runtime.getSync('partial', { reference: true }) as IVM.Reference<(kind: string, message: string) => string>;
    const seal = runtime.getSync('seal', { reference: true }) as IVM.Reference<(warm: string) => string>;
    const sealReport = seal.applySync(undefined, [warmPlan], { timeout: 30_000 }) as string;
    seal.release();
    // The caches inside the isolate are bounded from its memory limit (isolate/runtime.ts `limits`).
    const limits = runtime.getSync('limits', { reference: true }) as IVM.Reference<(memoryMb: number) => void>;
    limits.applySync(undefined, [options.memoryMb], { timeout: 30_000 });
    limits.release();
    runtime.release();
    warm(handle);
    return { isolate, handle, partial, sealReport, startupMs: performance.now() - started, codeCache: cacheUse };
  }
}

/**
 * Requests run once in every new isolate, after sealing and before `ready`: V8 compiles a function at its first call,
 * so the first job of an isolate used to pay for compiling the whole job path (templates, each library, Ajv, the
 * failure path). That one-off cost, several milliseconds on a quiet machine and over 100 ms on a loaded one, was
 * charged to the first real job's time limit. The data here is constant: no request's value is ever in it, and the
 * per-job reset at the start of every job applies to what follows as it does between any two jobs.
 */
const WARM_CFGU = { schema: { type: 'string' } };
const WARM_LINES: string[] = [
  JSON.stringify({
    t: 'job',
    job: {
      input: {
        store: { type: 'in-memory' },
        set: { path: 'warm/up', hierarchy: ['', 'warm', 'warm/up'] },
        schema: { keys: { HOST: WARM_CFGU, PORT: { schema: { type: 'number' } }, URL: { const: '{{ $.configs.HOST.value }}:<%= $.configs.PORT.value %>' } } },
      },
      configs: { HOST: ['warm.example.com', 'store'], PORT: ['8080', 'default'], URL: ['', 'empty'] },
      consts: [{ key: 'URL', template: '{{ $.configs.HOST.value }}:<%= $.configs.PORT.value %>' }],
      tests: [
        {
          key: 'HOST',
          expressions: [
            'validator.isFQDN($.value)',
            'expect($.value).to.be.a("string")',
            'z.string().min(1).parse($.value) === $.value',
            '_.isString($.value) && $.labels.length === 0',
            'JSONSchema.validate({ type: "string", minLength: 1 }, $.value)',
            '$.value === "not this"',
            'expect($.storedValue).to.match(/^[0-9]+$/)',
          ],
        },
        { key: 'PORT', expressions: ['Number.isInteger($.value) && $.value > 0', 'z.number().max(10).parse($.value)'] },
      ],
    },
  }),
  JSON.stringify({ t: 'template', template: 'host={{ $.configs.HOST }}', context: { configs: { HOST: 'warm' } } }),
  JSON.stringify({ t: 'bool', expression: '$.key !== ""', context: { key: 'K', value: 'v' } }),
];

function warm(handle: IVM.Reference<(line: string) => string>): void {
  for (const line of WARM_LINES) {
    try {
      handle.applySync(undefined, [line], { timeout: 30_000 });
    } catch {
      // A warm-up that fails (a memory limit set very low) only leaves the first job to compile what it needs.
    }
  }
}

