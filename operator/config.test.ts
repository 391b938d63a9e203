import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { loadOperatorConfig, OPERATOR_USAGE } from "./config.ts";

describe("operator configuration", () => {
  it("boolean flags work without =true", () => {
    const c = loadOperatorConfig(["--leader-elect", "--metrics-api", "--workers", "2"], {});
    assert.equal(c.leaderElect, true);
    assert.equal(c.metricsApi, true);
    assert.equal(c.workers, 2);
    assert.equal(loadOperatorConfig(["--metrics-api=false"], {}).metricsApi, false);
    assert.equal(loadOperatorConfig(["--leader-elect", "false"], {}).leaderElect, false);
  });

  it("durations take 250ms/30s/5m/1h; bare numbers stay seconds", () => {
    const c = loadOperatorConfig(["--relist", "5m", "--lease-duration", "20s", "--renew-deadline", "15"], {});
    assert.equal(c.relistMs, 300_000);
    assert.equal(c.leaseDurationMs, 20_000);
    assert.equal(c.renewDeadlineMs, 15_000);
    assert.equal(loadOperatorConfig([], { CONVEYOR_RETRY_PERIOD: "1500ms" }).retryPeriodMs, 1500);
    // The former names, for one release (with a warning on stderr).
    assert.equal(loadOperatorConfig([], { CONVEYOR_RETRY_PERIOD_SECONDS: "1500ms" }).retryPeriodMs, 1500);
    assert.equal(loadOperatorConfig(["--relist-seconds", "5m"], {}).relistMs, 300_000);
    assert.throws(
      () => loadOperatorConfig(["--renew-deadline", "20s"], {}),
      /--renew-deadline \/ CONVEYOR_RENEW_DEADLINE \(20000ms\) must be less than --lease-duration/,
    );
  });

  it("--help says once how durations are written", () => {
    assert.equal(OPERATOR_USAGE.match(/a bare number is seconds/g)?.length, 1);
  });
});
