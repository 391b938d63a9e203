import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { X509Certificate } from "node:crypto";
import { selfSignedCert } from "./selfsigned.ts";

describe("self-signed serving certificate", () => {
  it("names DNS names, IPv4 and IPv6 addresses in its subject alternative names", () => {
    const { cert } = selfSignedCert("test", ["localhost", "10.0.0.1", "fd00::1"]);
    const san = new X509Certificate(cert).subjectAltName ?? "";
    assert.match(san, /DNS:localhost/);
    assert.match(san, /IP Address:10\.0\.0\.1(,|$)/);
    assert.match(san, /IP Address:FD00:0:0:0:0:0:0:1/i);
  });

  it("encodes an IPv4-mapped IPv6 host as its 4-byte IPv4 address, not a 14-byte one", () => {
    const { cert } = selfSignedCert("test", ["::ffff:10.0.0.1", "::FFFF:192.168.1.2"]);
    const x = new X509Certificate(cert);
    assert.match(x.subjectAltName ?? "", /^IP Address:10\.0\.0\.1, IP Address:192\.168\.1\.2$/);
    assert.equal(x.checkIP("10.0.0.1"), "10.0.0.1");
  });

  it("writes a minimal DER serial number every time (a leading zero byte made 1 in 256 certificates unreadable)", () => {
    for (let i = 0; i < 1000; i++) {
      const serial = new X509Certificate(selfSignedCert("test", ["localhost"]).cert).serialNumber;
      assert.match(serial, /^[4-7][0-9A-F]{31}$/);
    }
  });
});
