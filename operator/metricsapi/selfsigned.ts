// A self-signed serving certificate (EC P-256, ECDSA-SHA256), written in DER by hand because
// node:crypto can read X.509 but not make it, and the operator image has no openssl. Used when
// no --metrics-api-cert is given: the APIService then needs insecureSkipTLSVerify or this cert
// as its caBundle (it is logged at start, it is not secret).
import { createPrivateKey, generateKeyPairSync, randomBytes, sign, X509Certificate } from "node:crypto";
import { isIP } from "node:net";

function len(n: number): Buffer {
  if (n < 0x80) return Buffer.from([n]);
  const bytes: number[] = [];
  while (n > 0) {
    bytes.unshift(n & 0xff);
    n >>= 8;
  }
  return Buffer.from([0x80 | bytes.length, ...bytes]);
}

function tlv(tag: number, ...content: Buffer[]): Buffer {
  const body = Buffer.concat(content);
  return Buffer.concat([Buffer.from([tag]), len(body.length), body]);
}

const seq = (...c: Buffer[]) => tlv(0x30, ...c);
const set = (...c: Buffer[]) => tlv(0x31, ...c);

function oid(dotted: string): Buffer {
  const parts = dotted.split(".").map(Number);
  const out: number[] = [40 * parts[0]! + parts[1]!];
  for (const p of parts.slice(2)) {
    const stack: number[] = [p & 0x7f];
    let v = Math.floor(p / 128);
    while (v > 0) {
      stack.unshift((v & 0x7f) | 0x80);
      v = Math.floor(v / 128);
    }
    out.push(...stack);
  }
  return tlv(0x06, Buffer.from(out));
}

function time(d: Date): Buffer {
  const iso = d.toISOString().replace(/[-:T]/g, "").slice(0, 14); // YYYYMMDDHHMMSS
  return d.getUTCFullYear() < 2050
    ? tlv(0x17, Buffer.from(`${iso.slice(2)}Z`))
    : tlv(0x18, Buffer.from(`${iso}Z`));
}

/**
 * The iPAddress SAN octets: 4 for IPv4, 16 for IPv6. An IPv4-mapped address (::ffff:a.b.c.d)
 * is written as its 4-byte IPv4, as Go's crypto/x509 does, since that is what clients dial.
 */
function ipBytes(ip: string): Buffer {
  if (isIP(ip) === 4) return Buffer.from(ip.split(".").map(Number));
  // A trailing dotted quad (::ffff:10.0.0.1) is the last two 16-bit groups.
  const dotted = /^(.*:)(\d+\.\d+\.\d+\.\d+)$/.exec(ip);
  let text = ip;
  if (dotted) {
    const [a, b, c, d] = ipBytes(dotted[2]!);
    text = `${dotted[1]}${((a! << 8) | b!).toString(16)}:${((c! << 8) | d!).toString(16)}`;
  }
  const [head = "", tail = ""] = text.split("::");
  const h = head ? head.split(":") : [];
  const t = tail ? tail.split(":") : [];
  const groups = text.includes("::") ? [...h, ...Array(8 - h.length - t.length).fill("0"), ...t] : h;
  const bytes = Buffer.concat(
    groups.map((g) => Buffer.from([(parseInt(g, 16) >> 8) & 0xff, parseInt(g, 16) & 0xff])),
  );
  const v4Mapped = bytes.subarray(0, 10).every((x) => x === 0) && bytes[10] === 0xff && bytes[11] === 0xff;
  return v4Mapped ? bytes.subarray(12) : bytes;
}

export interface SelfSigned {
  cert: string;
  key: string;
}

/** A serving certificate for `hosts` (DNS names and IPs), valid for `days`. */
export function selfSignedCert(commonName: string, hosts: string[], days = 3650): SelfSigned {
  const { publicKey, privateKey } = generateKeyPairSync("ec", { namedCurve: "prime256v1" });
  const spki = publicKey.export({ type: "spki", format: "der" });
  const ecdsaSha256 = seq(oid("1.2.840.10045.4.3.2"));
  const name = seq(set(seq(oid("2.5.4.3"), tlv(0x0c, Buffer.from(commonName, "utf8")))));
  const serial = randomBytes(16);
  // Positive and minimal in DER: a leading 0x00 before a byte < 0x80 is "illegal padding".
  serial[0] = (serial[0]! & 0x7f) | 0x40;
  const now = Date.now();
  const validity = seq(time(new Date(now - 5 * 60_000)), time(new Date(now + days * 86_400_000)));
  const san = seq(
    ...hosts.map((h) => (isIP(h) ? tlv(0x87, ipBytes(h)) : tlv(0x82, Buffer.from(h, "ascii")))),
  );
  const ext = (id: string, critical: boolean, value: Buffer) =>
    seq(oid(id), ...(critical ? [tlv(0x01, Buffer.from([0xff]))] : []), tlv(0x04, value));
  const extensions = tlv(
    0xa3,
    seq(
      ext("2.5.29.19", true, seq()), // basicConstraints: not a CA
      ext("2.5.29.15", true, tlv(0x03, Buffer.from([0x07, 0x80]))), // keyUsage: digitalSignature
      ext("2.5.29.37", false, seq(oid("1.3.6.1.5.5.7.3.1"))), // extKeyUsage: serverAuth
      ext("2.5.29.17", false, san), // subjectAltName
    ),
  );
  const tbs = seq(
    tlv(0xa0, tlv(0x02, Buffer.from([2]))),
    tlv(0x02, serial),
    ecdsaSha256,
    name,
    validity,
    name,
    spki,
    extensions,
  );
  const signature = sign("sha256", tbs, privateKey);
  const der = seq(tbs, ecdsaSha256, tlv(0x03, Buffer.from([0]), signature));
  const pem = `-----BEGIN CERTIFICATE-----\n${der
    .toString("base64")
    .replace(/(.{64})/g, "$1\n")
    .replace(/\n$/, "")}\n-----END CERTIFICATE-----\n`;
  // Parse once: fails here, not in a TLS handshake, if the encoding were wrong.
  new X509Certificate(pem);
  return {
    cert: pem,
    key: createPrivateKey(privateKey.export({ type: "pkcs8", format: "pem" }))
      .export({ type: "pkcs8", format: "pem" })
      .toString(),
  };
}
