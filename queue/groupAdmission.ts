// What the operator reads to cap a pool at the replicas its groups can use (docs/protocol.md,
// "Groups"): how many grouped waiting jobs could start now. A bounded read (group_admission.lua):
// it walks the ring of admissible groups only until the answer can no longer change a decision.
import { assertQueueName, QueueKeys } from "./keys.ts";
import * as gateway from "./gateway.ts";
import type { RedisClient } from "./scripts.ts";

/** Groups looked at per read at most, whatever `enough` is (a poll stays near a millisecond). */
export const GROUP_ADMISSION_SCAN_LIMIT = 2_000;

export interface GroupAdmission {
  /** Jobs waiting in all groups together. */
  waiting: number;
  /**
   * Of those, how many could start now: Σ over the groups in the ring of min(waiting, room)
   * (room = limit − running; ∞ without a limit; 0 paused; at most the group rate's max). Exact
   * when `complete`; otherwise an estimate (the scanned groups' average for the rest).
   */
  admissible: number;
  /** Groups looked at, and groups in the ring. */
  scanned: number;
  ring: number;
  /** The scan saw the whole ring, or reached `enough` (then `admissible` ≥ enough is all that matters). */
  complete: boolean;
}

/**
 * How many of the queue's grouped waiting jobs could start now, read in one call that stops once
 * the sum reaches `enough` (the caller's largest useful answer, e.g. maxReplicas × concurrency)
 * or after GROUP_ADMISSION_SCAN_LIMIT groups.
 */
export async function groupAdmission(
  redis: RedisClient,
  queue: string,
  enough: number,
  scanLimit = GROUP_ADMISSION_SCAN_LIMIT,
): Promise<GroupAdmission> {
  assertQueueName(queue);
  const { waiting, sum, scanned, ring } = await gateway.groupAdmission(redis, {
    keys: new QueueKeys(queue),
    enough: Math.max(0, Math.ceil(enough)),
    scanLimit: Math.max(0, Math.floor(scanLimit)),
  });
  const complete = scanned >= ring || sum >= enough;
  // (past the scan limit: the groups not looked at are assumed like the ones that were)
  const admissible = complete || scanned === 0 ? sum : Math.round((sum * ring) / scanned);
  return { waiting, admissible: Math.min(waiting, admissible), scanned, ring, complete };
}
