/**
 * A drop's check: the document rules (feeds/validate.ts), then the SHA-256 of the bytes to
 * publish and, when `generated_at` was stamped, of the bytes as dropped. The one implementation,
 * run on a validation thread (check-thread.ts) or, with none, on the caller's loop (checker.ts).
 */
import type { DocumentCheck, DocumentValidator, ValidDocument } from '../../feeds/validate.js';
import { sha256Hex } from '../../sha256.js';

export interface CheckedDrop {
  readonly doc: ValidDocument;
  /** The SHA-256 of `doc.bytes`: the version's identity. */
  readonly sha256: string;
  /** The SHA-256 of the bytes as dropped, when the document was stamped (they differ from `doc.bytes`). */
  readonly sourceSha256: string | undefined;
}

/** Throws a RejectionError when the drop breaks a rule. */
export function checkDrop(validate: DocumentValidator, check: DocumentCheck): CheckedDrop {
  const doc = validate(check);
  return { doc, sha256: sha256Hex(doc.bytes), sourceSha256: doc.stamped ? sha256Hex(check.bytes) : undefined };
}
