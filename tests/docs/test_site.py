"""The documentation site (mkdocs.yml): every page under docs/ is in the nav once, and the site
builds with `mkdocs build --strict`, which fails on a page left out of the nav, a nav entry with
no page, and a link or anchor that does not resolve (the `validation:` settings).  Never with
`--quiet`: MkDocs counts the warnings --strict fails on through its log, and --quiet silences
them before they are counted, so `mkdocs build --strict --quiet` passes whatever it finds."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML

from tests.docs.examples import DOCS, ROOT

CONFIG = ROOT / "mkdocs.yml"


def _nav_pages(items: Any) -> list[str]:
    pages: list[str] = []
    for item in items:
        if isinstance(item, str):
            pages.append(item)
        elif isinstance(item, dict):
            for value in item.values():
                pages += _nav_pages(value) if isinstance(value, list) else [value]
    return pages


def _config() -> Any:
    yaml = YAML(typ="safe")
    # mkdocs.yml names a Python callable (the slugify of the toc extension): not needed here.
    yaml.constructor.add_multi_constructor("tag:yaml.org,2002:python/", lambda loader, suffix, node: None)
    return yaml.load(CONFIG.read_text(encoding="utf-8"))


def test_every_page_is_in_the_nav_once() -> None:
    nav = _nav_pages(_config()["nav"])
    pages = sorted(p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md"))
    assert sorted(set(nav)) == sorted(nav), f"in the nav twice: {sorted({p for p in nav if nav.count(p) > 1})}"
    missing = sorted(set(pages) - set(nav))
    assert not missing, f"pages not in mkdocs.yml's nav: {missing}"
    assert "cli-reference.md" in nav and {f"integrations/{n}.md" for n in
                                          ("argocd", "flux", "github", "gitlab", "prometheus-grafana")} <= set(nav)


def test_the_site_builds_strictly(tmp_path: Path) -> None:
    run = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(CONFIG),
                          "--site-dir", str(tmp_path / "site")], capture_output=True, text=True, cwd=ROOT,
                         env={**os.environ, "NO_MKDOCS_2_WARNING": "1"}, timeout=240)
    assert run.returncode == 0, f"mkdocs build --strict failed:\n{run.stdout}{run.stderr}"
    assert (tmp_path / "site" / "cli-reference" / "index.html").is_file()
