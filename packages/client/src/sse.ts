/**
 * Server-sent events read from a fetch body (a web ReadableStream), as the HTML standard parses
 * them: lines end with CRLF, LF or CR; `event`, `data`, `id` and `retry` fields; a blank line
 * dispatches. Comment lines are handed on too (the server's heartbeats), so a reader can tell a
 * quiet stream from a dead one. `EventSource` is not used: it cannot send the key header.
 */
export type SseItem =
  | { readonly kind: 'event'; readonly event: string; readonly data: string; readonly id: string | undefined }
  | { readonly kind: 'comment' }
  | { readonly kind: 'retry'; readonly ms: number };

/**
 * The most characters an event may hold (its lines, pending or dispatched together): the
 * service's events are a few hundred bytes, so a server sending a line that never ends cannot
 * make the reader hold it all.
 */
export const MAX_EVENT_CHARS = 1024 * 1024;

/**
 * The most characters of lines that carry no event (comments, blank lines, unknown fields) a
 * stream may send within one idle bound: heartbeats are a few bytes every few seconds, so a
 * server flooding them cannot keep the reader busy parsing for ever (the stream is given up,
 * and reconnected with backoff).
 */
export const MAX_NOISE_CHARS = 64 * 1024;

export async function* readSse(
  body: ReadableStream<Uint8Array>,
  idleMs: number,
  maxEventChars = MAX_EVENT_CHARS,
  maxNoiseChars = MAX_NOISE_CHARS,
): AsyncGenerator<SseItem> {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  let buf = '';
  let event = '';
  let data: string[] = [];
  let held = 0;
  let id: string | undefined;
  let any = false;
  let noise = 0;
  let noiseSince = Date.now();
  /** A line that carries no event: counted against the noise bound of the current window. */
  const quiet = (chars: number) => {
    if ((noise += chars + 1) <= maxNoiseChars) return;
    const ms = Date.now() - noiseSince;
    if (ms >= idleMs) {
      noise = 0;
      noiseSince = Date.now();
      return;
    }
    throw new Error(`the stream sent ${noise} characters of comments and empty lines in ${ms} ms without an event`);
  };
  const tooLong = () => new Error(`the stream sent an event of more than ${maxEventChars} characters`);
  try {
    for (;;) {
      let timer: ReturnType<typeof setTimeout> | undefined;
      const idle = new Promise<'idle'>((resolve) => (timer = setTimeout(() => resolve('idle'), idleMs)));
      const r = await Promise.race([reader.read(), idle]);
      clearTimeout(timer);
      if (r === 'idle') throw new Error(`the stream said nothing for ${idleMs} ms`);
      if (r.done) return;
      buf += r.value;
      // Lines are taken by position, and what is left of the chunk kept once: no copy per line.
      let pos = 0;
      for (;;) {
        const lf = buf.indexOf('\n', pos);
        const cr = buf.indexOf('\r', pos);
        const end = cr >= 0 && (lf < 0 || cr < lf) ? cr : lf;
        // A lone CR at the end may be the first half of a CRLF: wait for more.
        if (end < 0 || (end === cr && end === buf.length - 1)) break;
        const line = buf.slice(pos, end);
        pos = end + (end === cr && buf.charCodeAt(end + 1) === 10 ? 2 : 1);
        if (line === '') {
          if (any) {
            yield { kind: 'event', event: event || 'message', data: data.join('\n'), id };
            noise = 0;
            noiseSince = Date.now();
          } else quiet(0);
          event = '';
          data = [];
          held = 0;
          any = false;
          continue;
        }
        if (line.startsWith(':')) {
          quiet(line.length);
          yield { kind: 'comment' };
          continue;
        }
        const colon = line.indexOf(':');
        const field = colon < 0 ? line : line.slice(0, colon);
        let value = colon < 0 ? '' : line.slice(colon + 1);
        if (value.startsWith(' ')) value = value.slice(1);
        if (field === 'event') event = value;
        else if (field === 'data') {
          if ((held += value.length + 1) > maxEventChars) throw tooLong();
          data.push(value);
        } else if (field === 'id' && !value.includes('\0')) id = value;
        else if (field === 'retry' && /^\d+$/.test(value)) {
          quiet(line.length);
          yield { kind: 'retry', ms: Number(value) };
          continue;
        } else {
          quiet(line.length);
          continue;
        }
        any = true;
      }
      buf = pos === 0 ? buf : buf.slice(pos);
      if (buf.length > maxEventChars) throw tooLong();
    }
  } finally {
    await reader.cancel().catch(() => undefined);
  }
}
