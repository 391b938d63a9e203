// The external metrics API's serving certificate from files (a mounted Secret, e.g. cert-manager's),
// re-read periodically: a rotated certificate is served to new connections without a restart.
// Polling, not fs.watch: kubelet swaps a mounted Secret through a `..data` symlink, which inotify
// on the file itself does not see (controller-runtime's certwatcher polls for the same reason).
import { readFileSync } from "node:fs";
import { createSecureContext } from "node:tls";
import type { Logger } from "pino";

export interface CertificatePair {
  cert: string;
  key: string;
}

export class ServingCertificate {
  private current: CertificatePair;
  private timer: NodeJS.Timeout | undefined;
  private readonly certFile: string;
  private readonly keyFile: string;
  private readonly log: Logger | undefined;

  /** Reads both files now; throws when they cannot be read or do not make a key pair. */
  constructor(certFile: string, keyFile: string, log?: Logger) {
    this.certFile = certFile;
    this.keyFile = keyFile;
    this.log = log;
    this.current = this.read();
  }

  get pair(): CertificatePair {
    return this.current;
  }

  /**
   * Re-reads the files; calls `onChange` with a new valid pair. A half-written or mismatched
   * pair (cert and key are two files, updated one after the other) keeps the one in use.
   */
  check(onChange: (pair: CertificatePair) => void): boolean {
    let next: CertificatePair;
    try {
      next = this.read();
    } catch (err) {
      this.log?.warn(
        { err: (err as Error).message },
        "serving certificate could not be reloaded; keeping the one in use",
      );
      return false;
    }
    if (next.cert === this.current.cert && next.key === this.current.key) return false;
    this.current = next;
    onChange(next);
    this.log?.info({ certFile: this.certFile }, "serving certificate reloaded");
    return true;
  }

  watch(intervalMs: number, onChange: (pair: CertificatePair) => void): void {
    this.timer = setInterval(() => this.check(onChange), intervalMs);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
  }

  private read(): CertificatePair {
    const pair = { cert: readFileSync(this.certFile, "utf8"), key: readFileSync(this.keyFile, "utf8") };
    createSecureContext(pair); // throws on a key that does not match the certificate
    return pair;
  }
}
