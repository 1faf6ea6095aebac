/**
 * How the queue dashboard shows an ingest job (bull-board's formatters). BullMQ names the jobs
 * `drop` or `claim`, and a rejected drop completes like any other (bull-board's green
 * "completed"): the list would show neither which file a job is about nor that it was refused.
 * So each job is titled by its filename and, once settled, its outcome; a rejection is marked
 * `✗ REJECTED` with its reason and detail. Times the service keeps as milliseconds since the
 * epoch are shown as ISO 8601 in the job's data.
 *
 * The shapes are read loosely (jobs of older versions, or of other queues, may lack any field):
 * what a job does not have is left as bull-board would show it.
 */

/** The longest detail a title carries (the full detail is in the job's return value). */
const MAX_DETAIL = 160;

/** The fields of a job (bull-board's job.toJSON()) that the title is made of. */
export interface JobFields {
  readonly name?: unknown;
  readonly data?: unknown;
  readonly returnvalue?: unknown;
}

const record = (v: unknown): Record<string, unknown> | undefined => (v !== null && typeof v === 'object' ? (v as Record<string, unknown>) : undefined);
const text = (v: unknown): string | undefined => (typeof v === 'string' && v !== '' ? v : undefined);

/** `site_live_x.json`, then ` · published` (any outcome), or `✗ REJECTED site_live_x.json · schema: detail`. */
export function jobTitle(job: JobFields): string {
  const data = record(job.data);
  const result = record(job.returnvalue);
  const filename = text(data?.name) ?? text(result?.filename);
  const kind = text(job.name) ?? '';
  if (filename === undefined) return kind;
  const outcome = text(result?.outcome);
  if (outcome === 'rejected') {
    const reason = text(result?.reason) ?? 'rejected';
    const detail = text(result?.detail);
    const cut = detail && detail.length > MAX_DETAIL ? `${detail.slice(0, MAX_DETAIL)}…` : detail;
    return `✗ REJECTED ${filename} · ${reason}${cut ? `: ${cut}` : ''}`;
  }
  const upload = data?.staged === true ? ' (upload)' : '';
  return outcome ? `${filename}${upload} · ${outcome}` : `${filename}${upload}`;
}

/** The job's data with `receivedAt` (ms since the epoch) as an ISO 8601 time. */
export function jobData(data: unknown): unknown {
  const d = record(data);
  if (!d || typeof d.receivedAt !== 'number' || !Number.isFinite(d.receivedAt)) return data;
  return { ...d, receivedAt: new Date(d.receivedAt).toISOString() };
}
