/**
 * A response body read up to a bound, so that a body that never ends (or a compression bomb,
 * counted decoded) cannot take the client's memory: what arrived up to `maxBytes`, and whether
 * that was all of it. Past the bound the rest is cancelled, not read.
 */
export async function readUpTo(res: Response, maxBytes: number): Promise<{ bytes: Uint8Array; complete: boolean }> {
  if (!res.body) return { bytes: new Uint8Array(0), complete: true };
  const chunks: Uint8Array[] = [];
  let total = 0;
  let complete = false;
  const reader = res.body.getReader();
  try {
    while (total <= maxBytes) {
      const r = await reader.read();
      if (r.done) {
        complete = true;
        break;
      }
      chunks.push(r.value);
      total += r.value.length;
    }
  } finally {
    if (!complete) await reader.cancel().catch(() => undefined);
  }
  const length = Math.min(total, maxBytes);
  if (chunks.length === 1 && chunks[0]!.length === length) return { bytes: chunks[0]!, complete };
  const bytes = new Uint8Array(length);
  let at = 0;
  for (const c of chunks) {
    const part = c.subarray(0, length - at);
    bytes.set(part, at);
    at += part.length;
    if (at === length) break;
  }
  return { bytes, complete };
}
