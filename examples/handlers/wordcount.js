#!/usr/bin/env node
// A `command` handler (examples/workerpool-command.yaml): any program. The worker runs its argv
// directly (no shell), writes the job data as JSON to stdin and reads the result as JSON from
// stdout. Exit 0 = done; exit 65 (EX_DATAERR) = bad input, dead-lettered without retries; any
// other exit = failed attempt, retried. The job's identity is in CONVEYOR_JOB_ID,
// CONVEYOR_QUEUE, CONVEYOR_ATTEMPT and CONVEYOR_EXECUTION_ID. On SIGTERM (job timeout, or hand-
// back by a stopping worker) exit promptly; the worker sends SIGKILL after a grace period.
let input = "";
process.stdin.setEncoding("utf8");
process.stdin.on("data", (chunk) => (input += chunk));
process.stdin.on("end", () => {
  let data;
  try {
    data = JSON.parse(input);
  } catch {
    process.stderr.write("input is not JSON\n");
    process.exit(65);
  }
  if (typeof data?.text !== "string") {
    process.stderr.write("wordcount needs {text: string}\n");
    process.exit(65);
  }
  const words = data.text.split(/\s+/).filter(Boolean);
  process.stdout.write(`${JSON.stringify({ words: words.length, job: process.env.CONVEYOR_JOB_ID })}\n`);
});
