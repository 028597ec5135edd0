/**
 * An incremental parser of the Server-Sent Events format (the WHATWG HTML standard, "Parsing an event stream"), for
 * the streams of `POST /export`: bytes in, whole events and comment lines out. An event is complete at its blank
 * line; whatever comes before the next blank line is held back, so a stream cut in the middle of an event yields
 * nothing of it (`pending` says one was begun).
 */

export interface SseEvent {
  /** The `event:` field; `message` when absent. */
  event: string;
  /** The `id:` field of this event; undefined when it had none. */
  id: string | undefined;
  /** The `data:` lines, joined by newlines. */
  data: string;
}

export interface SseChunk {
  events: SseEvent[];
  /** Comment lines (`: heartbeat`, `: resumed`), without the colon and the space after it. */
  comments: string[];
}

export class SseParser {
  private readonly decoder = new TextDecoder('utf-8');
  private buffer = '';
  private event = '';
  private id: string | undefined;
  private data: string[] = [];
  private begun = false;

  /** Feed the next bytes of the stream. */
  push(bytes: Uint8Array): SseChunk {
    this.buffer += this.decoder.decode(bytes, { stream: true });
    const out: SseChunk = { events: [], comments: [] };
    // Lines end with CRLF, LF or CR; a CR at the very end may be the first half of a CRLF: it waits for the next bytes.
    const lines = this.buffer.split(/\r\n|\n|\r(?!$)/);
    this.buffer = lines.pop() ?? '';
    for (const line of lines) this.line(line, out);
    return out;
  }

  /** An event was begun (a field read, or a partial line held) and its blank line never came. */
  get pending(): boolean {
    return this.begun || this.buffer.replace(/\r$/, '') !== '';
  }

  private line(line: string, out: SseChunk): void {
    if (line === '') {
      if (this.data.length) out.events.push({ event: this.event || 'message', id: this.id, data: this.data.join('\n') });
      this.event = '';
      this.id = undefined;
      this.data = [];
      this.begun = false;
      return;
    }
    if (line.startsWith(':')) {
      out.comments.push(line.slice(1).replace(/^ /, ''));
      return;
    }
    const colon = line.indexOf(':');
    const field = colon === -1 ? line : line.slice(0, colon);
    const value = colon === -1 ? '' : line.slice(colon + 1).replace(/^ /, '');
    this.begun = true;
    if (field === 'event') this.event = value;
    else if (field === 'data') this.data.push(value);
    else if (field === 'id' && !value.includes('\0')) this.id = value;
    // `retry:` and unknown fields are ignored, as the standard says.
  }
}
