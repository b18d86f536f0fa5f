"""Log lines through the text gate (`gitdns.core.text`): the one place gitdns formats a log record.

A log message quotes what came from outside (a request path, a commit, a provider's error, a
file name).  Every handler the daemons and the one-shot verbs install formats through
`TextFormatter` or `JsonFormatter`, which pass the message through `inline` (one record is one
line: a line break, an ANSI escape or a bidi override in it is written escaped) and a traceback
through `block` (its own lines kept, every other unsafe character escaped).  A record that
other libraries log (the Kubernetes client, APScheduler, urllib3) goes through the same
formatter, since it is the root logger's handler.

    FORMATS                   the daemons' --log-format values: json, text
    default_format(env)       the daemons' default: json in a pod (KUBERNETES_SERVICE_HOST
                              set, where a log collector reads the lines), else text
    check_format(fmt, where)  ConfigError unless ``fmt`` is one of FORMATS, naming ``where``
    handler(fmt, template)    a stderr handler: fmt "json" or "text" (``template`` its line)
    install(handler, level)   the root logger's one handler, at ``level``; with
                              ``keep=True`` nothing changes when the root logger has a
                              handler already (an embedding program or a test harness decides)
"""

from __future__ import annotations

import json
import logging
import sys
import traceback
from collections.abc import Mapping

from gitdns.core.text import block, inline
from gitdns.errors import ConfigError

TEXT_TEMPLATE = "%(asctime)s %(levelname)s %(name)s: %(message)s"
FORMATS = ("json", "text")


def default_format(env: Mapping[str, str]) -> str:
    """The agent's and the orchestrator's log format when none is given: ``json`` in a pod (the
    kubelet sets ``KUBERNETES_SERVICE_HOST``; the cluster's log collector reads one object a
    line), ``text`` elsewhere (a terminal, a service manager's journal)."""
    return "json" if env.get("KUBERNETES_SERVICE_HOST") else "text"


def check_format(fmt: str, where: str) -> str:
    """``fmt`` when it is a log format; a `ConfigError` naming ``where`` (the flag and variable)."""
    if fmt not in FORMATS:
        raise ConfigError(f"{where} {fmt[:20]!r}: use json or text")
    return fmt


def traceback_text(ei: object) -> str:
    """A traceback whose lines are its own: each exception's message (outside text, often: a
    server's answer, a path) through `inline`, so a line break in it cannot add a line; the rest
    through `block`."""
    if not isinstance(ei, tuple) or len(ei) != 3 or ei[1] is None:
        return ""
    te = traceback.TracebackException(ei[0], ei[1], ei[2])
    seen: set[int] = set()
    stack = [te]
    while stack:
        one = stack.pop()
        if id(one) in seen:
            continue
        seen.add(id(one))
        if isinstance(getattr(one, "_str", None), str):
            one._str = inline(one._str)  # type: ignore[attr-defined]  # what format_exception_only prints
        notes = getattr(one, "__notes__", None)
        if notes:
            one.__notes__ = [inline(str(n)) for n in notes]
        stack += [e for e in (one.__cause__, one.__context__) if e is not None]
    return block("".join(te.format()).rstrip("\n"))


class TextFormatter(logging.Formatter):
    """`logging.Formatter` whose line is one line: the formatted message through `inline`,
    the traceback and stack through `block`."""

    def formatMessage(self, record: logging.LogRecord) -> str:
        return inline(super().formatMessage(record))

    def formatException(self, ei: object) -> str:
        return traceback_text(ei)

    def formatStack(self, stack_info: str) -> str:
        return block(super().formatStack(stack_info))


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message (through `inline`, so a log
    viewer that decodes the JSON shows no escape either) and the traceback (through `block`)."""

    def format(self, record: logging.LogRecord) -> str:
        doc = {"time": self.formatTime(record, "%Y-%m-%dT%H:%M:%S"), "level": record.levelname.lower(),
               "logger": inline(record.name), "message": inline(record.getMessage())}
        if record.exc_info:
            doc["exception"] = traceback_text(record.exc_info)
        return json.dumps(doc, sort_keys=True)


def handler(fmt: str = "text", template: str = TEXT_TEMPLATE) -> logging.Handler:
    """A stderr handler formatting through the gate: ``fmt`` "json" or "text"."""
    out = logging.StreamHandler(sys.stderr)
    out.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter(template))
    return out


def install(out: logging.Handler, level: str | int, *, keep: bool = False) -> None:
    """Make ``out`` the root logger's only handler, at ``level`` (``keep``: unless it has one)."""
    root = logging.getLogger()
    if keep and root.handlers:
        return
    root.handlers[:] = [out]
    root.setLevel(level.upper() if isinstance(level, str) else level)
