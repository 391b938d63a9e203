// JSON logs to stdout (what `kubectl logs` shows), one line per event.
import { pino, type Logger } from "pino";

export function createLogger(level: string, base: Record<string, unknown>): Logger {
  return pino({
    level,
    base,
    timestamp: pino.stdTimeFunctions.isoTime,
    formatters: { level: (label) => ({ level: label }) },
  });
}
