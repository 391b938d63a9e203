// A 1 ms JS handler (bench/pythonHandler.ts): the work the handler kinds are compared around.
import { setTimeout as sleep } from "node:timers/promises";

export default async function oneMs(): Promise<null> {
  await sleep(1);
  return null;
}
