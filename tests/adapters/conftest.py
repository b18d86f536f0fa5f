"""Fixtures for the git adapters: local bare remotes, commits with fixed identities and
dates, SSH and GPG signing keys, and a TCP listener that never answers."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

GIT_ENV = {
    "GIT_AUTHOR_NAME": "Alice Author",
    "GIT_AUTHOR_EMAIL": "alice@example.com",
    "GIT_COMMITTER_NAME": "Carol Committer",
    "GIT_COMMITTER_EMAIL": "carol@example.com",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_TERMINAL_PROMPT": "0",
}
EPOCH = 1_700_000_000


def git(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(
        ["git", *args],
        cwd=cwd,
        env={**os.environ, **GIT_ENV, **(env or {})},
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    if done.returncode != 0:
        raise AssertionError(f"git {' '.join(args)} failed: {done.stderr}")
    return done.stdout.strip()


class Remote:
    """A bare repository (the remote) and a work tree that commits and pushes to it."""

    def __init__(self, root: Path, branch: str = "main") -> None:
        self.bare = root / "remote.git"
        self.work = root / "work"
        self.branch = branch
        self.ticks = 0
        git("init", "--quiet", "--bare", "-b", branch, str(self.bare))
        git("init", "--quiet", "-b", branch, str(self.work))

    @property
    def url(self) -> str:
        return self.bare.as_uri()

    def commit(
        self,
        files: dict[str, str | None],
        message: str = "change",
        sign: list[str] | None = None,
        env: dict[str, str] | None = None,
    ) -> str:
        """Write (or, for None, delete) ``files`` and commit; ``sign`` are extra ``-c`` options
        that make ``git commit -S`` sign (``env``: e.g. GNUPGHOME).  Returns the new sha."""
        for name, text in files.items():
            path = self.work / name
            if text is None:
                path.unlink()
                continue
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        self.ticks += 1
        when = f"@{EPOCH + self.ticks * 60} +0000"
        options = [arg for option in sign or [] for arg in ("-c", option)]
        git("add", "-A", cwd=self.work)
        extra = ["-S"] if sign else []
        git(
            *options,
            "commit",
            "--quiet",
            "--allow-empty",
            *extra,
            "-m",
            message,
            cwd=self.work,
            env={"GIT_AUTHOR_DATE": when, "GIT_COMMITTER_DATE": when, **(env or {})},
        )
        return self.head()

    def push(self, force: bool = False) -> None:
        git(
            "push",
            "--quiet",
            *(["--force"] if force else []),
            str(self.bare),
            f"HEAD:refs/heads/{self.branch}",
            cwd=self.work,
        )

    def head(self) -> str:
        return git("rev-parse", "HEAD", cwd=self.work)

    def reset(self, sha: str) -> None:
        git("reset", "--quiet", "--hard", sha, cwd=self.work)

    def orphan(self) -> None:
        """Start unrelated history (the next commit has no parent)."""
        git("checkout", "--quiet", "--orphan", "unrelated", cwd=self.work)
        git("rm", "-r", "--quiet", "--cached", ".", cwd=self.work)


@pytest.fixture
def remote(tmp_path: Path) -> Remote:
    return Remote(tmp_path / "origin")


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    return tmp_path / "agent"


@pytest.fixture
def hanging_port() -> Iterator[int]:
    """A TCP listener on 127.0.0.1 that accepts connections and never answers."""
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    server.settimeout(0.2)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except (TimeoutError, OSError):
                continue
            held.append(conn)

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield int(server.getsockname()[1])
    stop.set()
    thread.join(timeout=5)
    for conn in held:
        conn.close()
    server.close()


@pytest.fixture
def closed_port() -> int:
    """A 127.0.0.1 port nothing listens on (bound once, then released)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def ssh_keys(tmp_path: Path) -> dict[str, Path]:
    """Two ed25519 keys, ``trusted`` and ``untrusted``, and an allowed_signers file for the first."""
    if shutil.which("ssh-keygen") is None:
        pytest.skip("ssh-keygen is not installed")
    keys = tmp_path / "ssh"
    keys.mkdir()
    out: dict[str, Path] = {}
    for name in ("trusted", "untrusted"):
        path = keys / name
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name, "-f", str(path)], check=True)
        out[name] = path
    public = (keys / "trusted.pub").read_text(encoding="utf-8").split()
    signers = keys / "allowed_signers"
    signers.write_text(f"{GIT_ENV['GIT_COMMITTER_EMAIL']} {public[0]} {public[1]}\n", encoding="utf-8")
    out["allowed_signers"] = signers
    return out


def ssh_sign(key: Path) -> list[str]:
    return ["gpg.format=ssh", f"user.signingKey={key}"]


class GpgKeys:
    """Throwaway OpenPGP keys in their own GNUPGHOME (short path: the agent socket lives there)."""

    def __init__(self, home: Path) -> None:
        self.home = home
        home.mkdir(mode=0o700)
        self.env = {"GNUPGHOME": str(home)}

    def generate(self, name: str) -> str:
        spec = (
            "%no-protection\nKey-Type: eddsa\nKey-Curve: ed25519\n"
            f"Name-Real: {name}\nName-Email: {name}@example.com\nExpire-Date: 0\n%commit\n"
        )
        self._gpg("--batch", "--gen-key", stdin=spec)
        listing = self._gpg("--with-colons", "--list-keys", f"{name}@example.com")
        return next(line.split(":")[9] for line in listing.splitlines() if line.startswith("fpr:"))

    def export(self, fingerprint: str, dest: Path) -> Path:
        dest.write_text(self._gpg("--armor", "--export", fingerprint), encoding="utf-8")
        return dest

    def sign(self, fingerprint: str) -> list[str]:
        return ["gpg.format=openpgp", f"user.signingKey={fingerprint}"]

    def stop(self) -> None:
        subprocess.run(["gpgconf", "--kill", "gpg-agent"], env={**os.environ, **self.env}, check=False)

    def _gpg(self, *args: str, stdin: str | None = None) -> str:
        done = subprocess.run(
            ["gpg", "--batch", "--homedir", str(self.home), *args],
            input=stdin,
            capture_output=True,
            text=True,
            env={**os.environ, **self.env},
            check=False,
            timeout=60,
        )
        if done.returncode != 0:
            raise AssertionError(f"gpg {args} failed: {done.stderr}")
        return done.stdout


@pytest.fixture
def gpg_keys(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GpgKeys]:
    if shutil.which("gpg") is None or shutil.which("gpgconf") is None:
        pytest.skip("gpg is not installed")
    keys = GpgKeys(tmp_path_factory.mktemp("gpg") / "home")
    try:
        yield keys
    finally:
        keys.stop()
