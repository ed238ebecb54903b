"""What cron schedules gain from `cronsim`: the last day (`L`), the n-th weekday (`5#2`), and
wall-clock runs across a daylight-saving change. tests/test_scripts_cron.py is the contract of the
forms and messages kept from before."""

from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo

import pytest

from toolshell.errors import ToolshellError
from toolshell.scripts import CronSchedule

BERLIN = ZoneInfo("Europe/Berlin")


def test_the_last_day_of_the_month_and_the_second_friday_are_schedules_too() -> None:
    assert CronSchedule.parse("0 0 L * *").next_after(datetime(2025, 2, 3)) == datetime(2025, 2, 28)
    assert CronSchedule.parse("0 9 * * 5#2").next_after(datetime(2025, 1, 1)) == datetime(2025, 1, 10, 9, 0)


def test_a_time_the_clocks_skip_runs_once_just_after_and_a_repeated_hour_runs_once() -> None:
    daily = CronSchedule.parse("30 2 * * *")  # 02:30 does not exist in Berlin on 2025-03-30
    spring = daily.next_after(datetime(2025, 3, 29, 12, 0, tzinfo=BERLIN))
    assert spring.date().isoformat() == "2025-03-30" and spring.tzinfo is BERLIN
    after = daily.next_after(spring)
    assert after == datetime(2025, 3, 31, 2, 30, tzinfo=BERLIN)
    autumn = daily.next_after(datetime(2025, 10, 25, 12, 0, tzinfo=BERLIN))  # 02:30 happens twice
    assert daily.next_after(autumn) == datetime(2025, 10, 27, 2, 30, tzinfo=BERLIN)


def test_a_field_cronsim_refuses_is_still_named_with_what_is_wrong() -> None:
    with pytest.raises(ToolshellError, match=r"cron field 2 \(hour\) '9-25' is out of range 0-23"):
        CronSchedule.parse("0 9-25 L * *")
