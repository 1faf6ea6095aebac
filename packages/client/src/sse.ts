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

export async function* readSse(body: ReadableStream<Uint8Array>, idleMs: number): AsyncGenerator<SseItem> {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  let buf = '';
  let event = '';
  let data: string[] = [];
  let id: string | undefined;
  let any = false;
  try {
    for (;;) {
      let timer: ReturnType<typeof setTimeout> | undefined;
      const idle = new Promise<'idle'>((resolve) => (timer = setTimeout(() => resolve('idle'), idleMs)));
      const r = await Promise.race([reader.read(), idle]);
      clearTimeout(timer);
      if (r === 'idle') throw new Error(`the stream said nothing for ${idleMs} ms`);
      if (r.done) return;
      buf += r.value;
      for (;;) {
        const m = /\r\n|\n|\r/.exec(buf);
        // A lone CR at the end may be the first half of a CRLF: wait for more.
        if (m === null || (m[0] === '\r' && m.index === buf.length - 1)) break;
        const line = buf.slice(0, m.index);
        buf = buf.slice(m.index + m[0].length);
        if (line === '') {
          if (any) yield { kind: 'event', event: event || 'message', data: data.join('\n'), id };
          event = '';
          data = [];
          any = false;
          continue;
        }
        if (line.startsWith(':')) {
          yield { kind: 'comment' };
          continue;
        }
        const colon = line.indexOf(':');
        const field = colon < 0 ? line : line.slice(0, colon);
        let value = colon < 0 ? '' : line.slice(colon + 1);
        if (value.startsWith(' ')) value = value.slice(1);
        if (field === 'event') event = value;
        else if (field === 'data') data.push(value);
        else if (field === 'id' && !value.includes('\0')) id = value;
        else if (field === 'retry' && /^\d+$/.test(value)) {
          yield { kind: 'retry', ms: Number(value) };
          continue;
        } else continue;
        any = true;
      }
    }
  } finally {
    await reader.cancel().catch(() => undefined);
  }
}
