/**
 * The last good answer in a file (docs/clients.md, "The last good answer"): written after each answer the client
 * accepted, read when the server cannot be reached. The file names the question it answers (a digest of the server's
 * URL and the pipeline), so an answer to another pipeline or another server is never taken for this one. It is
 * written to a temporary file beside it (mode 0600, flushed to disk) and renamed over it, so a reader sees the old
 * answer or the new one, never a part.
 */
import { createHash, randomBytes } from 'node:crypto';
import { open, readFile, rename, unlink } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';

/** What the file holds (JSON). */
interface KeptFile {
  cfgu: 'last-good-answer';
  version: 1;
  /** SHA-256 (hex) of the URL and the pipeline's JSON: the question the answer is for. */
  question: string;
  etag: string;
  /** When the client accepted the answer (ISO 8601). */
  savedAt: string;
  /** The answer's JSON text, exactly as the server sent it. */
  answer: string;
}

export interface KeptAnswer {
  etag: string;
  text: string;
  savedAt: string;
}

/** The digest naming a question: the export URL and the request body. */
export function questionOf(url: string, body: string): string {
  return createHash('sha256').update(url).update('\n').update(body).digest('hex');
}

/** The answer in `file` to `question`, or undefined when there is none (no file, another question, unreadable). */
export async function readKept(file: string, question: string): Promise<KeptAnswer | undefined> {
  let parsed: Partial<KeptFile>;
  try {
    parsed = JSON.parse(await readFile(file, 'utf8')) as Partial<KeptFile>;
  } catch {
    return undefined;
  }
  if (parsed.cfgu !== 'last-good-answer' || parsed.version !== 1 || parsed.question !== question) return undefined;
  if (typeof parsed.etag !== 'string' || typeof parsed.answer !== 'string' || typeof parsed.savedAt !== 'string') return undefined;
  return { etag: parsed.etag, text: parsed.answer, savedAt: parsed.savedAt };
}

/** Replace `file` with `answer`, atomically, readable and writable by its owner only. */
export async function writeKept(file: string, question: string, answer: { etag: string; text: string }): Promise<void> {
  const content: KeptFile = { cfgu: 'last-good-answer', version: 1, question, etag: answer.etag, savedAt: new Date().toISOString(), answer: answer.text };
  const temporary = join(dirname(file), `.${basename(file)}.${randomBytes(6).toString('hex')}.tmp`);
  const handle = await open(temporary, 'wx', 0o600);
  try {
    try {
      await handle.writeFile(`${JSON.stringify(content)}\n`, 'utf8');
      await handle.sync();
    } finally {
      await handle.close();
    }
    await rename(temporary, file);
  } catch (e) {
    await unlink(temporary).catch(() => undefined);
    throw e;
  }
  // The rename itself made durable: the folder's entry flushed too (where the system allows opening a folder).
  const folder = await open(dirname(file), 'r').catch(() => undefined);
  if (folder) await folder.sync().catch(() => undefined).finally(() => folder.close());
}
