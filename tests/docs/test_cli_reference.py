"""docs/cli-reference.md is generated from the parser (`gitdns.cli.reference`): the committed page
must be what the generator writes now, and every verb and sub-verb of the real parser, with each
of its flags, must be on it.  When the parser changes, regenerate the page (`REGENERATE`)."""

from __future__ import annotations

import argparse
import difflib
import html
import re
import subprocess
import sys

from gitdns.cli.parser import build_parser
from gitdns.cli.reference import render
from tests.docs.examples import DOCS, ROOT

PAGE = DOCS / "cli-reference.md"
REGENERATE = "python -m gitdns.cli.reference   # from the repository root, then commit docs/cli-reference.md"
HEADING = re.compile(r"^(#{1,6}) `(gitdns(?: [\w-]+)*)`$")


def test_committed_page_is_what_the_generator_writes() -> None:
    assert PAGE.is_file(), f"docs/cli-reference.md is missing: run {REGENERATE}"
    committed = PAGE.read_text(encoding="utf-8")
    generated = render()
    if committed != generated:
        diff = "".join(difflib.unified_diff(committed.splitlines(keepends=True), generated.splitlines(keepends=True),
                                            "docs/cli-reference.md (committed)", "generated", n=1))
        lines = diff.splitlines(keepends=True)
        shown = "".join(lines[:60]) + (f"... ({len(lines) - 60} more diff lines)\n" if len(lines) > 60 else "")
        raise AssertionError(f"docs/cli-reference.md differs from the parser; regenerate it:\n"
                             f"  {REGENERATE}\n\n{shown}")


def _tree(parser: argparse.ArgumentParser, words: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...],
                                                                                       argparse.ArgumentParser]]:
    """Every parser of the real command line with its words after `gitdns`, walked here without
    the generator's help."""
    found = [(words, parser)]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                found += _tree(child, (*words, name))
    return found


def _sections() -> dict[str, tuple[int, str]]:
    """The page's sections: command name -> (heading level, text up to the next command heading)."""
    sections: dict[str, tuple[int, str]] = {}
    name, level, body = "", 0, []
    for line in PAGE.read_text(encoding="utf-8").splitlines():
        match = HEADING.match(line)
        if match:
            if name:
                sections[name] = (level, "\n".join(body))
            name, level, body = match.group(2), len(match.group(1)), []
        elif name:
            body.append(line)
    if name:
        sections[name] = (level, "\n".join(body))
    return sections


def test_every_verb_and_flag_of_the_parser_is_on_the_page() -> None:
    sections = _sections()
    tree = _tree(build_parser())
    missing = [" ".join(("gitdns", *words)) for words, _ in tree if " ".join(("gitdns", *words)) not in sections]
    assert not missing, f"verbs not on docs/cli-reference.md: {missing}; regenerate it: {REGENERATE}"
    # the just-added verbs are there too, like every other
    assert {"gitdns import", "gitdns completion", "gitdns zone show", "gitdns groups set"} <= set(sections)
    for words, parser in tree:
        name = " ".join(("gitdns", *words))
        level, body = sections[name]
        plain = " ".join(html.unescape(re.sub(r"\\(.)", r"\1", body)).split())  # the text as it renders
        assert level == min(2 + max(len(words) - 1, 0), 6), f"{name}: heading level {level}"
        for action in parser._actions:
            if isinstance(action, argparse._HelpAction) or action.help is argparse.SUPPRESS:
                continue
            for option in action.option_strings:
                assert f"`{option}" in body, f"{name}: {option} not on its section of docs/cli-reference.md"
            if action.help and not isinstance(action, argparse._SubParsersAction):
                text = " ".join(action.help.replace("%%", "%").split())
                assert text in plain, f"{name}: the help of {action.dest} is not on the page"
        if parser.epilog:
            for line in parser.epilog.splitlines():
                assert line.rstrip() in body, f"{name}: epilog line {line!r} is not on the page"


def test_anchors_are_unique_and_every_command_link_lands() -> None:
    text = PAGE.read_text(encoding="utf-8")
    anchors = [m.group(2).replace(" ", "-") for m in map(HEADING.match, text.splitlines()) if m]
    assert len(anchors) == len(set(anchors))
    for target in re.findall(r"\]\(#([\w-]+)\)", text):
        assert target in anchors, f"link to #{target}, no such heading"


def test_gitdns_startup_does_not_load_the_generator() -> None:
    code = ("import contextlib, io, sys\n"
            "import gitdns.cli\n"
            "with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):\n"
            "    gitdns.cli.main(['--help'])\n"
            "print('gitdns.cli.reference' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert out.stdout.strip() == "False"
