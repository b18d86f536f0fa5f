"""Tell the DNS server that serves a `local` store's views to load them again after a write.

BIND loads a zone's master file when it starts and keeps answering from that copy: a write to
the `local` store re-renders ``<zone>.views/<VIEW>.zone`` (`gitdns.adapters.zonefile`), and BIND
answers the old records until it is told to reload.  With the operator's ``--local-reload rndc``
(`ServerReload`), every render that changed a view's master file runs::

    rndc [-c CONFIG] reload ZONE IN VIEW

once per changed view, without a shell (an argv list), ``CONFIG`` being the operator's
``--rndc-config`` (the control channel's server, port and key; without it rndc's own default).
BIND's view names must be the views' file names (``GEO-EU``, ``US``, ``default``), as the
named.conf of docs/getting-started.md has them.

Who chooses what: the program, its configuration and so the server it talks to are the
operator's (flags, ``GITDNS_*`` variables, the agent's config file; never the repository).  The
repository only names the zone and, through its geo codes and ``viewClients``, the views; both
are checked here again before they become arguments (`zone_error`, `view_error`: a DNS name, a
view name of letters, digits, ``-`` and ``_``), so no argument can be read as an option or hold
anything else.  A DNS NOTIFY would not do: BIND ignores a NOTIFY for a zone it is primary for,
and these zones are.  CoreDNS needs nothing: its ``file`` plugin re-reads a master file on its
``reload`` interval when the SOA serial changed, and each write that changes the store raises the
serial (the store version).

A reload that fails (rndc missing, the control channel refusing, a view BIND does not have, a
timeout) is a `Reloaded` with ``ok`` false, never an exception: the store and its files are
right, and the server answers from what it loaded before until a later reload succeeds.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

KINDS = ("none", "rndc")  # --local-reload
TIMEOUT = 10.0  # seconds for one rndc run
_VIEW_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,62}\Z")
_LABEL_RE = re.compile(r"[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?\Z")
_SHOWN = 200  # characters of rndc's answer kept in a note


@dataclass(frozen=True, slots=True)
class ServerReload:
    """The operator's choice of how a server picks up a `local` store's writes: ``rndc`` with
    ``config`` (``rndc -c``; None: rndc's default), the program found on PATH (or in /usr/sbin)."""

    kind: str = "rndc"
    config: Path | None = None
    program: str = "rndc"
    timeout: float = TIMEOUT

    def argv(self, program: str, zone: str, view: str) -> list[str]:
        head = [program, *(["-c", str(self.config)] if self.config is not None else [])]
        return [*head, "reload", zone, "IN", view]

    def shown(self, zone: str, view: str) -> str:
        """The command as a note shows it."""
        return " ".join(self.argv("rndc", zone, view))


@dataclass(frozen=True, slots=True)
class Reloaded:
    """What one view's reload did: ``ok``, and the server's answer (or why it was not asked)."""

    view: str
    ok: bool
    message: str


def zone_error(zone: str) -> str | None:
    """Why ``zone`` cannot be an rndc argument (not a lower-case DNS name), or None."""
    labels = zone.split(".")
    if not 0 < len(zone) <= 253 or not all(_LABEL_RE.match(label) for label in labels):
        return f"{zone[:80]!r} is not a DNS name"
    return None


def view_error(view: str) -> str | None:
    """Why ``view`` cannot be an rndc argument (letters, digits, '-' and '_', 1..63), or None."""
    if _VIEW_RE.match(view):
        return None
    return f"{view[:80]!r} is not a view name of letters, digits, '-' and '_'"


def find_program(program: str) -> str | None:
    return shutil.which(program) or shutil.which(program, path="/usr/sbin:/sbin:/usr/local/sbin")


def _one_line(text: str) -> str:
    flat = "; ".join(line.strip() for line in text.splitlines() if line.strip())
    return flat if len(flat) <= _SHOWN else flat[: _SHOWN - 1] + "…"


def reload_views(reload: ServerReload, zone: str, views: Sequence[str]) -> list[Reloaded]:
    """Run ``rndc reload ZONE IN VIEW`` for each of ``views`` (in order), each at most
    ``reload.timeout`` seconds; after a timeout the views left are not tried (the server is not
    answering).  Never raises."""
    wrong = zone_error(zone)
    if wrong is not None:
        return [Reloaded(view, False, f"not asked: the zone {wrong}") for view in views]
    program = find_program(reload.program)
    if program is None:
        return [Reloaded(view, False, f"not asked: {reload.program} is not on PATH nor in /usr/sbin "
                                      "(install bind9-utils)") for view in views]
    out: list[Reloaded] = []
    for index, view in enumerate(views):
        bad = view_error(view)
        if bad is not None:
            out.append(Reloaded(view, False, f"not asked: {bad}"))
            continue
        try:
            done = subprocess.run(reload.argv(program, zone, view), capture_output=True, text=True,
                                  timeout=reload.timeout, check=False, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            out.append(Reloaded(view, False, f"no answer in {reload.timeout:g}s"))
            out.extend(Reloaded(left, False, "not asked: the server did not answer for an earlier view")
                       for left in views[index + 1:])
            break
        except OSError as exc:
            out.append(Reloaded(view, False, f"{reload.program} did not run: {exc.strerror or exc}"))
            continue
        answer = _one_line(done.stdout + "\n" + done.stderr) or f"exit status {done.returncode}"
        out.append(Reloaded(view, done.returncode == 0, answer))
    return out


def notes(reload: ServerReload, zone: str, results: Sequence[Reloaded]) -> list[str]:
    """One line for the views reloaded, one per view that was not: what `gitdns apply` and the
    agent's log say."""
    lines: list[str] = []
    good = [r.view for r in results if r.ok]
    if good:
        lines.append(f"server reload: {reload.kind} reloaded zone {zone} in view(s) {', '.join(good)}")
    lines.extend(f"server reload failed: {reload.shown(zone, r.view)}: {r.message}; the view files are written, "
                 "and the server answers from what it loaded before until it reloads them"
                 for r in results if not r.ok)
    return lines
