// Packages loaded only when a feature needs them: the optional peer dependencies of
// @conveyor-dev/queue (croner for cron schedules, @opentelemetry/api for tracing, ajv and
// ajv-formats for stage contracts), so an app that uses none installs ioredis alone. Loaded with
// require (all ship CommonJS builds) so the callers stay synchronous and the library has no
// top-level await.
import { createRequire } from "node:module";

const load = createRequire(import.meta.url);

export class MissingPackageError extends Error {
  override name = "MissingPackageError";
}

/** `name`'s exports; a MissingPackageError naming the package and the feature when it is not installed. */
export function requireOptional<T>(name: string, feature: string): T {
  try {
    return load(name) as T;
  } catch (err) {
    const e = err as NodeJS.ErrnoException;
    if (e.code === "MODULE_NOT_FOUND" && e.message.includes(`'${name}'`))
      throw new MissingPackageError(`${feature} needs the ${name} package: npm install ${name}`);
    throw err;
  }
}
