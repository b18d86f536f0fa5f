"""Hostile desired-state files, shared by the tests and bench/bench_hostile_yaml.py.

    alias_bomb(size)     a Zone whose provider settings hold a "billion laughs": ``levels``
                         lists of eight, each made of eight aliases of the one before, padded
                         with a comment to exactly ``size`` bytes.  380 bytes: 8^8 (16.8
                         million) leaves; 480 bytes: 8^10 (1.07 billion).  Run only where a
                         memory limit holds (a child process): a loader that expands aliases
                         takes gigabytes.  ``levels=3`` gives a harmless one.
    big_file(path, size) a comment of ``size`` bytes, written without holding it in memory
    zone(name, domain)   a valid Zone on the local provider
"""

from __future__ import annotations

from pathlib import Path

HEAD = "apiVersion: gitdns.io/v1alpha1\n"
_NAMES = "abcdefghijklmnop"
_LEVELS = {380: 8, 480: 10}


def alias_bomb(size: int = 380, zone: str = "bomb", levels: int = 0) -> str:
    levels = levels or _LEVELS[size]
    text = f"{HEAD}kind: Zone\nmetadata: {{name: {zone}}}\nspec:\n provider:\n  settings:\n"
    text += f"   a: &a [{','.join(['x'] * 8)}]\n"
    for i in range(1, levels):
        text += f"   {_NAMES[i]}: &{_NAMES[i]} [{','.join(['*' + _NAMES[i - 1]] * 8)}]\n"
    pad = max(size - len(text), 0) if levels == _LEVELS.get(size) else 0
    assert pad == 0 or pad >= 2, f"a bomb of {levels} levels does not fit {size} bytes"
    return text + ("#" * (pad - 1) + "\n" if pad else "")


def first_alias_line(text: str) -> int:
    return next(n for n, line in enumerate(text.splitlines(), 1) if "*" in line)


def big_file(path: Path, size: int) -> None:
    chunk = b"x" * (1 << 20)
    with path.open("wb") as out:
        out.write(b"# ")
        left = size - 3
        while left > 0:
            out.write(chunk[: min(left, len(chunk))])
            left -= len(chunk)
        out.write(b"\n")


def zone(name: str, domain: str) -> str:
    return f"{HEAD}kind: Zone\nmetadata: {{name: {name}}}\nspec: {{domain: {domain}, provider: {{type: local}}}}\n"
