"""kill -9 at a chosen moment, and the checks made after it (bench/crash.py; no pytest here).

* `run_killed` starts a real `gitdns` process through `tests.e2e.crash_hook` and kills it,
  with every process it started (a git push, its receive-pack and hooks), by SIGKILL: the
  tree is frozen with SIGSTOP first so that no child runs on after its parent died, as when
  a container is killed.  The moment is a `Moment`: a counted write step (the process stops
  there and is killed), a remote point of a status push (the receiving side's hook stops),
  or a delay from process start with slowed writes.
* `parse_events` reads what the process logged: the spans open when it died.
* The file checks: every file gitdns writes for others to read parses whole (`torn_files`),
  and the temporary files of a crashed write are gone once the next write ran (`stray_temps`).
"""

from __future__ import annotations

import contextlib
import hashlib
import ipaddress
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import dns.exception
import dns.zone

from gitdns.providers.local import StoreCorruptError, decode_store

ROOT = Path(__file__).resolve().parent.parent.parent
HOOK = [sys.executable, "-m", "tests.e2e.crash_hook"]
RUN_LIMIT = 180.0  # seconds a killed or restarted process may take at most
TEMP_MARK = ".tmp-"
LABEL = re.compile(r"^(?!-)[A-Za-z0-9_*-]{1,63}(?<!-)$")


# --- the moment and the kill --------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Moment:
    """When to kill: at counted step ``at`` (``mode`` "step"), at a remote hook point of a
    status push (``remote``: "pre-receive" or "post-receive", the receiving side spared or
    not), or ``delay`` seconds after the start (``mode`` "timer", writes slowed by ``slow``)."""

    mode: str
    at: int = 0
    delay: float = 0.0
    slow: float = 0.0
    remote: str = ""
    spare_remote: bool = False

    def describe(self) -> str:
        if self.mode == "step":
            return f"step {self.at}"
        if self.mode == "remote":
            return f"remote {self.remote}{' (server spared)' if self.spare_remote else ''}"
        return f"timer {self.delay:.3f}s (slow {self.slow:g}s)"


@dataclass
class Kill:
    killed: bool  # False: the process finished before the moment came
    returncode: int | None
    open_spans: tuple[str, ...] = ()
    last_step: str = ""
    output: str = ""
    steps: int = 0  # counted steps it logged

    def inside(self, spans: str) -> bool:
        return any(re.fullmatch(spans, span) for span in self.open_spans)


def hook_env(log: Path, spans: str, moment: Moment | None = None) -> dict[str, str]:
    """The environment of a hooked run: what the hook logs and counts, and where it stops."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CRASH_")}
    env.update({"PYTHONPATH": str(ROOT), "CRASH_LOG": str(log), "CRASH_SPANS": spans})
    if moment is not None:
        env["CRASH_AT"] = str(moment.at if moment.mode == "step" else 0)
        env["CRASH_SLOW"] = str(moment.slow if moment.mode == "timer" else 0)
        env["CRASH_REMOTE"] = moment.remote if moment.mode == "remote" else ""
    return env


def release_file(log: Path) -> Path:
    """Touched after a kill: a remote hook holding a push for it goes on."""
    return log.with_name(log.name + ".release")


def run_clean(argv: Sequence[str], log: Path, spans: str = r"(?!)", env: dict[str, str] | None = None,
              timeout: float = RUN_LIMIT) -> tuple[subprocess.CompletedProcess[str], float]:
    """Run ``gitdns argv`` through the hook without a kill (every step logged, ``spans``'
    counted): (result, seconds).  `parse_events` with ``spans`` counts the steps afterwards."""
    log.unlink(missing_ok=True)
    start = time.monotonic()
    done = subprocess.run([*HOOK, *argv], cwd=ROOT, env={**hook_env(log, spans), **(env or {})},
                          capture_output=True, text=True, timeout=timeout, check=False)
    return done, time.monotonic() - start


def run_killed(argv: Sequence[str], log: Path, spans: str, moment: Moment,
               env: dict[str, str] | None = None) -> Kill:
    """Run ``gitdns argv`` through the hook and SIGKILL its process tree at ``moment``."""
    log.unlink(missing_ok=True)
    release_file(log).unlink(missing_ok=True)
    out = log.with_suffix(".out")
    with out.open("wb") as sink:
        proc = subprocess.Popen([*HOOK, *argv], cwd=ROOT, env={**hook_env(log, spans, moment), **(env or {})},
                                stdout=sink, stderr=subprocess.STDOUT, start_new_session=True)
    start = time.monotonic()
    pause = "PAUSE remote-" + moment.remote if moment.mode == "remote" else "PAUSE "
    hit = False
    while proc.poll() is None and time.monotonic() - start < RUN_LIMIT:
        if moment.mode == "timer":
            hit = time.monotonic() - start >= moment.delay
        else:
            hit = pause in _read(log)
        if hit:
            break
        time.sleep(0.002)
    spared: set[int] = set()
    if hit and proc.poll() is None:
        spared = kill_tree(proc.pid, spare=_is_receive_pack if moment.spare_remote else None)
    killed = hit and proc.wait(timeout=30) == -signal.SIGKILL
    if proc.poll() is None:  # the moment never came within the limit: a hung process
        kill_tree(proc.pid)
        proc.wait(timeout=30)
    release_file(log).touch()  # a remote hook held for the kill goes on (spared) or is gone already
    _wait_gone(spared)
    events = parse_events(log, proc.pid)
    return Kill(killed, proc.returncode, events.open_spans, events.last_step,
                out.read_text(errors="replace")[-3000:], events.steps)


def _read(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except FileNotFoundError:
        return ""


def _children() -> dict[int, list[int]]:
    tree: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        tree.setdefault(ppid, []).append(int(entry))
    return tree


def _is_receive_pack(pid: int) -> bool:
    try:
        return b"receive-pack" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def kill_tree(root: int, spare: Callable[[int], bool] | None = None) -> set[int]:
    """SIGSTOP ``root`` and every descendant (again until no new one appears), then SIGKILL
    them all.  Processes for which ``spare`` is true are left running with their descendants
    (the receiving end of a push: a git server that outlives its client); returned."""
    frozen: set[int] = set()
    spared: set[int] = set()
    while True:
        tree = _children()
        found, todo = set(), [root]
        while todo:
            pid = todo.pop()
            if spare is not None and pid != root and spare(pid):
                spared.add(pid)
                continue
            found.add(pid)
            todo.extend(tree.get(pid, []))
        new = found - frozen
        if not new:
            break
        for pid in new:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGSTOP)
        frozen |= new
    for pid in frozen:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    return spared


def _wait_gone(pids: Iterable[int], limit: float = 30.0) -> None:
    deadline = time.monotonic() + limit
    for pid in pids:
        while time.monotonic() < deadline:
            try:
                state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
            except OSError:
                break
            if state in ("Z", "X"):
                break
            time.sleep(0.01)


@dataclass
class Events:
    open_spans: tuple[str, ...] = ()
    last_step: str = ""
    steps: int = 0


def parse_events(log: Path, pid: int | None, spans: str | None = None) -> Events:
    """What the hooked process logged: its spans still open at the end (``pid``: that process
    only), its last step, and how many steps it counted — or, with ``spans``, how many it
    would have counted had ``CRASH_SPANS`` been ``spans`` (the hook's rule, replayed)."""
    stacks: dict[str, list[str]] = {}
    out = Events()
    for line in _read(log).splitlines():
        parts = line.split()
        if len(parts) < 2 or (pid is not None and parts[0] != str(pid)):
            continue
        who, kind = parts[0], parts[1]
        if kind == "begin" and len(parts) > 2:
            stacks.setdefault(who, []).append(parts[2])
        elif kind == "end" and stacks.get(who):
            stacks[who].pop()
        elif kind == "at" and len(parts) > 4:
            if spans is not None:
                out.steps += any(re.fullmatch(spans, span) for span in stacks.get(who, []))
            elif parts[2] != "-":
                out.steps = max(out.steps, int(parts[2]))
                out.last_step = " ".join(parts[3:5])
    out.open_spans = tuple(span for stack in stacks.values() for span in stack)
    return out


# --- remote hooks of a status push --------------------------------------------------------------

REMOTE_HOOK = """#!/bin/sh
# test rig: log a status push's {point} and, when asked, hold it until released (the pusher dies meanwhile)
refs=$(cat)
[ -n "$CRASH_LOG" ] || exit 0
case "$refs" in *refs/heads/gitdns-status/*) ;; *) exit 0 ;; esac
echo "$$ remote {point}" >> "$CRASH_LOG"
if [ "$CRASH_REMOTE" = "{point}" ]; then
    echo "$$ PAUSE remote-{point}" >> "$CRASH_LOG"
    n=0
    while [ ! -e "$CRASH_LOG.release" ] && [ $n -lt 600 ]; do sleep 0.05; n=$((n + 1)); done
fi
exit 0
"""


def install_remote_hooks(bare: Path) -> None:
    """pre-receive (before the ref moves) and post-receive (after) hooks on the bare remote."""
    for point in ("pre-receive", "post-receive"):
        path = bare / "hooks" / point
        path.write_text(REMOTE_HOOK.format(point=point))
        path.chmod(0o755)


# --- files whole --------------------------------------------------------------------------------


def hidden_temps(*dirs: Path) -> list[Path]:
    """Temporary files of a write (``.<name>.tmp-…``) in ``dirs`` (not below them)."""
    found: list[Path] = []
    for directory in dirs:
        if directory.is_dir():
            found += [p for p in directory.iterdir() if p.name.startswith(".") and TEMP_MARK in p.name]
    return sorted(found)


def _problem(path: Path, why: str) -> str:
    return f"{path.parent.name}/{path.name}: {why}"


def check_store(path: Path) -> str | None:
    try:
        decode_store(path, path.read_bytes(), path.name[: -len(".json")])
    except StoreCorruptError as exc:
        return _problem(path, str(exc))
    return None


_CHECKED: set[tuple[str, str]] = set()  # (origin, content digest) BIND has read without complaint


def check_zone_file(path: Path, origin: str) -> str | None:
    """An RFC 1035 master file: dnspython reads it, and so does BIND (named-checkzone)."""
    try:
        dns.zone.from_file(str(path), origin=origin, relativize=False)
    except (dns.exception.DNSException, ValueError, UnicodeDecodeError) as exc:
        return _problem(path, f"dnspython: {type(exc).__name__}: {exc}")
    checker = shutil.which("named-checkzone") or shutil.which("named-checkzone", path="/usr/sbin:/usr/bin")
    key = (origin, hashlib.sha256(path.read_bytes()).hexdigest())
    if checker and key not in _CHECKED:
        done = subprocess.run([checker, "-q", origin, str(path)], capture_output=True, text=True, timeout=30,
                              check=False)
        if done.returncode != 0:
            return _problem(path, f"named-checkzone exit {done.returncode}: {done.stdout}{done.stderr}")
        _CHECKED.add(key)
    return None


def check_weights(path: Path) -> str | None:
    for number, line in enumerate(path.read_text().splitlines(), 1):
        words = line.split()
        if not words or words[0].startswith("#"):
            continue
        if len(words) == 1 and words[0].endswith("."):
            continue
        try:
            ipaddress.ip_address(words[0])
            if len(words) != 2 or not 0 < int(words[1]) < 256:
                raise ValueError("not <address> <weight 1..255>")
        except ValueError as exc:
            return _problem(path, f"line {number} {line!r}: {exc}")
    return None


def check_hosts(path: Path) -> str | None:
    """A hosts file as CoreDNS's hosts plugin and dnsmasq read it: ``<ip> <name>...`` lines."""
    text = path.read_text()
    if text and not text.endswith("\n"):
        return _problem(path, "does not end with a line break (cut short)")
    for number, line in enumerate(text.splitlines(), 1):
        words = line.split("#", 1)[0].split()
        if not words:
            continue
        try:
            ipaddress.ip_address(words[0])
        except ValueError:
            return _problem(path, f"line {number} {line!r}: {words[0]!r} is not an address")
        names = words[1:]
        if not names or not all(all(LABEL.match(label) for label in n.rstrip(".").split(".")) for n in names):
            return _problem(path, f"line {number} {line!r}: not a list of host names")
    return None


def check_server(path: Path) -> str | None:
    """A Corefile snippet: printable, its braces balanced and closed at the end."""
    text = path.read_text()
    depth = 0
    for char in text:
        if char not in "\n\t" and not " " <= char <= "~":
            return _problem(path, f"a character CoreDNS does not expect: {char!r}")
        depth += {"{": 1, "}": -1}.get(char, 0)
        if depth < 0:
            return _problem(path, "a brace closed that was never opened")
    if depth or (text and not text.endswith("\n")):
        return _problem(path, "cut short (braces open, or no final line break)")
    return None


def check_json(path: Path, valid: Callable[[object], bool]) -> str | None:
    try:
        doc = json.loads(path.read_text())
    except (ValueError, UnicodeDecodeError) as exc:
        return _problem(path, f"not JSON: {exc}")
    return None if valid(doc) else _problem(path, f"not the document expected: {doc!r:.200}")


def store_problems(zones: Path) -> list[str]:
    """The `local` store's files and the views rendered from them, each parsed whole."""
    found: list[str] = []
    for path in sorted(zones.glob("*.json")):
        if not path.name.startswith("."):
            found.append(check_store(path) or "")
    for views in sorted(zones.glob("*.views")):
        origin = views.name[: -len(".views")]
        for path in sorted(views.iterdir()):
            if path.name.startswith("."):
                continue
            if path.suffix == ".zone":
                found.append(check_zone_file(path, origin) or "")
            elif path.suffix == ".weights":
                found.append(check_weights(path) or "")
            elif path.suffix == ".server":
                found.append(check_server(path) or "")
        stamp = views.with_name(views.name + ".serving")
        if stamp.exists():
            found.append(check_json(stamp, lambda d: isinstance(d, dict) and "rendered" in d) or "")
    return [p for p in found if p]


def state_problems(state: Path) -> list[str]:
    """The agent's state files: each whole (an instance id, two JSON documents)."""
    found: list[str] = []
    ident = state / "instance-id"
    if ident.exists() and not re.fullmatch(r"[A-Za-z0-9._-]+\n", ident.read_text()):
        found.append(_problem(ident, f"not one identity line: {ident.read_text()!r}"))
    cluster = state / "cluster.json"
    if cluster.exists():
        found.append(check_json(cluster, lambda d: isinstance(d, dict) and bool(d.get("id"))) or "")
    applied = state / "applied.json"
    if applied.exists():
        found.append(check_json(applied, lambda d: isinstance(d, dict)
                                and bool(re.fullmatch(r"[0-9a-f]{40}", str(d.get("sha"))))) or "")
    return [p for p in found if p]


def delivery_problems(out: Path) -> list[str]:
    """The orchestrator's delivered files, each parsed whole, and its manifest."""
    found: list[str] = []
    for path in sorted(out.iterdir()) if out.is_dir() else []:
        if path.name.endswith(".hosts") and not path.name.startswith("."):
            found.append(check_hosts(path) or "")
        elif path.name.endswith(".server") and not path.name.startswith("."):
            found.append(check_server(path) or "")
        elif path.name.startswith(".gitdns-") and path.name.endswith(".owned"):
            found.append(check_json(path, lambda d: isinstance(d, list) and all(isinstance(n, str) for n in d))
                         or "")
    return [p for p in found if p]


def snapshot_files(directory: Path) -> dict[str, str]:
    """The visible files of ``directory`` (not hidden ones): name -> content."""
    if not directory.is_dir():
        return {}
    return {p.name: p.read_text(errors="replace") for p in sorted(directory.iterdir())
            if p.is_file() and not p.name.startswith(".")}
