"""Crash points inside a real `gitdns` process, for bench/crash.py (test-only: nothing in gitdns
imports it, and no production command line can reach it).

    python -m tests.e2e.crash_hook <gitdns arguments...>
    python -m tests.e2e.crash_hook -c CODE [ARG...]      (CODE run with sys.argv = ["-c", ARG...])

runs ``gitdns <arguments>`` (or CODE) after wrapping the calls through which gitdns writes: the spans (a
store apply, a views render, an RFC 2136 apply, a status-branch publish, a hosts-file delivery,
the agent's state files) and, inside them, every step of a crash-safe write (``open`` of a file
for writing, ``os.fsync``, ``os.replace``/``rename``, ``os.unlink``, ``Path.write_text``/
``write_bytes``, a signal sent, an RFC 2136 UPDATE, each git command of the status branch).
Every step is logged before and after it runs, one line each, to ``CRASH_LOG``::

    <pid> begin <span> <detail>        a span starts
    <pid> at <n|-> <step> <pre|mid|post> <detail>   a step; n counts the steps of a chosen span
    <pid> end <span> <ok|error>
    <pid> PAUSE <n>                    the process stopped at step n and waits to be killed

Environment (all optional):

``CRASH_LOG``    the event file (appended, one ``write`` per line); absent: nothing is logged
``CRASH_SPANS``  a regular expression: the spans whose steps are counted (default: none)
``CRASH_AT``     stop at the n-th counted step (1-based): log ``PAUSE`` and sleep until killed
                 (the parent sends SIGKILL); 0 or absent: never
``CRASH_SLOW``   seconds to sleep at every counted step, so that a kill timed from outside
                 lands inside a write more often

A ``Path.write_text``/``write_bytes`` step has a ``mid`` point: the file has been opened (and
truncated) and nothing is written yet, the state a kill between ``open`` and ``write`` leaves.
"""

from __future__ import annotations

import builtins
import contextlib
import functools
import importlib
import importlib.abc
import importlib.machinery
import os
import pathlib
import re
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

LOG = os.environ.get("CRASH_LOG", "")
SPANS = re.compile(os.environ.get("CRASH_SPANS") or r"(?!)")
AT = int(os.environ.get("CRASH_AT") or 0)
SLOW = float(os.environ.get("CRASH_SLOW") or 0)
HOLD_LIMIT = 120.0  # a pause nobody ends (the parent died): exit rather than linger

# (module, attribute, span): the calls a kill is aimed at
SPAN_TARGETS = (
    ("gitdns.fsutil", "write_atomic", "file"),
    ("gitdns.providers.local", "LocalProvider.apply", "store"),
    ("gitdns.adapters.zonefile", "write_views", "views"),
    ("gitdns.providers.rfc2136.provider", "Rfc2136Provider.apply", "rfc2136"),
    ("gitdns.adapters.status.branch", "StatusBranch.publish", "status"),
    ("gitdns.adapters.coredns_delivery", "DirectoryDelivery.deliver", "delivery"),
    ("gitdns.agent.applied", "save_applied", "state"),
    ("gitdns.agent.identity", "save_identity", "state"),
    ("gitdns.agent.identity", "instance_identity", "state"),
)

_local = threading.local()
_count = 0
_count_lock = threading.Lock()
_real_open = builtins.open
_real_write = os.write


def _emit(line: str) -> None:
    if not LOG:
        return
    fd = os.open(LOG, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        _real_write(fd, f"{os.getpid()} {line}\n".encode("utf-8", "replace"))
    finally:
        os.close(fd)


def _stack() -> list[str]:
    stack: list[str] | None = getattr(_local, "stack", None)
    if stack is None:
        stack = _local.stack = []
    return stack


def _counted() -> bool:
    return any(SPANS.fullmatch(span) for span in _stack())


def step(name: str, point: str, detail: str = "") -> None:
    """One point of a write: logged when inside a span; counted (and maybe the place to stop)
    when inside a chosen span."""
    global _count
    if not _stack():
        return
    if not _counted():
        _emit(f"at - {name} {point} {detail}")
        return
    with _count_lock:
        _count += 1
        n = _count
    _emit(f"at {n} {name} {point} {detail}")
    if n == AT:
        _emit(f"PAUSE {n}")
        deadline = time.monotonic() + HOLD_LIMIT
        while time.monotonic() < deadline:  # the parent kills the process tree now
            time.sleep(0.05)
        os._exit(97)
    if SLOW:
        time.sleep(SLOW)


def _span(span: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        stack = _stack()
        stack.append(span)
        _emit(f"begin {span} {_describe(args)}")
        outcome = "error"
        try:
            step(span, "begin")
            result = fn(*args, **kwargs)
            outcome = "ok"
            step(span, "end")
            return result
        finally:
            stack.pop()
            _emit(f"end {span} {outcome}")
    return wrapper


def _describe(args: tuple[Any, ...]) -> str:
    for arg in args:
        if isinstance(arg, (str, os.PathLike)):
            return str(arg).replace(" ", "_")[-120:]
    return "-"


def _around(name: str, fn: Callable[..., Any], detail: Callable[..., str]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if not getattr(_local, "stack", None):
            return fn(*args, **kwargs)
        what = detail(*args, **kwargs)
        step(name, "pre", what)
        result = fn(*args, **kwargs)
        step(name, "post", what)
        return result
    return wrapper


def _fd_path(fd: Any, *_: Any, **__: Any) -> str:
    with contextlib.suppress(OSError, TypeError):
        return os.readlink(f"/proc/self/fd/{int(fd)}")
    return "?"


def _first(*args: Any, **_: Any) -> str:
    return str(args[0]) if args else "?"


def _second(*args: Any, **_: Any) -> str:
    return str(args[1]) if len(args) > 1 else "?"


def _writing_open(file: Any, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
    if not getattr(_local, "stack", None) or not any(c in mode for c in "wax+") or isinstance(file, int):
        return _real_open(file, mode, *args, **kwargs)
    step("open", "pre", str(file))
    fh = _real_open(file, mode, *args, **kwargs)
    step("open", "post", str(file))
    return fh


def _path_writer(binary: bool) -> Callable[..., Any]:
    def write(self: pathlib.Path, data: Any, encoding: str | None = None, errors: str | None = None,
              newline: str | None = None) -> int:
        if not getattr(_local, "stack", None):
            if binary:
                with _real_open(self, "wb") as fh:
                    return fh.write(data)
            with _real_open(self, "w", encoding=encoding, errors=errors, newline=newline) as fh:
                return fh.write(data)
        name = "write_bytes" if binary else "write_text"
        step(name, "pre", str(self))
        fh = _real_open(self, "wb") if binary else _real_open(self, "w", encoding=encoding, errors=errors,
                                                              newline=newline)
        with fh:
            step(name, "mid", str(self))  # opened and truncated, nothing written yet
            written = fh.write(data)
        step(name, "post", str(self))
        return int(written)
    return write


def _git(fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def wrapper(args: Any, *rest: Any, **kwargs: Any) -> Any:
        if not getattr(_local, "stack", None):
            return fn(args, *rest, **kwargs)
        op = f"git-{args[0]}" if args else "git"
        step(op, "pre")
        result = fn(args, *rest, **kwargs)
        step(op, "post", f"rc={getattr(result, 'rc', '?')}")
        return result
    return wrapper


Patch = Callable[[Callable[..., Any]], Callable[..., Any]]


def _patch(module: Any, attribute: str, make: Patch) -> None:
    owner = module
    *path, name = attribute.split(".")
    for part in path:
        owner = getattr(owner, part)
    setattr(owner, name, make(getattr(owner, name)))


def _patches() -> dict[str, list[tuple[str, Patch]]]:
    table: dict[str, list[tuple[str, Patch]]] = {}
    for module, attribute, span in SPAN_TARGETS:
        table.setdefault(module, []).append((attribute, functools.partial(_span, span)))
    table.setdefault("gitdns.adapters.status.cache", []).append(("run_git", _git))
    table.setdefault("gitdns.providers.rfc2136.provider", []).append(
        ("DnsPythonClient.update", lambda fn: _around("update", fn, lambda *a, **k: "UPDATE")))
    return table


class _PatchOnImport(importlib.abc.MetaPathFinder):
    """Wraps a module's calls right after it is executed, before anyone imports them by name
    (only what the command imports is imported: a hooked process starts as fast as gitdns)."""

    def __init__(self, table: dict[str, list[tuple[str, Patch]]]) -> None:
        self.table = table

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname not in self.table:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None:
            return spec
        real = spec.loader.exec_module
        patches = self.table[fullname]

        def exec_module(module: Any) -> None:
            real(module)
            for attribute, make in patches:
                _patch(module, attribute, make)
        spec.loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


def install() -> None:
    """Wrap the spans (each module as it is imported) and the steps."""
    table = _patches()
    for name in [m for m in table if m in sys.modules]:  # imported already: patch in place
        for attribute, make in table.pop(name):
            _patch(sys.modules[name], attribute, make)
    sys.meta_path.insert(0, _PatchOnImport(table))
    os.fsync = _around("fsync", os.fsync, _fd_path)
    os.replace = _around("replace", os.replace, _second)
    os.rename = _around("rename", os.rename, _second)
    os.unlink = _around("unlink", os.unlink, _first)
    os.remove = _around("unlink", os.remove, _first)
    os.kill = _around("signal", os.kill, lambda pid, sig: f"pid={pid}_sig={sig}")
    builtins.open = _writing_open
    pathlib.Path.write_text = _path_writer(False)  # type: ignore[method-assign,assignment]
    pathlib.Path.write_bytes = _path_writer(True)  # type: ignore[method-assign,assignment]


def main(argv: list[str]) -> int:
    install()
    if argv[:1] == ["-c"] and len(argv) > 1:
        sys.argv = ["-c", *argv[2:]]
        exec(compile(argv[1], "<crash_hook -c>", "exec"), {"__name__": "__main__"})
        return 0
    from gitdns.cli import main as gitdns_main

    return gitdns_main(argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
