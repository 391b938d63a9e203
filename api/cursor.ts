// Page cursors: an opaque base64url JSON pair (position, id) that a client passes back unchanged;
// the records' pages and the live Redis pages each check their own pair's shape.
import { HttpError } from "./http.ts";

export type CursorPair = [string | number, string];

export function encodeCursor(pair: CursorPair): string {
  return Buffer.from(JSON.stringify(pair)).toString("base64url");
}

/** The pair `encodeCursor` wrote, when `valid` accepts it; anything else is a 400 on query.cursor. */
export function decodeCursor<T extends CursorPair>(cursor: string, valid: (pair: unknown[]) => pair is T): T {
  try {
    const v = JSON.parse(Buffer.from(cursor, "base64url").toString("utf8")) as unknown;
    if (Array.isArray(v) && v.length === 2 && valid(v)) return v;
  } catch {
    // fall through
  }
  throw HttpError.field(
    400,
    "query.cursor",
    'query parameter "cursor" is malformed: pass back a page\'s `next` unchanged',
    "invalid_field",
  );
}
