"""The PR preview (``gitdns plan --all-clusters``) of discovered gateways: it uses the
observation the cluster's agent last published on its status branch (``gateways.yaml``) and
says so; a gateway never observed is shown as such and publishes nothing, never guessed."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from gitdns.commands.plan.command import plan
from gitdns.core.status.doc import dump
from gitdns.core.status.report import gateway_entry
from tests.agent.test_gateway_discovery import discovering_files

EU_WEST = "3f6c2b9e-5a1d-4c7e-9b0a-2d8e4f1a7c63"  # example-repo/clusters/eu-west-1.yaml spec.id
ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_COMMITTER_NAME": "t",
       "GIT_COMMITTER_EMAIL": "t@example.com", "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}


def git(*args: str, cwd: Path, stdin: str | None = None) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, env={**os.environ, **ENV}, input=stdin, capture_output=True,
                          text=True, check=False, timeout=60)
    assert done.returncode == 0, f"git {' '.join(args)}: {done.stderr}"
    return done.stdout.strip()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "work"
    for rel, text in discovering_files().items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    (root / ".gitignore").write_text(".gitdns/\n", encoding="utf-8")
    git("init", "-q", "-b", "main", cwd=root)
    git("add", "-A", cwd=root)
    git("commit", "-q", "-m", "desired state", cwd=root)
    return root


def publish(root: Path, cluster_id: str, gateways: dict[str, object]) -> None:
    """A status branch holding gateways.yaml, as the agent's publisher writes it."""
    blob = git("hash-object", "-w", "--stdin", cwd=root, stdin=dump({"gateways": gateways}))
    tree = git("mktree", cwd=root, stdin=f"100644 blob {blob}\tgateways.yaml\n")
    commit = git("commit-tree", tree, "-m", "status", cwd=root)
    git("update-ref", f"refs/heads/gitdns-status/{cluster_id}", commit, cwd=root)


def test_the_preview_uses_the_published_observation_and_says_so(repo: Path) -> None:
    publish(repo, EU_WEST, {"ingress/api-gw": gateway_entry("observed", "2030-01-02T03:04:05Z", ["192.0.2.77"],
                                                             [("api.example.com", "https")])})
    result = plan(repo, all_clusters=True)
    text = "\n".join(result.out)
    assert ("gateway ingress/api-gw of eu-west-1: addresses observed by eu-west-1 at 2030-01-02T03:04:05Z: "
            "'192.0.2.77'") in text
    assert "192.0.2.77" in text.split("\nzone example.com:", 1)[1]  # among the preview's changed records
    verbose = "\n".join(plan(repo, all_clusters=True, verbose=True).out)
    assert "192.0.2.77" in verbose.split("merged zone after every cluster applied:", 1)[1]


def test_a_gateway_never_observed_is_shown_as_such_and_nothing_guessed(repo: Path) -> None:
    result = plan(repo, all_clusters=True)  # no status branch at all
    text = "\n".join(result.out)
    assert "gateway ingress/api-gw of eu-west-1: addresses never observed by eu-west-1" in text
    assert "nothing is shown for it" in text
    assert "192.0.2.10" not in text and "192.0.2.11" not in text  # git's old addresses are gone from the file
    publish(repo, EU_WEST, {"ingress/api-gw": gateway_entry("unobserved", "", message="not read yet")})
    assert "addresses never observed by eu-west-1" in "\n".join(plan(repo, all_clusters=True).out)


def test_a_gateway_published_missing_shows_nothing(repo: Path) -> None:
    publish(repo, EU_WEST, {"ingress/api-gw": gateway_entry("missing", "2030-01-02T03:04:05Z")})
    text = "\n".join(plan(repo, all_clusters=True).out)
    assert "not found in the cluster by eu-west-1 at 2030-01-02T03:04:05Z" in text


def test_published_values_are_checked_again(repo: Path) -> None:
    publish(repo, EU_WEST, {"ingress/api-gw": {"state": "observed", "observedAt": "2030-01-02T03:04:05Z",
                                                "addresses": ["192.0.2.78", "not an address;", "999.1.1.1"],
                                                "listeners": [{"hostname": "api.example.com"}], "message": ""}})
    text = "\n".join(plan(repo, all_clusters=True).out)
    assert "observed by eu-west-1 at 2030-01-02T03:04:05Z: '192.0.2.78'\n" in text + "\n"
    assert "not an address" not in text and "999.1.1.1" not in text


def test_json_keeps_notes_off_stdout(repo: Path) -> None:
    import json

    result = plan(repo, all_clusters=True, fmt="json")
    json.loads("\n".join(result.out))
    assert any("addresses never observed by eu-west-1" in line for line in result.err)
