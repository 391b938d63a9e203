// Job records: the outbox drained into PostgreSQL. See docs/records.md.
export {
  JobRecorder,
  RECORDER_GROUP,
  startRecorder,
  type RecorderOptions,
  type RecorderStats,
  type StartRecorderOptions,
} from "./recorder.ts";
export {
  createPool,
  describeDatabaseUrl,
  migrate,
  writeBatch,
  DEFAULT_MAX_CONNECTIONS,
  type PoolOptions,
} from "./postgres.ts";
export { DEFAULT_OUTBOX_MAX_BYTES } from "./outboxBudget.ts";
export { MIGRATIONS, type Migration } from "./migrations.ts";
export { foldEvents, parseEntry, type OutboxEvent, type RawEntry } from "./events.ts";
export { recordedFlow } from "./flows.ts";
export { joinStages, recordedStages, type RecordedStage, type StageView } from "./stages.ts";
export {
  containment,
  isRecordsPosition,
  progressWhile,
  recentMinutes,
  RecordsQueries,
  RecordsQueryError,
  STATS_WINDOWS,
  FLOW_MAX_JOBS,
  type FlowJobRow,
  type JobRow,
  type MinuteStats,
  type RecordsPage,
  type RecordsPosition,
  type StatsWindow,
} from "./queries.ts";
