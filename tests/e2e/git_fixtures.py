"""pytest fixtures around tests/e2e/git_servers.py: one real sshd and one real HTTPS git server
(nginx + fcgiwrap + git http-backend) per session, each a child process on a free loopback
port, stopped by pid at the end.

    sshd    SshServer: deploy_key, readonly_key, known_hosts, wrong_known_hosts, url(bare), env(...)
    https   HttpsServer: ca_file, user/token, set_token (rotation), url(bare), env(...), access_entries()

A test module imports them (pytest finds them by their ``name``):

    from tests.e2e.git_fixtures import https_fixture, sshd_fixture  # noqa: F401

Being shared by the session, the servers are changed only in ways that stay with one test:
a repository of its own (``create_repo``), a user of its own for a rotation (``set_token``).
Without a server binary the tests skip, except under ``CI=true`` where they fail.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest

from tests.e2e.git_servers import HttpsServer, SshServer, ToolMissing, start_https, start_sshd

S = TypeVar("S")


def start_or_skip(start: Callable[[Path], S], directory: Path) -> S:
    """``start(directory)``; a missing binary skips the test, or fails it under CI=true."""
    try:
        return start(directory)
    except ToolMissing as exc:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(str(exc))
        pytest.skip(str(exc))


@pytest.fixture(scope="session", name="sshd")
def sshd_fixture(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SshServer]:
    server = start_or_skip(start_sshd, tmp_path_factory.mktemp("sshd"))
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session", name="https")
def https_fixture(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpsServer]:
    server = start_or_skip(start_https, tmp_path_factory.mktemp("https"))
    try:
        yield server
    finally:
        server.stop()
