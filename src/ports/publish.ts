/**
 * What the reader needs to take PUT /v1/data/{filename}: a port it defines and src/ingest
 * implements (src/ingest/http/http-publish.ts), wired in src/service.ts. The reader never loads the
 * queue or the document validator itself.
 */

/** A settled (or not yet settled) publication of one uploaded document. */
export type PublishOutcome =
  | {
      readonly outcome: 'published' | 'unchanged' | 'superseded';
      /** The upload's SHA-256 and generated_at (stamped when it had none). */
      readonly sha256: string;
      readonly generatedAt: string;
      /** The version published under the filename now: the upload's, or the one that won. */
      readonly current: { readonly sha256: string; readonly generatedAt: string };
    }
  | {
      readonly outcome: 'rejected';
      /** A rejection reason code, as in REJECTED_DIR/<id>/reason.json. */
      readonly reason: string;
      readonly detail: string;
      /** The rejection's folder in REJECTED_DIR (none for a dry run). */
      readonly rejectionId?: string | undefined;
    }
  /** Queued, and no worker settled it in time: it will be settled; sending it again is safe. */
  | { readonly outcome: 'pending' }
  /** Not queued: `mayQueue` said no just before (the key was revoked while the upload arrived). */
  | { readonly outcome: 'withdrawn' };

/** What a dry run says: rejected as a real PUT would be, or valid and what would happen. */
export type DryRunOutcome =
  | { readonly outcome: 'rejected'; readonly reason: string; readonly detail: string }
  | {
      readonly outcome: 'valid';
      readonly would: 'published' | 'unchanged' | 'superseded';
      readonly generatedAt: string;
      readonly current: { readonly sha256: string; readonly generatedAt: string } | undefined;
    };

export interface PublishPort {
  /**
   * Stage the bytes, queue them through the pipeline a drop takes, and resolve with the outcome
   * once a worker settled it (or `pending` after the settle timeout). `mayQueue` is asked last,
   * right before the claim is queued: false withdraws the upload (nothing queued, `withdrawn`).
   */
  submit(filename: string, bytes: Buffer, receivedAt: Date, mayQueue?: () => boolean): Promise<PublishOutcome>;
  /** Validate as the worker would and compare with what is published; nothing is written. */
  check(filename: string, bytes: Buffer, receivedAt: Date): Promise<DryRunOutcome>;
  /** Load now what the first upload would (a port started on demand); rejects when that fails. */
  prepare?(): Promise<void>;
}
