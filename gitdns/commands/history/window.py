"""The date window of `gitdns history`: ``--since``/``--until`` in unix seconds, read by git's own
date parser, with what that parser would misread refused first.

    window(run, since, until) -> (lo | None, hi | None)     ``run`` runs one git command, returns its output
"""

from __future__ import annotations

import datetime
import re
import time
from collections.abc import Callable

from gitdns.errors import ConfigError

_DAY = re.compile(r"\d{4}-\d{2}-\d{2}")
_NOW = re.compile(r"now|today|0+ \w+ ago")
_DATES = re.compile(r"(?<!\d)(\d{4})-(\d{1,2})-(\d{1,2})(?!\d)")


def window(run: Callable[[list[str]], str], since: str | None,
           until: str | None) -> tuple[int | None, int | None]:
    """``--since``/``--until`` in unix seconds, read by git's own date parser (as ``git log``
    reads them: ISO dates, ``2 weeks ago``, ``yesterday``...); a bare day (``2024-05-07``)
    starts at 00:00:00 UTC for --since and ends at 23:59:59 UTC for --until."""
    for flag, text in (("--since", since), ("--until", until)):
        _check_date(flag, text)
    if since is None and until is None:
        return None, None
    asked = {"--since": since, "--until": until}
    # a bare day is that whole day in UTC (git alone would read it at the current time of day)
    since = f"{since}T00:00:00Z" if since and _DAY.fullmatch(since.strip()) else since
    until = f"{until}T23:59:59Z" if until and _DAY.fullmatch(until.strip()) else until
    args = ([f"--since={since}"] if since else []) + ([f"--until={until}"] if until else [])
    lo = hi = None
    started = time.time()
    for word in run(["rev-parse", *args]).split():
        key, _, value = word.partition("=")
        if key == "--max-age" and value.isdigit():
            lo = int(value)
        elif key == "--min-age" and value.isdigit():
            hi = int(value)
    for flag, when in (("--since", lo), ("--until", hi)):
        text = asked[flag]
        if text is None:
            continue
        # git reads what it does not understand as the current time: only words meaning now may
        nonsense = when is None or (abs(when - started) <= 5 and not _NOW.fullmatch(text.strip().lower()))
        if nonsense:
            raise ConfigError(f"{flag} {text}: git reads no date in it (give a date such as 2024-05-07 or "
                              "2024-05-07T09:00:00Z, or a relative one such as '2 weeks ago' or yesterday)")
    if lo is not None and hi is not None and lo > hi:
        raise ConfigError(f"--since {since} is after --until {until}: the window is empty")
    return lo, hi


def _check_date(flag: str, text: str | None) -> None:
    """What git's lenient date parser would read as something else: an empty value, and a
    calendar date that does not exist (git reads ``2024-13-45`` as another day)."""
    if text is None:
        return
    if not text.strip():
        raise ConfigError(f"{flag} is empty: give a date such as 2024-05-07 (or leave {flag} out)")
    for year, month, day in _DATES.findall(text):
        try:
            datetime.date(int(year), int(month), int(day))
        except ValueError as exc:
            raise ConfigError(f"{flag} {text}: {year}-{month}-{day} is not a date ({exc})") from None
