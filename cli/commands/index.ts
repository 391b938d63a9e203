// Every `conveyor` command, in the order `conveyor --help` lists them. A new command: a file
// here (defineCommand in ../command.ts) and a line below; `npm run gen:config` updates the docs.
import type { Command } from "../command.ts";
import api from "./api.ts";
import cancel from "./cancel.ts";
import deleteJobs from "./delete.ts";
import dlq from "./dlq.ts";
import enqueue from "./enqueue.ts";
import events from "./events.ts";
import group from "./group.ts";
import job from "./job.ts";
import limit from "./limit.ts";
import operator from "./operator.ts";
import { pause, resume } from "./pause.ts";
import promote from "./promote.ts";
import records from "./records.ts";
import resource from "./resource.ts";
import schedule from "./schedule.ts";
import scripts from "./scripts.ts";
import stats from "./stats.ts";
import worker from "./worker.ts";

export const COMMANDS: readonly Command[] = [
  enqueue,
  stats,
  job,
  dlq,
  cancel,
  promote,
  deleteJobs,
  pause,
  resume,
  limit,
  group,
  resource,
  schedule,
  records,
  events,
  api,
  scripts,
  worker,
  operator,
];
