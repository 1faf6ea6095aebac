/**
 * The documents of the stall bench that change from one version to the next (the deltas of (a),
 * the uploads of (d), the patch-size goal): every 20th price moved each time, so a patch against
 * the previous version is small, as a live feed's is.
 */
import { EXAMPLE_FEEDS, generateDocument, type FixtureFeed } from '../../../test/fixtures/corpus.js';

type Doc = { generated_at: string; events: { markets: { selections: { odds: number }[] }[] }[] };

export const feedOf = (name: string): FixtureFeed => EXAMPLE_FEEDS.find((f) => f.filename === name)!;

/**
 * Successive versions of one file of about `bytes` as written here (indented by one space), each
 * with a new generated_at (a second in the past) and every 20th price moved from the previous one.
 */
export function versionsOf(name: string, bytes: number): () => Buffer {
  const first = (target: number) => JSON.parse(generateDocument(feedOf(name), { targetBytes: target }).toString()) as Doc;
  let doc = first(bytes);
  // The generator's layout is not this one: a second document, scaled so the written one is about `bytes`.
  doc = first(Math.round((bytes * bytes) / Buffer.byteLength(JSON.stringify(doc, null, 1))));
  let n = 0;
  return () => {
    doc.generated_at = new Date(Date.now() - 1000).toISOString();
    let i = n++;
    for (const e of doc.events) for (const m of e.markets) for (const s of m.selections) if (i++ % 20 === 0) s.odds = Math.round(s.odds * 100 + 7) / 100;
    return Buffer.from(JSON.stringify(doc, null, 1));
  };
}
