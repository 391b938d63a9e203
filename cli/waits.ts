// `--wait D` of `conveyor enqueue` and `conveyor flow`: print each job's end and exit with a
// code a script can branch on.
import type { JobOutcome, WaitResult } from "../queue/waiter.ts";
import { print } from "./command.ts";

/** Exit codes of a wait (docs/flows.md, "Waiting for results"). */
export const WAIT_EXIT = { completed: 0, dead: 3, cancelled: 4, timeout: 5 } as const;

export const WAIT_SETTING = {
  kind: "duration",
  arg: "D",
  help: "wait up to D (e.g. 30s) for the job(s) to end and print the outcome: exit 0 all completed, 3 one dead, 4 one cancelled/deleted/gone, 5 still open at D",
} as const;

/** The worst outcome's code: still open, then dead, then cancelled (deleted, unknown), else 0. */
export function waitExitCode(r: WaitResult): number {
  if (r.open.length > 0) return WAIT_EXIT.timeout;
  const states = Object.values(r.jobs).map((j) => j.state);
  if (states.includes("dead")) return WAIT_EXIT.dead;
  if (states.some((s) => s !== "completed")) return WAIT_EXIT.cancelled;
  return WAIT_EXIT.completed;
}

function line(j: JobOutcome): string {
  if (j.state === "completed") return `completed ${JSON.stringify(j.result ?? null)}`;
  const why = j.reason ?? j.error;
  return why ? `${j.state}: ${why}` : j.state;
}

/** Prints a wait's outcome: one line per job (`label` names it), or JSON. */
export function printWait(r: WaitResult, json: boolean, label: (id: string) => string = (id) => id): void {
  if (json) {
    print(JSON.stringify({ jobs: r.jobs, open: r.open }));
    return;
  }
  for (const [id, j] of Object.entries(r.jobs)) print(`${label(id)}  ${line(j)}`);
  for (const id of r.open) print(`${label(id)}  still open (timed out)`);
}
