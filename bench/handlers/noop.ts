// The no-op Conveyor handler for throughput runs: returns at once, so the numbers measure
// the queue protocol and the worker, never the work.
export default async function noop(): Promise<null> {
  return null;
}
