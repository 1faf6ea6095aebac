const LABEL_VALUE = /^[A-Za-z0-9_.:-]{1,40}$/;

/** Caller-supplied label values (scope, reason, dependency) are bounded: anything odd becomes "other". */
export function safeLabel(value: string): string {
  return LABEL_VALUE.test(value) ? value : 'other';
}
