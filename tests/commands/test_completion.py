"""``gitdns completion bash|zsh|fish``: each script run by its real shell.

bash: the script is sourced and the function shtab registers is driven the way bash drives it
(COMP_WORDS, COMP_CWORD), its COMPREPLY read back.  fish: the script is sourced and fish's own
``complete -C`` asked what it offers.  zsh: the syntax check, and the script autoloaded from
``fpath`` the way the docs install it.  Under CI=true the three shells are required
(scripts/install-test-deps.sh installs zsh and fish); elsewhere a missing zsh or fish skips.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gitdns.cli import main
from gitdns.cli.parser import build_parser
from gitdns.commands import EXIT_OK
from gitdns.commands.completion import completion, fish_script, subcommands, verb_paths

TOP_VERBS = tuple(name for name, _, _ in subcommands(build_parser()))


@cache
def script(shell: str) -> str:
    result = completion(build_parser(), shell)
    assert result.code == EXIT_OK and not result.err
    return result.text


def shell(name: str) -> str:
    found = shutil.which(name)
    if found is None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"{name} is required in CI: apt-get install -y --no-install-recommends {name}")
        pytest.skip(f"{name} is not installed (apt-get install {name})")
    return found


def write(tmp_path: Path, shell_name: str, name: str) -> Path:
    path = tmp_path / name
    path.write_text(script(shell_name), encoding="utf-8")
    return path


# --- the verb ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["bash", "zsh", "fish"])
def test_the_verb_prints_the_script_and_nothing_else(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["completion", name]) == EXIT_OK
    out, err = capsys.readouterr()
    assert out == script(name) and err == ""
    assert "\t" not in out and "\x1b" not in out


def test_an_unknown_shell_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["completion", "tcsh"])
    assert exc.value.code == 2
    assert "invalid choice" in capsys.readouterr().err


def test_shtab_is_imported_only_when_the_verb_runs() -> None:
    probe = ("import sys\nfrom gitdns.cli import build_parser\nbuild_parser()\n"
             "import gitdns.commands.completion\nassert 'shtab' not in sys.modules, 'shtab imported early'\n")
    subprocess.run([sys.executable, "-c", probe], check=True)


# --- bash: the completion function, driven ----------------------------------------------------------


DRIVE = r"""
source "$1"
shift
COMP_WORDS=("$@")
COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 ))
COMP_LINE="${COMP_WORDS[*]}"
COMP_POINT=${#COMP_LINE}
COMPREPLY=()
fn=$(complete -p gitdns | sed -n 's/.* -F \([^ ]*\) .*/\1/p')
"$fn" gitdns "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"
printf '%s\n' "${COMPREPLY[@]}"
"""


def bash_complete(path: Path, *words: str) -> list[str]:
    """What bash offers for the command line ``words`` (the last one being completed)."""
    out = subprocess.run([shell("bash"), "--norc", "--noprofile", "-c", DRIVE, "drive", str(path), *words],
                         capture_output=True, text=True, check=True, timeout=60).stdout
    return [line for line in out.splitlines() if line]


@pytest.mark.parametrize(("words", "expected"), [
    (("gitdns", "im"), ["import"]),
    (("gitdns", "zone", ""), ["show"]),
    (("gitdns", "completion", ""), ["bash", "zsh", "fish"]),
    (("gitdns", "plan", "--format", ""), ["text", "markdown", "json"]),
    (("gitdns", "groups", "re"), ["remove", "reconcile"]),
])
def test_bash_completes(tmp_path: Path, words: tuple[str, ...], expected: list[str]) -> None:
    assert sorted(bash_complete(write(tmp_path, "bash", "gitdns.bash"), *words)) == sorted(expected)


def test_bash_completes_an_option_of_the_verb(tmp_path: Path) -> None:
    offered = bash_complete(write(tmp_path, "bash", "gitdns.bash"), "gitdns", "plan", "--for")
    assert "--format" in offered and "--force" in offered
    assert all(o.startswith("--for") for o in offered)


def test_bash_offers_every_top_level_verb_of_the_parser(tmp_path: Path) -> None:
    assert sorted(bash_complete(write(tmp_path, "bash", "gitdns.bash"), "gitdns", "")) == sorted(TOP_VERBS)
    assert {"import", "completion", "validate", "apply", "history"} <= set(TOP_VERBS)


def test_bash_completes_file_names_for_a_path(tmp_path: Path) -> None:
    (tmp_path / "records.yaml").write_text("", encoding="utf-8")
    path = write(tmp_path, "bash", "gitdns.bash")
    out = subprocess.run([shell("bash"), "--norc", "--noprofile", "-c", f'cd "{tmp_path}" && {DRIVE}', "drive",
                          str(path), "gitdns", "validate", "rec"], capture_output=True, text=True, check=True,
                         timeout=60).stdout
    assert out.split() == ["records.yaml"]


# --- zsh and fish ---------------------------------------------------------------------------------------


def test_zsh_script_parses_and_autoloads_from_fpath(tmp_path: Path) -> None:
    zsh = shell("zsh")
    functions = tmp_path / "functions"
    functions.mkdir()
    path = functions / "_gitdns"
    path.write_text(script("zsh"), encoding="utf-8")
    subprocess.run([zsh, "-n", str(path)], check=True, timeout=60)
    probe = (f"fpath=({functions} $fpath); autoload -Uz compinit; compinit -u -D; "
             "print -r -- ${_comps[gitdns]}")
    out = subprocess.run([zsh, "-f", "-c", probe], capture_output=True, text=True, check=True, timeout=60,
                         env={**os.environ, "HOME": str(tmp_path)}).stdout
    assert out.strip() == "_gitdns"


def fish_complete(path: Path, line: str) -> list[str]:
    """What fish offers for ``line`` (``complete -C``), the candidates without descriptions."""
    fish = shell("fish")
    out = subprocess.run([fish, "--no-config", "-c", 'source $argv[1]; complete -C $argv[2]', str(path), line],
                         capture_output=True, text=True, check=True, timeout=60,
                         env={**os.environ, "HOME": str(path.parent)}).stdout
    return [entry.split("\t", 1)[0] for entry in out.splitlines() if entry]


def test_fish_script_parses(tmp_path: Path) -> None:
    path = write(tmp_path, "fish", "gitdns.fish")
    subprocess.run([shell("fish"), "--no-config", "--no-execute", str(path)], check=True, timeout=60)


@pytest.mark.parametrize(("line", "expected"), [
    ("gitdns im", ["import"]),
    ("gitdns zone ", ["show"]),
    ("gitdns completion ", ["bash", "fish", "zsh"]),
    ("gitdns plan --format ", ["json", "markdown", "text"]),
    ("gitdns groups re", ["reconcile", "remove"]),
])
def test_fish_completes(tmp_path: Path, line: str, expected: list[str]) -> None:
    assert sorted(fish_complete(write(tmp_path, "fish", "gitdns.fish"), line)) == expected


def test_fish_completes_the_options_of_the_verb_and_sub_verb(tmp_path: Path) -> None:
    path = write(tmp_path, "fish", "gitdns.fish")
    assert {"--format", "--force"} <= set(fish_complete(path, "gitdns plan --for"))
    assert "--format" in fish_complete(path, "gitdns zone show --f")
    assert fish_complete(path, "gitdns zone show ") == []  # a zone name: nothing to guess, no file names


def test_fish_offers_every_verb_and_sub_verb(tmp_path: Path) -> None:
    path = write(tmp_path, "fish", "gitdns.fish")
    assert sorted(fish_complete(path, "gitdns ")) == sorted(TOP_VERBS)
    for name, _, sub in subcommands(build_parser()):
        below = [n for n, _, _ in subcommands(sub)]
        if below:
            assert sorted(fish_complete(path, f"gitdns {name} ")) == sorted(below), name


# --- the fish script names every verb of the parser (a property over the parser's tree) --------------------


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(sorted(verb_paths(build_parser()))))
def test_fish_script_names_every_verb_and_sub_verb(path: tuple[str, ...]) -> None:
    text = script("fish")
    offered = [line for line in text.splitlines() if f" -a '{path[-1]}' " in line]
    assert offered, path
    parents = path[:-1]
    if not parents:
        assert any("'__fish_use_subcommand'" in line for line in offered), path
    else:
        assert any(all(f"__fish_seen_subcommand_from {p};" in line for p in parents) for line in offered), path
    # and the verb's own options are given under its words
    assert f"__fish_seen_subcommand_from {path[-1]}' -s h -l help" in text, path


def test_fish_script_quotes_what_the_help_says() -> None:
    import argparse

    parser = argparse.ArgumentParser(prog="tool")
    sub = parser.add_subparsers(dest="verb")
    p = sub.add_parser("say", help="it's a \\ back'slash")
    p.add_argument("--level", choices=["a", "b"], help="the level (default: %(default)s)", default="a")
    text = fish_script(parser)
    assert "-a 'say' -d 'it\\'s a \\\\ back\\'slash'" in text
    assert "-l level -x -a 'a b' -d 'the level (default: a)'" in text
