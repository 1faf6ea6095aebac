/**
 * The held long-polls of GET /v1/changes?wait=S: each waits until a change its key may see comes,
 * its wait ends, its client goes, its key is revoked (401: a revoked key hears of no change made
 * after its revocation), the change log moves out of reach (410, as the same position asked again
 * would be: the changes after it are of another log), or the reader stops (answered at once with
 * what there is, its connection closed after: a kept-alive one would hold the server's close).
 */
import type { FastifyReply } from 'fastify';
import { HttpProblem } from '../../errors.js';
import type { Principal } from '../../keys/ring.js';
import { revokedProblem, type V1Handler } from '../data/v1-handler.js';
import type { Answer } from '../data/answer.js';
import type { ChangeFeed, SinceResult } from './feed.js';
import { createTurnMemo } from './turn-memo.js';

export interface LongPollDeps {
  readonly v1: Pick<V1Handler, 'revokedSince'>;
  readonly feed: Pick<ChangeFeed, 'since' | 'subscribe' | 'onReset'>;
  /** Told of a revoked key id (KeyRing.onRevoked). */
  readonly onRevoked: (listener: (id: string) => void) => () => void;
  /** Long-polls waiting now (metrics). */
  readonly onWaiting?: ((delta: number) => void) | undefined;
  /** The answer of changes found. */
  readonly answer: (r: Pick<SinceResult, 'events' | 'next'>) => Answer;
}

export interface LongPolls {
  /** Hold the request until one of the ends above; its answer. */
  wait(reply: FastifyReply, principal: Principal, after: number, limit: number, ms: number): Promise<Answer | HttpProblem>;
  /** Answer every held long-poll now (the reader is stopping). */
  endAll(): void;
}

/** The 410 of a long-poll whose change log moved out of reach (a new epoch starting at `to`) while it waited. */
function movedOutOfReach(after: number, to: number): HttpProblem {
  return new HttpProblem(
    'position_gone',
    `The change log moved out of reach while this long-poll waited: position ${after} belongs to an earlier log. List the files again (GET /v1/catalog) and continue from its position.`,
    {},
    { oldest: to, position: to },
  );
}

export function createLongPolls(deps: LongPollDeps): LongPolls {
  const { v1, feed, answer } = deps;

  /** The answers of long-polls woken by the same change: made once per position, limit and allow-list. */
  const woken = createTurnMemo<Promise<Answer>>();
  const wokenAnswer = (principal: Principal, after: number, limit: number): Promise<Answer> =>
    woken(principal.patterns, `${after}:${limit}`, () => feed.since(after, principal.allows, limit).then(answer, () => answer({ events: [], next: after })))!;

  /** The long-polls held now, each ended as the reader stops by calling it. */
  const held = new Set<() => void>();

  return {
    wait: (reply, principal, after, limit, ms) =>
      new Promise((resolve) => {
        deps.onWaiting?.(1);
        let done = false;
        const finish = (resetTo?: number) => {
          if (done) return;
          done = true;
          clearTimeout(timer);
          unsubscribe();
          unrevoke();
          unreset();
          held.delete(stopping);
          reply.raw.off('close', end);
          deps.onWaiting?.(-1);
          const revoked = v1.revokedSince(principal);
          if (revoked) resolve(revokedProblem('The API key in the X-API-Key header was revoked while this long-poll waited.'));
          else if (resetTo !== undefined) resolve(movedOutOfReach(after, resetTo));
          else void wokenAnswer(principal, after, limit).then(resolve);
        };
        const end = () => finish();
        const stopping = () => {
          reply.header('connection', 'close');
          finish();
        };
        const unsubscribe = feed.subscribe((e) => {
          if (principal.allows(e.filename)) end();
        });
        const unrevoke = deps.onRevoked((id) => {
          if (id === principal.id) end();
        });
        const unreset = feed.onReset((to) => finish(to));
        held.add(stopping);
        const timer = setTimeout(end, ms);
        // The response closing before it was sent: the client went away.
        reply.raw.once('close', end);
      }),
    endAll() {
      for (const stop of [...held]) stop();
    },
  };
}
