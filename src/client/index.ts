/**
 * cfgu/client: a client of a cfgu server's `POST /export` for Node, using nothing beyond Node itself
 * (docs/clients.md). `get()` asks, revalidating with the entity tag; `subscribe()` follows the event stream,
 * reconnecting with back-off and resuming from the last answer's tag; the last good answer is kept in a file and used
 * (marked stale) when the server cannot be reached. Every failure is a CfguClientError carrying a problem body.
 */
import { ClientCore, type Kept } from './core.js';
import { errorOf, unreachable, CfguClientError } from './errors.js';
import { follow } from './stream.js';
import type { Answer, CfguClient, ClientOptions, Subscription } from './types.js';

export { CfguClientError, CLIENT_PROBLEMS, type Problem } from './errors.js';
export type { Answer, CfguClient, ClientOptions, Subscription } from './types.js';

const answerOf = <T>(kept: Kept<T>, stale: boolean): Answer<T> => ({ values: kept.values, etag: kept.etag, stale });

export function createClient<T = Record<string, unknown>>(options: ClientOptions<T>): CfguClient<T> {
  const core = new ClientCore<T>(options);
  const timeoutMs = options.requestTimeoutMs ?? 30_000;

  /** One POST of the pipeline, revalidating the held answer. */
  const post = async (): Promise<{ res: Response; token: string | undefined }> => {
    const { headers, token } = await core.headers('application/json', core.kept ? { 'if-none-match': core.kept.etag } : {});
    const res = await core.fetch(core.exportUrl, { method: 'POST', headers, body: core.body, signal: AbortSignal.timeout(timeoutMs) });
    return { res, token };
  };

  /** The held answer marked stale, when the server cannot be reached; else that error. */
  const staleOr = (error: CfguClientError): Answer<T> => {
    if (core.kept) return answerOf(core.kept, true);
    throw error;
  };

  async function get(): Promise<Answer<T>> {
    await core.loadFile();
    let res: Response;
    try {
      let sent = await post();
      if (sent.res.status === 401 && core.tokens.canRefresh) {
        await sent.res.body?.cancel();
        await core.tokens.refresh(sent.token);
        sent = await post();
      }
      res = sent.res;
    } catch (e) {
      if (e instanceof CfguClientError) throw e; // getToken failed
      return staleOr(unreachable(core.exportUrl, e));
    }
    if (res.status === 304 && core.kept) {
      await res.body?.cancel();
      core.kept.fromFile = false;
      return answerOf(core.kept, false);
    }
    if (res.status !== 200) throw await errorOf(res);
    let text: string;
    try {
      text = await res.text();
    } catch (e) {
      return staleOr(unreachable(core.exportUrl, e)); // cut in the middle of the body
    }
    const kept = core.accept(text, res.headers.get('etag'), 200);
    await core.saved();
    return answerOf(kept, false);
  }

  return {
    get,
    subscribe: (onChange, onError): Subscription => follow(core, onChange, onError),
    get last() {
      return core.kept ? answerOf(core.kept, core.kept.fromFile) : undefined;
    },
    saved: () => core.saved(),
  };
}
