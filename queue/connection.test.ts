import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { parseRedisUrl, RedisUrlError } from "./connection.ts";

describe("parseRedisUrl", () => {
  it("reads a Sentinel URL: the sentinels, the primary's name, TLS, ACL user and sentinel auth", () => {
    const t = parseRedisUrl(
      "redis-sentinel://app:s%40cret@10.0.0.1:26379,10.0.0.2/mymaster?tls=true&sentinelAuth=same&db=2",
      "",
    );
    assert.deepEqual(t.nodes, [
      { host: "10.0.0.1", port: 26379 },
      { host: "10.0.0.2", port: 26379 },
    ]);
    assert.equal(t.sentinelMaster, "mymaster");
    assert.equal(t.cluster, false);
    assert.equal(t.tls, true);
    assert.equal(t.username, "app");
    assert.equal(t.password, "s@cret");
    assert.equal(t.sentinelAuth, true);
    assert.equal(t.db, 2);
  });

  it("leaves the sentinels unauthenticated unless sentinelAuth=same", () => {
    const t = parseRedisUrl("redis-sentinel://h:1/m", "pw");
    assert.equal(t.sentinelAuth, false);
    assert.equal(t.password, "pw");
    assert.equal(t.tls, false);
  });

  it("names the URL and the problem when a Sentinel URL is wrong", () => {
    for (const [url, want] of [
      ["redis-sentinel://h:1", /names the primary/],
      ["redis-sentinel://h:1/", /names the primary/],
      ["redis-sentinel://h:1/m?sentinelAuth=maybe", /sentinelAuth=maybe/],
      ["redis-sentinel://h:1/m?tls=yes", /tls=yes/],
      ["redis-sentinel://h:1/m?db=x", /db=x/],
      ["redis-sentinel://h:1/m?master=x", /unknown option master/],
      ["redis-sentinel://h:99999/m", /invalid Redis host/],
    ] as const) {
      assert.throws(
        () => parseRedisUrl(url, ""),
        (e: Error) => {
          assert.ok(e instanceof RedisUrlError);
          assert.match(e.message, want);
          assert.ok(
            e.message.includes(url.replace(/\/\/[^@]*@/, "//")) || e.message.includes("h:99999"),
            e.message,
          );
          return true;
        },
      );
    }
  });

  it("masks the password in its errors", () => {
    assert.throws(
      () => parseRedisUrl("redis-sentinel://u:topsecret@h:1", ""),
      (e: Error) => !e.message.includes("topsecret") && e.message.includes("u:***@"),
    );
  });

  it("keeps plain and cluster URLs as they were", () => {
    assert.equal(parseRedisUrl("redis://h:1/3", "").db, 3);
    assert.equal(parseRedisUrl("redis-cluster://a:1,b:2?tls=true", "").tls, true);
    assert.equal(parseRedisUrl("redis://h:1", "").sentinelMaster, undefined);
    assert.throws(() => parseRedisUrl("redis://h:1/x", ""), /expected redis:\/\/host:port/);
    assert.throws(() => parseRedisUrl("http://h:1", ""), /redis-sentinel:\/\//);
  });
});
