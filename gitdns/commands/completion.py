"""``gitdns completion bash|zsh|fish``: a shell completion script generated from the parser.

bash and zsh come from shtab (imported here, when the verb runs: ``gitdns --help`` never loads
it); fish is written from the parser by `fish_script`, which walks the verbs and their sub-verbs.
Arguments that name a local file or directory (a `pathlib.Path` type, or a FILE, KEY, HOSTS or
DIR metavar) complete file names in each shell; an argument with choices completes its choices.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterator
from pathlib import Path

from gitdns.commands import Result
from gitdns.errors import ConfigError

SHELLS = ("bash", "zsh", "fish")
_FILE_METAVARS = frozenset({"FILE", "KEY", "HOSTS"})
_DIR_METAVARS = frozenset({"DIR"})
_DESCRIPTION_WIDTH = 100  # fish shows one line per candidate: longer help is cut at a word


def completion(parser: argparse.ArgumentParser, shell: str) -> Result:
    """The completion script for ``shell`` on stdout.  ``parser`` is the command line's own
    (`gitdns.cli.parser.build_parser`); its file-naming arguments are marked for shtab."""
    if shell not in SHELLS:
        raise ConfigError(f"completion: no completion for shell {shell} (one of: {', '.join(SHELLS)})")
    if shell == "fish":
        script = fish_script(parser)
    else:
        import shtab

        for action, kind in _path_actions(parser):
            action.complete = shtab.DIRECTORY if kind == "dir" else shtab.FILE  # type: ignore[attr-defined]
        script = shtab.complete(parser, shell)
    return Result(out=[script if script.endswith("\n") else script + "\n"])


# --- walking the parser ----------------------------------------------------------------------------


def subcommands(parser: argparse.ArgumentParser) -> list[tuple[str, str, argparse.ArgumentParser]]:
    """``(name, help, parser)`` of each verb directly below ``parser``, in the parser's order
    (an alias is not listed again)."""
    found: list[tuple[str, str, argparse.ArgumentParser]] = []
    for action in parser._actions:
        if not isinstance(action, argparse._SubParsersAction):
            continue
        helps = {choice.dest: choice.help or "" for choice in action._choices_actions}
        seen: set[int] = set()
        for name, sub in action.choices.items():
            if id(sub) not in seen:
                seen.add(id(sub))
                found.append((name, str(helps.get(name, "")), sub))
    return found


def verb_paths(parser: argparse.ArgumentParser, prefix: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    """Every verb and sub-verb as the words that name it: ``("zone",)``, ``("zone", "show")``, ..."""
    for name, _, sub in subcommands(parser):
        yield (*prefix, name)
        yield from verb_paths(sub, (*prefix, name))


def _path_kind(action: argparse.Action) -> str:
    """"dir", "file", or "" for an argument that names no local path."""
    if action.nargs == 0 or action.choices is not None:
        return ""
    metavar = action.metavar if isinstance(action.metavar, str) else ""
    if metavar in _DIR_METAVARS:
        return "dir"
    if action.type is Path or metavar in _FILE_METAVARS:
        return "file"
    return ""


def _path_actions(parser: argparse.ArgumentParser) -> Iterator[tuple[argparse.Action, str]]:
    for action in parser._actions:
        kind = _path_kind(action)
        if kind:
            yield action, kind
    for _, _, sub in subcommands(parser):
        yield from _path_actions(sub)


# --- fish ------------------------------------------------------------------------------------------


def _quote(text: str) -> str:
    """A fish single-quoted string (only backslash and quote are special inside)."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _describe(parser: argparse.ArgumentParser, action: argparse.Action | None, text: str) -> str:
    """One line of help: %(default)s and the like expanded, whitespace folded, cut at a word."""
    if action is not None and action.help:
        try:
            text = parser._get_formatter()._expand_help(action)
        except (KeyError, TypeError, ValueError):
            text = action.help
    text = re.sub(r"\s+", " ", text).strip()
    if len(text) > _DESCRIPTION_WIDTH:
        text = text[:_DESCRIPTION_WIDTH].rsplit(" ", 1)[0].rstrip(",;:(") + "..."
    return text


def _seen(path: tuple[str, ...]) -> str:
    """The fish condition: every word of ``path`` is on the command line."""
    return "; and ".join(f"__fish_seen_subcommand_from {word}" for word in path)


def _complete(prog: str, condition: str, *args: str) -> str:
    return " ".join(["complete", "-c", prog, "-n", _quote(condition), *args])


def fish_script(parser: argparse.ArgumentParser) -> str:
    """The fish completions of ``parser``: each verb offered where its parent verb is on the
    command line and none of its siblings yet (``__fish_use_subcommand`` at the top), each
    verb's options and positional choices once its words are all there."""
    prog = parser.prog
    lines = [
        f"# fish completion for {prog}, generated from its parser by `{prog} completion fish`.",
        f"# Install: {prog} completion fish > ~/.config/fish/completions/{prog}.fish",
        f"complete -c {prog} -e",
        f"complete -c {prog} -f",  # no file names unless an argument names a path
    ]
    _fish_parser(prog, parser, (), lines)
    return "\n".join(lines) + "\n"


def _fish_parser(prog: str, parser: argparse.ArgumentParser, path: tuple[str, ...], lines: list[str]) -> None:
    here = _seen(path) if path else "__fish_use_subcommand"
    verbs = subcommands(parser)
    if verbs:
        names = " ".join(name for name, _, _ in verbs)
        offer = "__fish_use_subcommand" if not path else f"{here}; and not __fish_seen_subcommand_from {names}"
        lines.append("")
        lines.append(f"# {' '.join((prog, *path))}: its verbs")
        for name, text, _ in verbs:
            lines.append(_complete(prog, offer, "-a", _quote(name), "-d", _quote(_describe(parser, None, text))))
    options = [a for a in parser._actions if a.help != argparse.SUPPRESS
               and not isinstance(a, argparse._SubParsersAction)]
    if options:
        lines.append("")
        lines.append(f"# {' '.join((prog, *path))}: its options and arguments")
    for action in options:
        line = _fish_action(prog, parser, here, action)
        if line:
            lines.append(line)
    for name, _, sub in verbs:
        _fish_parser(prog, sub, (*path, name), lines)


def _fish_action(prog: str, parser: argparse.ArgumentParser, condition: str, action: argparse.Action) -> str:
    """The ``complete`` line of one option or positional ("" for a positional with nothing to offer)."""
    args: list[str] = []
    for option in action.option_strings:
        if option.startswith("--"):
            args += ["-l", option[2:]]
        elif len(option) == 2:
            args += ["-s", option[1:]]
        else:
            args += ["-o", option[1:]]
    takes_value = action.nargs != 0
    kind = _path_kind(action)
    if action.choices is not None:
        args += ["-x", "-a", _quote(" ".join(map(str, action.choices)))]
    elif kind == "file":
        args += ["-r", "-F"] if action.option_strings else ["-F"]
    elif kind == "dir":
        args += ["-x", "-a", _quote("(__fish_complete_directories)")]
    elif not action.option_strings:
        return ""  # a name, a zone, ...: nothing the shell can list
    elif takes_value:
        args += ["-x"]  # takes a value the shell cannot guess
    description = _describe(parser, action, action.help or "")
    if description:
        args += ["-d", _quote(description)]
    return _complete(prog, condition, *args)
