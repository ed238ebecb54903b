"""Standard five-field cron schedules: `minute hour day-of-month month day-of-week`.

`cronsim` (the parser of healthchecks.io) reads the expression and walks the calendar: fields take
`*`, numbers, lists (`1,15`), ranges (`1-5`), steps (`*/15`, `1-30/5`, `5/10`), names for months
(`jan`) and weekdays (`mon`; 0 and 7 are Sunday), and also `L` (the last day), `5L` (the last
Friday) and `5#2` (the second Friday). As in Vixie cron, when both day fields are restricted a
day matches if either does. `@hourly`, `@daily`, `@weekly`, `@monthly` and `@yearly` are
shorthands. Times are wall-clock times in the datetime's own zone, with cronsim's rules for a
daylight-saving change (a skipped time runs at the first minute after it, a repeated one once).

What stays here is the error message: cronsim says only which field is bad (`Bad minute`); a
person gets that field's number, its text, what is wrong with it and an example.
"""

from __future__ import annotations

import calendar
from dataclasses import dataclass
from datetime import datetime, timedelta

from cronsim import CronSim, CronSimError

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
    text: str
    """The five fields (a shorthand written out)."""
    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int | tuple[int, int]]
    """0 = Sunday … 6 = Saturday; `(5, 2)` for `5#2`."""

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
        try:
            sim = CronSim(text, datetime(2000, 1, 1))
        except CronSimError as e:
            raise _explain(expr, words, str(e)) from None
        weekdays = frozenset(d % 7 if isinstance(d, int) else d for d in sim.weekdays)  # 7 is Sunday too
        minutes, hours, days, months = (frozenset(x) for x in (sim.minutes, sim.hours, sim.days, sim.months))
        return cls(expr, " ".join(words), minutes, hours, days, months, weekdays)

    def matches(self, moment: datetime) -> bool:
        """Whether the schedule fires in the minute of `moment`."""
        minute = moment.replace(second=0, microsecond=0)
        return self.next_after(minute - timedelta(seconds=1)) == minute

    def next_after(self, moment: datetime) -> datetime:
        """The first minute strictly after `moment` at which the schedule fires (same tzinfo)."""
        try:
            return next(CronSim(self.text, moment))
        except StopIteration:  # cronsim looks a few years ahead
            raise ToolshellError(
                ErrorCode.INVALID_INPUT, f"the schedule {self.expr!r} does not run in the next years"
            ) from None


def _explain(expr: str, words: list[str], said: str) -> ToolshellError:
    """Why cronsim refused `words` (`said`: "Bad minute"): what is wrong with the field it names,
    or, when that field reads, the day of the month no chosen month has (`0 0 30 2 *` never runs)."""
    for position, (spec, word) in enumerate(zip(_FIELDS, words, strict=True), start=1):
        if said == f"Bad {spec.name}":
            _parse_field(position, spec, word)  # raises what is wrong with it, when we can say
    if words[2] != "*" and words[4] == "*" and said == "Bad day-of-month":
        months = _parse_field(4, _FIELDS[3], words[3])
        longest = max(_month_length(m) for m in months)
        if min(_parse_field(3, _FIELDS[2], words[2])) > longest:
            return ToolshellError(
                ErrorCode.INVALID_INPUT,
                f"the schedule {expr!r} never runs: its months have at most {longest} days. Write e.g. {EXAMPLE}",
            )
    return ToolshellError(ErrorCode.INVALID_INPUT, f"{expr!r} is not a cron schedule: {_FORM}, e.g. {EXAMPLE}")


def _month_length(month: int) -> int:
    return calendar.monthrange(2024, month)[1]  # a leap year: February can have 29 days
