// The common bed of worker tests: a throwaway Redis, a producer and admin on it, a temp dir,
// and real `conveyor worker` processes (recording handler by default) stopped at the end.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { connectRedis, Producer, QueueAdmin, type RedisClient } from "../../queue/index.ts";
import { stopProcess } from "./processes.ts";
import { RedisServer } from "./redis.ts";
import { RECORDING_HANDLER, startWorker, type WorkerProcess } from "./workers.ts";

export class WorkerTestBed {
  server!: RedisServer;
  redis!: RedisClient;
  producer!: Producer;
  admin!: QueueAdmin;
  dir!: string;
  readonly workers: WorkerProcess[] = [];
  private started = 0;
  private readonly name: string;

  constructor(name: string) {
    this.name = name;
  }

  async start(): Promise<void> {
    this.server = await RedisServer.start();
    this.redis = connectRedis(this.server.url);
    this.producer = new Producer(this.redis);
    this.admin = new QueueAdmin(this.redis);
    this.dir = mkdtempSync(join(tmpdir(), `cvy-${this.name}-`));
  }

  async stop(): Promise<void> {
    await Promise.all(this.workers.map((w) => stopProcess(w, 2000)));
    this.redis.disconnect();
    await this.server.stop();
    if (process.env.CONVEYOR_KEEP_TMP) console.log(`kept ${this.dir}`);
    else rmSync(this.dir, { recursive: true, force: true });
  }

  /** Where the recording handler logs the executions of `queue`. */
  execLog(queue: string): string {
    return join(this.dir, `${queue.replace("/", "_")}.exec`);
  }

  /** A worker on `queue` (recording handler, its own exec log); `env` overrides anything. */
  async worker(
    queue: string,
    env: Record<string, string> = {},
    opts: { waitReady?: boolean } = {},
  ): Promise<WorkerProcess> {
    const w = await startWorker({
      dir: this.dir,
      name: `${this.name}${++this.started}`,
      waitReady: opts.waitReady,
      env: {
        REDIS_URL: this.server.url,
        CONVEYOR_QUEUE: queue,
        CONVEYOR_HANDLER: RECORDING_HANDLER,
        EXEC_LOG: this.execLog(queue),
        LOG_LEVEL: "info",
        ...env,
      },
    });
    this.workers.push(w);
    return w;
  }
}
