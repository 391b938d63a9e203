// The stop signals bin/conveyor.js noted for a worker before its own handlers were installed: a
// pod deleted while the worker's modules still load (0.3–0.6 s here, more on a busy node) must
// stop with exit 0, not die by Node's default SIGTERM (143). A global by Symbol.for, because bin/
// is plain JavaScript that runs before any module of ours is loaded.
const HELD = Symbol.for("conveyor.heldSignals");

interface Held {
  signals: NodeJS.Signals[];
  release(): void;
}

/** The signals noted so far (oldest first); bin's listeners are removed, so call it after installing yours. */
export function takeHeldSignals(): NodeJS.Signals[] {
  const slot = globalThis as unknown as Record<symbol, Held | undefined>;
  const held = slot[HELD];
  if (!held) return [];
  held.release();
  delete slot[HELD];
  return [...held.signals];
}
