/** What every part of bench:changes shares: the deployment, its clients, and profile spans. */
import type { machineInfo } from '../common/machine.js';
import type { DocTemplate } from '../common/drops.js';
import type { OddsfilesSystem } from '../common/oddsfiles-system.js';
import type { Poller } from '../common/poller.js';
import type { ClientsChild, SseSocket } from './sse-clients.js';

export type SseEvent = { id: number; at: number };

/** The deployment and the clients every part uses. */
export interface Bench {
  readonly machine: ReturnType<typeof machineInfo>;
  readonly template: DocTemplate;
  readonly sys: OddsfilesSystem;
  readonly base: string;
  /** The key of the background streams (`--bg-scope`). */
  readonly bgKey: string;
  /** The reader processes' CPU time so far, ms (summed; a process started again counts from its start). */
  readerCpu(): number;
  /** The reader processes' RSS now (summed), bytes. */
  readerRss(): number;
  /** The reader's RSS once started. */
  readonly rssStart: number;
  /** The reference stream client, and every event it got, by the ETag of its version. */
  readonly ref: SseSocket;
  readonly seen: Map<string, SseEvent>;
  readonly poller: Poller;
  /** The child processes holding the background and fan-out stream clients. */
  readonly children: ClientsChild[];
  /** The ETag of the measured feed's newest version. */
  etag: string;
  /** The size of an event frame as the reference client got it. */
  readonly frameBytes: number;
  /** Rename a new version of `t` into the inbox; its rename time, and its event at `ref`. */
  drop(t: DocTemplate): Promise<{ t0: number; event: Promise<SseEvent | undefined> }>;
  openStreams(n: number, key: string, sampleEvery: number, url?: string): Promise<number>;
  latencies(t0: [number, number][], keep?: boolean): Promise<{ ms: number[]; missing: number; behind: number }>;
  pids(): number[];
}
