/**
 * One timer for the ends of many conflation windows. A window's end is rounded up to the next
 * GRANULARITY_MS and joins the others due then; the timer is armed for the earliest. Rounding up
 * keeps "at most one write per window" and delays a held change by at most GRANULARITY_MS more.
 */

/** Told when its window has ended. */
export interface WindowEnd {
  due(): void;
}

export interface WindowTimers {
  /** `w.due()` at `atMs` (Date.now() clock) or up to GRANULARITY_MS later. */
  at(atMs: number, w: WindowEnd): void;
  /** Forget everything scheduled (shutdown). */
  clear(): void;
}

const GRANULARITY_MS = 10;

export function createWindowTimers(): WindowTimers {
  /** Slot time → what ends then; `slots` sorted, earliest first. */
  const bySlot = new Map<number, WindowEnd[]>();
  const slots: number[] = [];
  let timer: NodeJS.Timeout | undefined;
  let armedFor = Infinity;

  const arm = () => {
    const first = slots[0];
    if (first === undefined || first === armedFor) return;
    clearTimeout(timer);
    armedFor = first;
    timer = setTimeout(run, Math.max(0, first - Date.now()));
    timer.unref();
  };

  const run = () => {
    timer = undefined;
    armedFor = Infinity;
    const now = Date.now();
    while (slots.length > 0 && slots[0]! <= now) {
      const slot = slots.shift()!;
      const ends = bySlot.get(slot)!;
      bySlot.delete(slot);
      for (const w of ends) w.due();
    }
    arm();
  };

  return {
    at(atMs, w) {
      const slot = Math.ceil(atMs / GRANULARITY_MS) * GRANULARITY_MS;
      let ends = bySlot.get(slot);
      if (!ends) {
        bySlot.set(slot, (ends = []));
        // Few slots (a window's length / GRANULARITY_MS at most per window length): a sorted insert.
        let i = slots.length;
        while (i > 0 && slots[i - 1]! > slot) i--;
        slots.splice(i, 0, slot);
      }
      ends.push(w);
      arm();
    },
    clear() {
      clearTimeout(timer);
      timer = undefined;
      armedFor = Infinity;
      bySlot.clear();
      slots.length = 0;
    },
  };
}
