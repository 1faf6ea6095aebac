/** An API key as stored: never the key itself, only its id, owner and policy. */
export interface KeyRecord {
  readonly id: string;
  /** Unique among keys that are not revoked. */
  readonly name: string;
  /** A plan named in the configuration, or null for a key with its own patterns only. */
  readonly plan: string | null;
  /** The key's own allow-list patterns (its plan's are added when it is used). */
  readonly allow: readonly string[];
  /** Filename patterns the key may publish (PUT /v1/data/{filename}); empty: it may publish nothing. */
  readonly publish: readonly string[];
  readonly created_at: string;
  readonly revoked_at: string | null;
}

/** Announced on the keys channel after every change, so readers apply it at once. */
export type KeyChange = { readonly op: 'create'; readonly id: string } | { readonly op: 'revoke'; readonly id: string; readonly revoked_at: string };

/** Parse one message from the keys channel; undefined for anything malformed. */
export function parseKeyChange(message: string): KeyChange | undefined {
  try {
    const v = JSON.parse(message) as Partial<KeyChange> & { revoked_at?: unknown };
    if (typeof v.id !== 'string') return undefined;
    if (v.op === 'create') return { op: 'create', id: v.id };
    if (v.op === 'revoke' && typeof v.revoked_at === 'string') return { op: 'revoke', id: v.id, revoked_at: v.revoked_at };
    return undefined;
  } catch {
    return undefined;
  }
}
