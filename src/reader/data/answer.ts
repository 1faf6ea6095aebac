/**
 * A successful /v1 answer as plain data, built once by the route's own function (dataAnswer,
 * filesAnswer, ...) and sent by whichever sender carries the request (v1-handler.ts).
 */
export interface Answer {
  readonly status: number;
  /** Response headers as [name, value, name, value, ...], names in lower case. */
  readonly headers: string[];
  /** Absent on 304. */
  readonly body?: Buffer;
}
