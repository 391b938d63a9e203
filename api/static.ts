// The dashboard's built files (dist/dashboard, from `npm run build`), held in memory with their
// gzip and brotli forms made once at start: hashed assets are cached for a year, index.html
// is revalidated every time so a new build is picked up at once.
import { createHash } from "node:crypto";
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import type { IncomingMessage, ServerResponse } from "node:http";
import { extname, join, relative, sep } from "node:path";
import { fileURLToPath } from "node:url";
import { brotliCompressSync, constants, gzipSync } from "node:zlib";

const TYPES: Record<string, string> = {
  ".html": "text/html; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".svg": "image/svg+xml",
  ".png": "image/png",
  ".ico": "image/x-icon",
  ".json": "application/json",
  ".txt": "text/plain; charset=utf-8",
};

interface Asset {
  type: string;
  etag: string;
  raw: Buffer;
  gzip?: Buffer;
  br?: Buffer;
  immutable: boolean;
}

// Everything a page loads comes from this server: no CDN, no external fonts (air-gapped clusters).
const SECURITY_HEADERS = {
  "content-security-policy":
    "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'",
  "x-content-type-options": "nosniff",
  "referrer-policy": "no-referrer",
};

/** Where the build is: beside the sources (dist/dashboard) or beside the compiled api (dist/api → dist/dashboard). */
export function findDashboardBuild(): string | null {
  for (const rel of ["../dist/dashboard", "../dashboard"]) {
    const dir = fileURLToPath(new URL(rel, import.meta.url));
    if (isBuild(dir)) return dir;
  }
  return null;
}

/** Whether `dir` holds a build: index.html and assets/ (the sources' dashboard/index.html, beside api/, has not). */
function isBuild(dir: string): boolean {
  return existsSync(join(dir, "index.html")) && existsSync(join(dir, "assets"));
}

/** What to do in the checkout to get a dashboard, for the log line at start and the page at `/`. */
export const NOT_BUILT_HINT = "run `npm run build` (or `npm run -s build:dashboard`) in the checkout";

// Served at `/` when the dashboard is wanted but was never built (a clone without `npm run
// build`): a browser gets a page saying what to do, not the API's JSON 404.
const NOT_BUILT_PAGE = `<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><title>Conveyor: dashboard not built</title></head>
<body style="font-family: system-ui, sans-serif; max-width: 40rem; margin: 3rem auto; line-height: 1.5">
<h1>The dashboard is not built</h1>
<p>This <code>conveyor api</code> serves the job API, but it found no built dashboard
(<code>dist/dashboard</code>). To build it, ${NOT_BUILT_HINT.replace(/`([^`]+)`/g, "<code>$1</code>")},
then restart <code>conveyor api</code>.</p>
<p>The job API answers as usual meanwhile (<a href="/openapi.json">/openapi.json</a> describes it).</p>
</body>
</html>
`;

export class StaticFiles {
  private readonly assets = new Map<string, Asset>();
  /** The dashboard was asked for but `dir` holds no build: `/` answers NOT_BUILT_PAGE. */
  readonly notBuilt: boolean;

  /** `dir`: the build to serve; null: the dashboard is off. `wanted`: it was asked for (a missing build is then told). */
  constructor(dir: string | null, wanted = dir !== null) {
    if (dir && isBuild(dir)) this.load(dir, dir);
    this.notBuilt = wanted && !this.available;
  }

  get available(): boolean {
    return this.assets.has("/index.html");
  }

  private load(root: string, dir: string): void {
    for (const name of readdirSync(dir)) {
      const path = join(dir, name);
      if (statSync(path).isDirectory()) {
        this.load(root, path);
        continue;
      }
      const raw = readFileSync(path);
      const type = TYPES[extname(name)] ?? "application/octet-stream";
      const compressible = /text|javascript|json|svg/.test(type) && raw.length > 512;
      const url = "/" + relative(root, path).split(sep).join("/");
      this.assets.set(url, {
        type,
        raw,
        etag: `"${createHash("sha256").update(raw).digest("base64url").slice(0, 22)}"`,
        gzip: compressible ? gzipSync(raw, { level: 9 }) : undefined,
        br: compressible
          ? brotliCompressSync(raw, { params: { [constants.BROTLI_PARAM_QUALITY]: 11 } })
          : undefined,
        immutable: url.startsWith("/assets/"),
      });
    }
  }

  /** Serve a GET for `pathname` if it is a dashboard file (or `/`); false when not ours. */
  serve(req: IncomingMessage, res: ServerResponse, pathname: string): boolean {
    const asset = this.assets.get(pathname === "/" ? "/index.html" : pathname);
    if (!asset) {
      if (!this.notBuilt || (pathname !== "/" && pathname !== "/index.html")) return false;
      res.writeHead(503, {
        ...SECURITY_HEADERS,
        "content-type": TYPES[".html"]!,
        "cache-control": "no-store",
        "content-length": String(Buffer.byteLength(NOT_BUILT_PAGE)),
      });
      res.end(req.method === "HEAD" ? undefined : NOT_BUILT_PAGE);
      return true;
    }
    const headers: Record<string, string> = {
      ...SECURITY_HEADERS,
      "content-type": asset.type,
      etag: asset.etag,
      vary: "Accept-Encoding",
      "cache-control": asset.immutable ? "public, max-age=31536000, immutable" : "no-cache",
    };
    if (req.headers["if-none-match"] === asset.etag) {
      res.writeHead(304, headers);
      res.end();
      return true;
    }
    const accept = String(req.headers["accept-encoding"] ?? "");
    let body = asset.raw;
    if (asset.br && /\bbr\b/.test(accept)) {
      body = asset.br;
      headers["content-encoding"] = "br";
    } else if (asset.gzip && /\bgzip\b/.test(accept)) {
      body = asset.gzip;
      headers["content-encoding"] = "gzip";
    }
    headers["content-length"] = String(body.length);
    res.writeHead(200, headers);
    res.end(req.method === "HEAD" ? undefined : body);
    return true;
  }
}
