import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { CircuitBreaker, type CircuitState } from "./circuitBreaker.ts";

describe("circuit breaker", () => {
  it("opens after the threshold, doubles its pause up to 10× while the dependency stays down, and starts over after a success", () => {
    const changes: [CircuitState, number][] = [];
    const cb = new CircuitBreaker(2, 100, (state, d) => changes.push([state, d.pauseMs]));
    let now = 0;
    cb.dependencyFailure(now);
    assert.equal(cb.state, "closed");
    const pauses: number[] = [];
    for (let i = 0; i < 6; i++) {
      cb.dependencyFailure(now);
      assert.equal(cb.state, "open");
      pauses.push(cb.openUntil - now);
      now = cb.openUntil;
      assert.equal(cb.allowance(8, now), 1, "half-open lets one job through");
    }
    assert.deepEqual(pauses, [100, 200, 400, 800, 1000, 1000]);
    cb.success();
    assert.equal(cb.state, "closed");
    assert.equal(cb.allowance(8, now), 8);
    cb.dependencyFailure(now);
    cb.dependencyFailure(now);
    assert.equal(cb.openUntil - now, 100, "the pause starts over");
    assert.deepEqual(changes.at(-1), ["open", 100]);
  });
});
