"""Cron schedules: every field form, `next_after` against hand-computed times, and bad expressions."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from toolshell.errors import ErrorCode, ToolshellError
from toolshell.scripts import CronSchedule

FORM = "a schedule is five fields, minute hour day-of-month month day-of-week"
EXAMPLE = "'*/15 9-17 * * mon-fri' (every 15 minutes from 9:00 to 17:45 on weekdays)"


@pytest.mark.parametrize(
    ("expr", "field", "values"),
    [
        ("* * * * *", "minutes", set(range(60))),
        ("*/15 * * * *", "minutes", {0, 15, 30, 45}),
        ("1-30/5 * * * *", "minutes", {1, 6, 11, 16, 21, 26}),
        ("5/20 * * * *", "minutes", {5, 25, 45}),
        ("1,2,40-42 * * * *", "minutes", {1, 2, 40, 41, 42}),
        ("0 9-17 * * *", "hours", set(range(9, 18))),
        ("0 */6 * * *", "hours", {0, 6, 12, 18}),
        ("0 0 1,15 * *", "days", {1, 15}),
        ("0 0 * jan,Jul,DEC *", "months", {1, 7, 12}),
        ("0 0 * mar-may *", "months", {3, 4, 5}),
        ("0 0 * * mon-fri", "weekdays", {1, 2, 3, 4, 5}),
        ("0 0 * * 0", "weekdays", {0}),
        ("0 0 * * 7", "weekdays", {0}),
        ("0 0 * * 5-7", "weekdays", {5, 6, 0}),
        ("0 0 * * sat,sun", "weekdays", {6, 0}),
    ],
)
def test_each_field_form_parses_to_its_values(expr, field, values):
    assert getattr(CronSchedule.parse(expr), field) == frozenset(values)


@pytest.mark.parametrize(
    ("shorthand", "same_as"),
    [("@hourly", "0 * * * *"), ("@daily", "0 0 * * *"), ("@weekly", "0 0 * * 0"), ("@monthly", "0 0 1 * *"),
     ("@yearly", "0 0 1 1 *"), ("@ANNUALLY", "0 0 1 1 *")],
)  # fmt: skip
def test_shorthands_mean_their_five_field_forms(shorthand, same_as):
    a, b = CronSchedule.parse(shorthand), CronSchedule.parse(same_as)
    assert (a.minutes, a.hours, a.days, a.months, a.weekdays) == (b.minutes, b.hours, b.days, b.months, b.weekdays)


def d(*args: int) -> datetime:
    return datetime(*args)


@pytest.mark.parametrize(
    ("expr", "after", "expected"),
    [
        ("*/15 * * * *", d(2025, 1, 1, 10, 7), d(2025, 1, 1, 10, 15)),
        ("*/15 * * * *", d(2025, 1, 1, 10, 15), d(2025, 1, 1, 10, 30)),  # strictly after
        ("*/15 * * * *", datetime(2025, 1, 1, 10, 14, 59, 999), d(2025, 1, 1, 10, 15)),
        ("*/15 * * * *", d(2025, 1, 1, 23, 50), d(2025, 1, 2, 0, 0)),
        ("1-30/5 * * * *", d(2025, 1, 1, 10, 26), d(2025, 1, 1, 11, 1)),
        ("0 */6 * * *", d(2025, 1, 1, 19, 0), d(2025, 1, 2, 0, 0)),
        ("0 0 1 * *", d(2025, 1, 31, 12, 0), d(2025, 2, 1, 0, 0)),
        ("0 0 31 * *", d(2025, 1, 31, 0, 0), d(2025, 3, 31, 0, 0)),  # February has no 31st
        ("30 23 31 * *", d(2025, 4, 1), d(2025, 5, 31, 23, 30)),  # nor April
        ("0 0 29 * *", d(2025, 1, 29), d(2025, 3, 29)),  # 2025 is not a leap year
        ("0 0 29 * *", d(2024, 1, 29), d(2024, 2, 29)),  # 2024 is
        ("0 12 29 2 *", d(2025, 1, 1), d(2028, 2, 29, 12, 0)),
        ("59 23 31 12 *", d(2025, 12, 31, 23, 59), d(2026, 12, 31, 23, 59)),
        ("0 0 1 jan,jul *", d(2025, 2, 1), d(2025, 7, 1)),
        ("0 9 * * mon-fri", d(2025, 1, 3, 9, 0), d(2025, 1, 6, 9, 0)),  # Friday -> Monday
        ("0 9 * * mon-fri", d(2025, 1, 6, 8, 59), d(2025, 1, 6, 9, 0)),
        ("0 0 * * 0", d(2025, 1, 1), d(2025, 1, 5)),  # the first Sunday of 2025
        ("0 0 * * 7", d(2025, 1, 1), d(2025, 1, 5)),
        ("0 0 13 * fri", d(2025, 1, 1), d(2025, 1, 3)),  # either day field matches: Friday the 3rd
        ("0 0 13 * fri", d(2025, 1, 10), d(2025, 1, 13)),  # … then Monday the 13th
        ("0 0 * feb mon", d(2025, 1, 1), d(2025, 2, 3)),  # with a star day-of-month only Mondays count
    ],
)
def test_next_after_finds_the_first_matching_minute_strictly_after(expr, after, expected):
    assert CronSchedule.parse(expr).next_after(after) == expected


def test_next_after_keeps_the_time_zone_of_its_argument():
    tz = timezone(timedelta(hours=2))
    assert CronSchedule.parse("0 9 * * *").next_after(datetime(2025, 1, 1, 10, 0, tzinfo=tz)) == datetime(
        2025, 1, 2, 9, 0, tzinfo=tz
    )


def test_every_next_after_matches_and_nothing_between_does():
    schedule = CronSchedule.parse("*/20 8-9 * * sat")
    t = d(2025, 1, 1)
    for _ in range(8):
        nxt = schedule.next_after(t)
        assert schedule.matches(nxt)
        probe = t + timedelta(minutes=1)
        while probe < nxt:  # minute by minute: no earlier match was skipped
            assert not schedule.matches(probe)
            probe += timedelta(minutes=1)
        t = nxt


@pytest.mark.parametrize(
    ("expr", "message"),
    [
        ("* * * *", f"{FORM}; '* * * *' has 4. Write e.g. {EXAMPLE}"),
        ("* * * * * *", f"{FORM}; '* * * * * *' has 6. Write e.g. {EXAMPLE}"),
        ("", f"{FORM}; '' has 0. Write e.g. {EXAMPLE}"),
        ("60 * * * *", f"cron field 1 (minute) '60' is out of range 0-59; {FORM}, e.g. {EXAMPLE}"),
        ("* 24 * * *", f"cron field 2 (hour) '24' is out of range 0-23; {FORM}, e.g. {EXAMPLE}"),
        ("* * 0 * *", f"cron field 3 (day-of-month) '0' is out of range 1-31; {FORM}, e.g. {EXAMPLE}"),
        ("* * * 13 *", f"cron field 4 (month) '13' is out of range 1-12; {FORM}, e.g. {EXAMPLE}"),
        ("* * * * 8", f"cron field 5 (day-of-week) '8' is out of range 0-7; {FORM}, e.g. {EXAMPLE}"),
        ("a * * * *", f"cron field 1 (minute) 'a' is not a number; {FORM}, e.g. {EXAMPLE}"),
        ("* * * foo *", f"cron field 4 (month) 'foo' is not a number or a name like jan; {FORM}, e.g. {EXAMPLE}"),
        ("* * * * mon-funday", f"cron field 5 (day-of-week) 'mon-funday' is not a number or a name like sun; "
                               f"{FORM}, e.g. {EXAMPLE}"),
        ("*/0 * * * *", f"cron field 1 (minute) '*/0' has a bad step '0'; a step is a whole number from 1; "
                        f"{FORM}, e.g. {EXAMPLE}"),
        ("*/x * * * *", f"cron field 1 (minute) '*/x' has a bad step 'x'; a step is a whole number from 1; "
                        f"{FORM}, e.g. {EXAMPLE}"),
        ("5-1 * * * *", f"cron field 1 (minute) '5-1' is a range that runs backwards; write 1-5; "
                        f"{FORM}, e.g. {EXAMPLE}"),
        ("1,,2 * * * *", f"cron field 1 (minute) '1,,2' is not a number; {FORM}, e.g. {EXAMPLE}"),
        ("-5 * * * *", f"cron field 1 (minute) '-5' is not a number; {FORM}, e.g. {EXAMPLE}"),
        ("0 0 30 2 *", f"the schedule '0 0 30 2 *' never runs: its months have at most 29 days. "
                       f"Write e.g. {EXAMPLE}"),
        ("0 0 31 4,6 *", f"the schedule '0 0 31 4,6 *' never runs: its months have at most 30 days. "
                         f"Write e.g. {EXAMPLE}"),
    ],
)  # fmt: skip
def test_a_bad_expression_gets_invalid_input_naming_the_field_and_an_example(expr, message):
    with pytest.raises(ToolshellError) as info:
        CronSchedule.parse(expr)
    assert (info.value.code, info.value.message) == (ErrorCode.INVALID_INPUT, message)


def test_a_day_that_only_some_months_have_is_accepted_when_one_of_them_is_chosen():
    assert CronSchedule.parse("0 0 31 2,3 *").next_after(d(2025, 1, 1)) == d(2025, 3, 31)
