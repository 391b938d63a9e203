"""The next run of a cron expression in a time zone, as the TypeScript side computes it with
croner: 5 fields (minute hour day month weekday) or 6 (seconds first), `*`, `?`, ranges, steps,
lists, month and weekday names, the @nicknames; day of month and day of week both restricted
match either (Vixie cron). Croner's L, W and # are refused here (use the CLI for those)."""

from datetime import datetime, timedelta, timezone
from typing import List, Optional, Set, Tuple

try:
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError
except ImportError:  # pragma: no cover - Python 3.8 has no zoneinfo
    ZoneInfo = None  # type: ignore[assignment,misc]
    ZoneInfoNotFoundError = KeyError  # type: ignore[assignment,misc]


class CronError(ValueError):
    """A cron expression or time zone the schedule cannot use; the message names it."""


_NICKNAMES = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
_MONTHS = ["JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"]
_DAYS = ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"]
#: Years searched ahead before a cron expression is taken never to fire (as croner's bound).
_SEARCH_YEARS = 5


def _field(text: str, low: int, high: int, names: Optional[List[str]], what: str, expr: str) -> Tuple[Set[int], bool]:
    """The values a field matches, and whether it is a wildcard."""
    if text in ("*", "?"):
        return set(range(low, high + 1)), True
    upper = text.upper()
    if names:
        for i, n in enumerate(names):
            upper = upper.replace(n, str(i + (1 if what == "month" else 0)))
    out: Set[int] = set()
    for part in upper.split(","):
        base, _, step_text = part.partition("/")
        try:
            step = int(step_text) if step_text else 1
            if base in ("*", "?"):
                start, end = low, high
            elif "-" in base:
                a, b = base.split("-", 1)
                start, end = int(a), int(b)
            else:
                start = int(base)
                end = high if step_text else start
        except ValueError:
            raise CronError(f"invalid cron expression {expr!r}: {what} field {text!r} is not supported") from None
        top = 7 if what == "weekday" else high
        if step < 1 or start < low or end > top or start > end:
            raise CronError(f"invalid cron expression {expr!r}: {what} field {text!r} is out of range {low}-{top}")
        out.update(range(start, end + 1, step))
    if what == "weekday" and 7 in out:
        out.discard(7)
        out.add(0)
    return out, False


def _instants(local: datetime, fixed: bool) -> List[int]:
    """The instants (ms) a wall-clock time names, as croner: in an hour a DST change repeats, the
    first pass only for a fixed time of day, both passes otherwise; in an hour it skips, the
    moment of the change for a fixed time, nothing otherwise."""
    first = int(local.replace(fold=0).timestamp())
    second = int(local.replace(fold=1).timestamp())
    if first == second:
        return [first * 1000]
    if first < second:
        return [first * 1000] if fixed else [first * 1000, second * 1000]
    if not fixed:
        return []
    offset_after = datetime.fromtimestamp(first, local.tzinfo).utcoffset()
    low, high = second, first
    while low < high:
        mid = (low + high) // 2
        if datetime.fromtimestamp(mid, local.tzinfo).utcoffset() == offset_after:
            high = mid
        else:
            low = mid + 1
    return [low * 1000]


def next_run(expr: str, tz: Optional[str], after_ms: int) -> Optional[int]:
    """The first run strictly after `after_ms` (ms since the epoch, whole seconds), or None."""
    if tz is None:
        zone = timezone.utc
    else:
        if ZoneInfo is None:
            raise CronError("a cron schedule's time zone needs Python 3.9 or later (zoneinfo)")
        try:
            zone = ZoneInfo(tz)  # type: ignore[assignment]
        except (ZoneInfoNotFoundError, ValueError):
            raise CronError(f"invalid time zone {tz!r}: use an IANA name such as Europe/Berlin") from None
    fields = _NICKNAMES.get(expr.strip().lower(), expr).split()
    if len(fields) == 5:
        fields = ["0", *fields]
    if len(fields) != 6:
        raise CronError(f"invalid cron expression {expr!r}: expected 5 fields (or 6 with seconds first)")
    seconds, _ = _field(fields[0], 0, 59, None, "second", expr)
    minutes, _ = _field(fields[1], 0, 59, None, "minute", expr)
    hours, _ = _field(fields[2], 0, 23, None, "hour", expr)
    dom, star_dom = _field(fields[3], 1, 31, None, "day of month", expr)
    months, _ = _field(fields[4], 1, 12, _MONTHS, "month", expr)
    dow, star_dow = _field(fields[5], 0, 6, _DAYS, "weekday", expr)
    fixed = all(len(values) == 1 and "*" not in text and "/" not in text
                for values, text in ((seconds, fields[0]), (minutes, fields[1]), (hours, fields[2])))
    day = datetime.fromtimestamp(after_ms // 1000 + 1, zone).date()
    for _ in range(366 * _SEARCH_YEARS):
        if day.month in months:
            in_month = day.day in dom
            in_week = (day.isoweekday() % 7) in dow
            if star_dow:
                match = in_month
            elif not star_dom:
                match = in_month or in_week
            else:
                match = in_week
            if match:
                # wall-clock order is time order except around a DST change: the earliest instant
                # of the times up to two hours past the first one that is still ahead
                best: Optional[int] = None
                best_wall = 0
                for h in sorted(hours):
                    for m in sorted(minutes):
                        for s in sorted(seconds):
                            wall = (h * 60 + m) * 60 + s
                            if best is not None and wall - best_wall > 7200:
                                return best
                            for at in _instants(datetime(day.year, day.month, day.day, h, m, s, tzinfo=zone), fixed):
                                if at > after_ms and (best is None or at < best):
                                    if best is None:
                                        best_wall = wall
                                    best = at
                if best is not None:
                    return best
        day += timedelta(days=1)
    return None
