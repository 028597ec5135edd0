/**
 * The console's only way to the server: fetch on the same origin, the credential sent as `Authorization: Bearer`
 * (kept by the caller, ./credential.ts), every refusal turned into an ApiError carrying the problem body's own words
 * (`detail`, `errors`, `refused`...), so that a page can show them as the server wrote them.
 */

/** An RFC 9457 problem body as cfgu answers it: the standard members and whatever the route adds. */
export interface Problem {
  type: string;
  title: string;
  status: number;
  detail?: string;
  [member: string]: unknown;
}

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly problem: Problem,
  ) {
    super(problem.detail ?? problem.title);
    this.name = 'ApiError';
  }
}

/** The answer of `GET /session`: who the credential is and what it may do. */
export interface Session {
  authentication: boolean;
  kind: 'anonymous' | 'preshared' | 'credential' | 'jwt';
  subject: string | null;
  access: 'full' | 'scoped';
  grants?: Array<{ stores: string[]; sets: string[]; keys?: string[]; labels?: string[]; write?: boolean; breaking?: boolean; metrics?: boolean }>;
  expiresAt?: string;
}

export interface StoreInfo {
  name: string;
  kind: string;
  default: boolean;
  readOnly: boolean;
  history: boolean;
  write: boolean;
}

export interface SetList {
  store: string;
  sets: string[];
  withheld: number;
  truncated: boolean;
}

export interface SchemaSummary {
  name: string;
  keys: number;
  labels: string[];
}

/** A Cfgu v1 key declaration as the server answers it (only what the console reads is typed). */
export interface KeyDeclaration {
  description?: string;
  type?: string;
  enum?: unknown[];
  default?: unknown;
  required?: boolean;
  hidden?: boolean;
  lazy?: boolean;
  const?: string;
  label?: string | string[];
  [property: string]: unknown;
}

export interface SchemaDocument {
  keys: Record<string, KeyDeclaration>;
}

export interface RequestOptions {
  method?: 'GET' | 'POST';
  body?: unknown;
  signal?: AbortSignal;
  /** Extra headers (for example `Accept: text/event-stream`). */
  headers?: Record<string, string>;
}

/** The problem a network failure or an answer that is not a problem is shown as (never "something went wrong"). */
function localProblem(status: number, detail: string): Problem {
  return { type: 'about:blank', title: status === 0 ? 'No answer' : 'Unexpected answer', status, detail };
}

export class Api {
  /** `token` undefined: no Authorization header (a server without authentication). */
  constructor(readonly token: string | undefined) {}

  get hasToken(): boolean {
    return this.token !== undefined;
  }

  /** The raw response of a request: the caller reads the body (streams use this). Refusals are thrown as ApiError. */
  async respond(path: string, options: RequestOptions = {}): Promise<Response> {
    const headers: Record<string, string> = { Accept: 'application/json', ...options.headers };
    if (this.token !== undefined) headers.Authorization = `Bearer ${this.token}`;
    if (options.body !== undefined) headers['Content-Type'] = 'application/json';
    let response: Response;
    try {
      response = await fetch(path, {
        method: options.method ?? (options.body === undefined ? 'GET' : 'POST'),
        headers,
        body: options.body === undefined ? undefined : JSON.stringify(options.body),
        signal: options.signal,
        cache: 'no-store',
        credentials: 'omit',
      });
    } catch (e) {
      if ((e as Error).name === 'AbortError') throw e;
      throw new ApiError(0, localProblem(0, `the server could not be reached (${(e as Error).message})`));
    }
    if (response.ok) return response;
    throw new ApiError(response.status, await problemOf(response));
  }

  /** A JSON request; the parsed answer. */
  async request<T>(path: string, options: RequestOptions = {}): Promise<T> {
    const response = await this.respond(path, options);
    return (await response.json()) as T;
  }

  session(): Promise<Session> {
    return this.request('/session');
  }

  stores(): Promise<{ stores: StoreInfo[] }> {
    return this.request('/stores');
  }

  sets(store: string): Promise<SetList> {
    return this.request(`/sets?store=${encodeURIComponent(store)}`);
  }

  schemas(): Promise<{ schemas: SchemaSummary[] }> {
    return this.request('/schemas');
  }

  schema(name: string): Promise<SchemaDocument> {
    return this.request(`/schemas/${encodeURIComponent(name)}`);
  }
}

async function problemOf(response: Response): Promise<Problem> {
  const text = await response.text().catch(() => '');
  try {
    const body = JSON.parse(text) as Problem;
    if (body && typeof body === 'object' && typeof body.status === 'number') return body;
  } catch {
    // not JSON: described below
  }
  return localProblem(response.status, `the server answered ${response.status} ${response.statusText || ''}`.trim());
}
