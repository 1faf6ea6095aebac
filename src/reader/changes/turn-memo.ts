/**
 * Answers shared within one turn of the event loop, by allow-list (its patterns array, the same
 * object for every request of a key) and a key of the caller's: the clients of one key woken by
 * the same change, or whose windows end together, share one answer. Forgotten on the next turn.
 */
export type TurnMemo<V> = (patterns: readonly string[], key: string, make: () => V | undefined) => V | undefined;

export function createTurnMemo<V>(): TurnMemo<V> {
  let made = new WeakMap<readonly string[], Map<string, V>>();
  let clearing = false;
  return (patterns, key, make) => {
    if (!clearing) {
      clearing = true;
      setImmediate(() => {
        made = new WeakMap();
        clearing = false;
      });
    }
    let byKey = made.get(patterns);
    if (!byKey) made.set(patterns, (byKey = new Map()));
    let value = byKey.get(key);
    if (value === undefined) {
      value = make();
      // Nothing made (e.g. a range no longer in memory): asked again next time.
      if (value !== undefined) byKey.set(key, value);
    }
    return value;
  };
}
