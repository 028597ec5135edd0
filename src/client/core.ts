/**
 * What `get()` and `subscribe()` share (docs/clients.md): the request (URL, body, headers, the bearer token and its
 * refresh), the answer the client holds (`kept`: the last one it accepted, or the file's until the server confirms
 * it), and the acceptance of a new answer (JSON, an entity tag, the caller's validator, then the file).
 */
import { CLIENT_PROBLEMS, clientError, CfguClientError } from './errors.js';
import { questionOf, readKept, writeKept } from './kept-file.js';
import type { ClientOptions } from './types.js';

/** The answer the client holds. */
export interface Kept<T> {
  values: T;
  etag: string;
  /** Read from the file and not confirmed by the server since. */
  fromFile: boolean;
}

/** The bearer token: a fixed one, or the caller's `getToken`, asked once and again (refresh) after a 401. */
class Tokens {
  private current: Promise<string> | undefined;

  constructor(
    private readonly fixed: string | undefined,
    private readonly getToken: ClientOptions<unknown>['getToken'],
  ) {}

  get canRefresh(): boolean {
    return this.getToken !== undefined;
  }

  /** The token to send (undefined without one). */
  value(): Promise<string | undefined> {
    if (!this.getToken) return Promise.resolve(this.fixed);
    this.current ??= this.ask(false);
    return this.current;
  }

  /** A 401 came for `refused`: ask for a new token, unless another request already did. */
  async refresh(refused: string | undefined): Promise<void> {
    if (!this.getToken) return;
    const now = await this.current?.catch(() => undefined);
    if (this.current === undefined || now === refused) this.current = this.ask(true);
    await this.current;
  }

  private ask(refresh: boolean): Promise<string> {
    const asked = (async () => {
      try {
        const token = await this.getToken!({ refresh });
        if (typeof token !== 'string' || token === '') throw new TypeError('getToken did not give a non-empty string');
        return token;
      } catch (e) {
        throw clientError(CLIENT_PROBLEMS.token, 'Token Unavailable', 0, `getToken failed: ${e instanceof Error ? e.message : typeof e}`, e);
      }
    })();
    // A failed ask is not kept: the next request asks again.
    asked.catch(() => {
      if (this.current === asked) this.current = undefined;
    });
    return asked;
  }
}

export class ClientCore<T> {
  readonly exportUrl: string;
  readonly body: string;
  readonly fetch: typeof fetch;
  readonly tokens: Tokens;
  kept: Kept<T> | undefined;
  private readonly question: string;
  private fileRead: Promise<void> | undefined;
  private writing: Promise<void> = Promise.resolve();

  constructor(readonly options: ClientOptions<T>) {
    if (typeof options.url !== 'string' || options.url === '') throw new TypeError('createClient: `url` (the server, such as http://localhost:8080) is required');
    if (options.token !== undefined && options.getToken !== undefined) throw new TypeError('createClient: give `token` or `getToken`, not both');
    const url = new URL(options.url);
    if (!/\/export\/?$/.test(url.pathname)) url.pathname = `${url.pathname.replace(/\/$/, '')}/export`;
    this.exportUrl = url.href;
    this.body = JSON.stringify(options.pipeline);
    if (this.body === undefined) throw new TypeError('createClient: `pipeline` (the body of POST /export) is required');
    this.question = questionOf(this.exportUrl, this.body);
    this.fetch = options.fetch ?? globalThis.fetch;
    this.tokens = new Tokens(options.token, options.getToken);
  }

  /** The request headers: JSON body, `accept`, the bearer token (returned too, to refresh it after a 401). */
  async headers(accept: string, extra: Record<string, string> = {}): Promise<{ headers: Record<string, string>; token: string | undefined }> {
    const token = await this.tokens.value();
    const headers: Record<string, string> = { ...this.options.headers, 'content-type': 'application/json', accept, ...extra };
    if (token !== undefined) headers.authorization = `Bearer ${token}`;
    return { headers, token };
  }

  /** Read the file's answer once, when there is a file and no answer yet (an unusable one is reported and skipped). */
  loadFile(): Promise<void> {
    const file = this.options.cacheFile;
    if (!file) return Promise.resolve();
    this.fileRead ??= (async () => {
      const found = await readKept(file, this.question);
      if (!found || this.kept) return;
      try {
        this.kept = { values: this.check(found.text, 200), etag: found.etag, fromFile: true };
      } catch (e) {
        this.warn(`the answer in ${file} was not used: ${(e as Error).message}`);
      }
    })();
    return this.fileRead;
  }

  /** Parse and validate an answer's JSON text (`status`: the answer's, for the error). */
  check(text: string, status: number): T {
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch (e) {
      throw clientError(CLIENT_PROBLEMS.invalidAnswer, 'Invalid Answer', status, 'the answer is not JSON', e);
    }
    if (!this.options.validate) return parsed as T;
    try {
      return this.options.validate(parsed);
    } catch (e) {
      throw clientError(CLIENT_PROBLEMS.validation, 'Answer Refused by the Validator', status, `the validator refused the answer: ${e instanceof Error ? e.message : typeof e}`, e);
    }
  }

  /** Take a new answer: checked, held, and (in the background; `saved()` waits for it) written to the file. */
  accept(text: string, etag: string | null, status: number): Kept<T> {
    if (!etag) throw clientError(CLIENT_PROBLEMS.invalidAnswer, 'Invalid Answer', status, 'the answer has no entity tag');
    const kept: Kept<T> = { values: this.check(text, status), etag, fromFile: false };
    this.kept = kept;
    const file = this.options.cacheFile;
    if (file) {
      this.writing = this.writing
        .then(() => writeKept(file, this.question, { etag, text }))
        .catch((e: NodeJS.ErrnoException) => this.warn(`the last good answer could not be written to ${file}: ${e.code ?? e.message}`));
    }
    return kept;
  }

  /** Resolves once every file write begun so far is done. */
  saved(): Promise<void> {
    return this.writing;
  }

  warn(message: string): void {
    if (this.options.onWarning) this.options.onWarning(message);
    else process.emitWarning(message, { code: 'CFGU_CLIENT' });
  }
}

export { CfguClientError };
