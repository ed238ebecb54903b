"""Standard five-field cron schedules: `minute hour day-of-month month day-of-week`.

Fields take `*`, numbers, lists (`1,15`), ranges (`1-5`), steps (`*/15`, `1-30/5`, `5/10`) and
names for months (`jan`) and weekdays (`mon`; 0 and 7 are Sunday). As in Vixie cron, when both
day fields are restricted a day matches if either does. `@hourly`, `@daily`, `@weekly`,
`@monthly` and `@yearly` are shorthands. Times are wall-clock times in the datetime's own zone.
"""

from __future__ import annotations

import calendar
from dataclasses import dataclass
from datetime import datetime, timedelta

from toolshell.errors import ErrorCode, ToolshellError

EXAMPLE = "'*/15 9-17 * * mon-fri' (every 15 minutes from 9:00 to 17:45 on weekdays)"
_FORM = "minute hour day-of-month month day-of-week"

_MONTHS = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]
_DAYS = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"]
_SHORTHANDS = {
    "@hourly": "0 * * * *",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@weekly": "0 0 * * 0",
    "@monthly": "0 0 1 * *",
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
}


@dataclass(frozen=True)
class _Field:
    name: str
    low: int
    high: int
    names: dict[str, int]


_FIELDS = (
    _Field("minute", 0, 59, {}),
    _Field("hour", 0, 23, {}),
    _Field("day-of-month", 1, 31, {}),
    _Field("month", 1, 12, {n: i + 1 for i, n in enumerate(_MONTHS)}),
    _Field("day-of-week", 0, 7, {n: i for i, n in enumerate(_DAYS)}),
)


def _bad(position: int, spec: _Field, text: str, why: str) -> ToolshellError:
    return ToolshellError(
        ErrorCode.INVALID_INPUT,
        f"cron field {position} ({spec.name}) {text!r} {why}; a schedule is five fields, {_FORM}, e.g. {EXAMPLE}",
    )


def _value(position: int, spec: _Field, text: str, whole: str) -> int:
    word = text.lower()
    if word in spec.names:
        return spec.names[word]
    if not word.isdigit():
        names = f" or a name like {next(iter(spec.names))}" if spec.names else ""
        raise _bad(position, spec, whole, f"is not a number{names}")
    value = int(word)
    if not spec.low <= value <= spec.high:
        raise _bad(position, spec, whole, f"is out of range {spec.low}-{spec.high}")
    return value


def _parse_field(position: int, spec: _Field, text: str) -> frozenset[int]:
    values: set[int] = set()
    for part in text.split(","):
        base, slash, step_text = part.partition("/")
        step = 1
        if slash:
            if not step_text.isdigit() or int(step_text) == 0:
                raise _bad(position, spec, text, f"has a bad step {step_text!r}; a step is a whole number from 1")
            step = int(step_text)
        if base == "*":
            low, high = spec.low, spec.high
        elif "-" in base:
            first, _, last = base.partition("-")
            low, high = _value(position, spec, first, text), _value(position, spec, last, text)
            if low > high:
                raise _bad(position, spec, text, f"is a range that runs backwards; write {last}-{first}")
        else:
            low = _value(position, spec, base, text)
            high = spec.high if slash else low  # `5/10` means from 5 to the end in steps of 10
        values.update(range(low, high + 1, step))
    return frozenset(values)


@dataclass(frozen=True)
class CronSchedule:
    """A parsed cron expression. Build it with `CronSchedule.parse`."""

    expr: str
    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]
    """0 = Sunday … 6 = Saturday."""
    any_day: bool
    """The day-of-month field is `*`."""
    any_weekday: bool
    """The day-of-week field is `*`."""

    @classmethod
    def parse(cls, expr: str) -> CronSchedule:
        """Parse a five-field cron expression or an `@daily`-style shorthand.

        Raises:
            ToolshellError: `invalid_input` naming the wrong field, with an example.
        """
        text = _SHORTHANDS.get(expr.strip().lower(), expr)
        words = text.split()
        if len(words) != 5:
            raise ToolshellError(
                ErrorCode.INVALID_INPUT,
                f"a schedule is five fields, {_FORM}; {expr!r} has {len(words)}. Write e.g. {EXAMPLE}",
            )
        sets = [_parse_field(i + 1, spec, word) for i, (spec, word) in enumerate(zip(_FIELDS, words, strict=True))]
        minutes, hours, days, months, weekdays = sets
        weekdays = frozenset(d % 7 for d in weekdays)  # 7 is Sunday too
        schedule = cls(expr, minutes, hours, days, months, weekdays, words[2] == "*", words[4] == "*")
        schedule._check_possible()
        return schedule

    def _check_possible(self) -> None:
        # A restricted day-of-month alone can name days no chosen month has (`0 0 30 2 *`): never runs.
        if not self.any_weekday or self.any_day:
            return
        longest = max(_month_length(m) for m in self.months)
        if min(self.days) > longest:
            raise ToolshellError(
                ErrorCode.INVALID_INPUT,
                f"the schedule {self.expr!r} never runs: its months have at most {longest} days. Write e.g. {EXAMPLE}",
            )

    def _day_matches(self, day: datetime) -> bool:
        dom = day.day in self.days
        dow = (day.weekday() + 1) % 7 in self.weekdays
        if self.any_day or self.any_weekday:
            return dom and dow
        return dom or dow

    def matches(self, moment: datetime) -> bool:
        """Whether the schedule fires in the minute of `moment`."""
        return (
            moment.minute in self.minutes
            and moment.hour in self.hours
            and moment.month in self.months
            and self._day_matches(moment)
        )

    def next_after(self, moment: datetime) -> datetime:
        """The first minute strictly after `moment` at which the schedule fires (same tzinfo)."""
        t = moment.replace(tzinfo=None, second=0, microsecond=0) + timedelta(minutes=1)
        limit = t + timedelta(days=366 * 9)  # Feb 29 on a given weekday can be years away
        while t < limit:
            if t.month not in self.months:
                t = _next_month(t)
            elif not self._day_matches(t):
                t = t.replace(hour=0, minute=0) + timedelta(days=1)
            elif t.hour not in self.hours:
                t = t.replace(minute=0) + timedelta(hours=1)
            elif t.minute not in self.minutes:
                t += timedelta(minutes=1)
            else:
                return t.replace(tzinfo=moment.tzinfo)
        raise ToolshellError(ErrorCode.INVALID_INPUT, f"the schedule {self.expr!r} does not run in the next years")


def _month_length(month: int) -> int:
    return calendar.monthrange(2024, month)[1]  # a leap year: February can have 29 days


def _next_month(t: datetime) -> datetime:
    year, month = (t.year + 1, 1) if t.month == 12 else (t.year, t.month + 1)
    return datetime(year, month, 1)
