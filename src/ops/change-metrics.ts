/** The change endpoints' metrics, fed by the reader: open streams, events pushed, slow clients dropped, long-polls waiting. */
import { Counter, Gauge, type Registry } from 'prom-client';

export interface ChangeMetrics {
  readonly changes: {
    opened(): void;
    closed(): void;
    sent(events: number): void;
    droppedSlow(): void;
    waiting(delta: number): void;
  };
}

export function createChangeMetrics(registry: Registry): ChangeMetrics {
  const registers = [registry];
  const open = new Gauge({ name: 'oddsfiles_streams_open', help: 'Open /v1/stream connections.', registers });
  const sent = new Counter({ name: 'oddsfiles_stream_events_total', help: 'Change events written to /v1/stream connections.', registers });
  const dropped = new Counter({
    name: 'oddsfiles_stream_dropped_total',
    help: 'Stream clients dropped because they read too slowly (more than changes.max_buffered_bytes unread).',
    registers,
  });
  const waiting = new Gauge({ name: 'oddsfiles_longpolls_waiting', help: 'GET /v1/changes requests waiting for a change (long-poll).', registers });
  return {
    changes: {
      opened: () => open.inc(),
      closed: () => open.dec(),
      sent: (n) => sent.inc(n),
      droppedSlow: () => dropped.inc(),
      waiting: (delta) => waiting.inc(delta),
    },
  };
}
