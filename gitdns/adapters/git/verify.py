"""Commit signature verification for the git source.

    VerifyPolicy            the trusted keys: a GPG keyring and/or an SSH allowed_signers file
    SignatureRefusedError   the commit is unsigned, badly signed, or signed by an untrusted key
    Verifier                builds a private GNUPGHOME once, then checks commits

SSH signatures are checked by ``git verify-commit`` with ``gpg.ssh.allowedSignersFile``; GPG
signatures against a GNUPGHOME holding only the trusted keys (imported with ownertrust
ultimate, ``no-autostart`` so no agent is left running).  Only a good signature (``%G?`` = G)
from a key of the policy passes.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from gitdns.errors import ConfigError, PermanentError

log = logging.getLogger(__name__)

# A git runner: (args after "git", extra env) -> (exit status, stdout, stderr); never raises
# for a non-zero exit.  GitSource provides one with its timeout and error mapping.
GitRunner = Callable[[list[str], dict[str, str]], tuple[int, str, str]]

_STATUS = {
    "G": "good signature",
    "B": "bad signature",
    "U": "good signature from a key that is not trusted",
    "X": "good signature that has expired",
    "Y": "good signature made by an expired key",
    "R": "good signature made by a revoked key",
    "E": "signature cannot be checked (the key is not among the trusted keys)",
    "N": "no signature",
}
_KEY_SUFFIXES = (".asc", ".gpg", ".pgp", ".pub", ".key", ".kbx")


class SignatureRefusedError(PermanentError):
    """The desired commit does not carry a good signature from a trusted key."""

    reason = "SignatureRefused"

    def __init__(self, message: str, *, sha: str, why: str) -> None:
        super().__init__(message)
        self.sha = sha
        self.why = why


@dataclass(frozen=True, slots=True)
class VerifyPolicy:
    """Trusted signers.  At least one of the two must be set."""

    gpg_keyring: Path | None = None  # a directory of, or a file with, exported public keys
    ssh_allowed_signers: Path | None = None  # an ssh-keygen allowed_signers file

    def check(self) -> None:
        if self.gpg_keyring is None and self.ssh_allowed_signers is None:
            raise ConfigError("signature verification needs gpg_keyring or ssh_allowed_signers")
        for path in (self.gpg_keyring, self.ssh_allowed_signers):
            if path is not None and not Path(path).exists():
                raise ConfigError(f"trusted keys {path} do not exist")


class Verifier:
    def __init__(self, policy: VerifyPolicy, home: Path, timeout: float) -> None:
        policy.check()
        self.policy = policy
        self.home = Path(home)
        self.timeout = timeout
        self._gnupg_stamp: tuple[tuple[str, int, int], ...] | None = None

    def verify(self, sha: str, signature: str, run: GitRunner) -> None:
        """Raise SignatureRefusedError unless commit ``sha`` (whose signature header is
        ``signature``, "" when unsigned) has a good signature from a trusted key."""
        if not signature.strip():
            self._refuse(sha, "the commit is not signed")
        if "BEGIN SSH SIGNATURE" in signature:
            if self.policy.ssh_allowed_signers is None:
                self._refuse(sha, "the commit is signed with an SSH key, but no SSH allowed signers are configured")
        elif "BEGIN PGP SIGNATURE" in signature:
            if self.policy.gpg_keyring is None:
                self._refuse(sha, "the commit is signed with GPG, but no GPG keyring is configured")
        else:
            self._refuse(sha, "the commit's signature is neither SSH nor OpenPGP")
        args, env = self._git_options(), self._env()
        status, _, err = run([*args, "verify-commit", sha], env)
        _, out, _ = run([*args, "log", "-1", "--format=%G?%x00%GK%x00%GS", sha], env)
        code, key, signer = ([*out.strip().split("\x00"), "", ""])[:3]
        if code != "G":
            why = _STATUS.get(code, f"signature status {code or 'unknown'}")
            self._refuse(sha, f"{why} (key {key})" if key else why)
        if status != 0:  # a good signature that git still refuses (e.g. gpg.minTrustLevel)
            self._refuse(sha, f"git verify-commit refused it: {_last_line(err)}")
        log.info("verified: sha=%s key=%s signer=%s", sha[:12], key, signer)

    def _refuse(self, sha: str, why: str) -> None:
        log.warning("refused: sha=%s why=%s", sha[:12], why)
        raise SignatureRefusedError(f"commit {sha} refused: {why}", sha=sha, why=why)

    def _git_options(self) -> list[str]:
        signers = self.policy.ssh_allowed_signers
        if signers is None:
            return []
        return ["-c", f"gpg.ssh.allowedSignersFile={os.path.abspath(signers)}"]  # git runs in the cache

    def _env(self) -> dict[str, str]:
        """GNUPGHOME for GPG checks, rebuilt whenever the trusted key files change."""
        if self.policy.gpg_keyring is None:
            return {}
        keyring = Path(self.policy.gpg_keyring)
        files = _key_files(keyring)
        stamp = tuple((str(p), p.stat().st_mtime_ns, p.stat().st_size) for p in files)
        if stamp != self._gnupg_stamp:
            self._build_gnupg_home(keyring, files)
            self._gnupg_stamp = stamp
        return {"GNUPGHOME": str(self.home)}

    def _build_gnupg_home(self, keyring: Path, files: list[Path]) -> None:
        """A fresh GNUPGHOME with exactly the trusted public keys, each trusted ultimately."""
        if not files:
            raise ConfigError(f"GPG keyring directory {keyring} holds no key files ({', '.join(_KEY_SUFFIXES)})")
        if self.home.exists():
            shutil.rmtree(self.home)
        self.home.mkdir(mode=0o700, parents=True)
        (self.home / "gpg.conf").write_text("no-autostart\n", encoding="utf-8")
        self._gpg("--import", *map(str, files))
        listing = self._gpg("--with-colons", "--list-keys")
        fingerprints = _primary_fingerprints(listing)
        if not fingerprints:
            raise ConfigError(f"GPG keyring {keyring} holds no public keys")
        self._gpg("--import-ownertrust", stdin="".join(f"{fpr}:6:\n" for fpr in fingerprints))
        log.info("built: gnupg_home=%s keys=%d", self.home, len(fingerprints))

    def _gpg(self, *args: str, stdin: str | None = None) -> str:
        argv = ["gpg", "--batch", "--no-tty", "--homedir", str(self.home), *args]
        try:
            done = subprocess.run(
                argv,
                input=stdin,
                capture_output=True,
                text=True,
                timeout=self.timeout,
                env={**os.environ, "GNUPGHOME": str(self.home)},
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise ConfigError(f"gpg {args[0]} failed: {exc}") from None
        if done.returncode != 0:
            last = done.stderr.strip().splitlines()[-1:] or ["no output"]
            raise ConfigError(f"gpg {args[0]} failed for the trusted keys: {last[0]}")
        return done.stdout


def _key_files(keyring: Path) -> list[Path]:
    try:
        if keyring.is_dir():
            return sorted(p for p in keyring.iterdir() if p.is_file() and p.suffix in _KEY_SUFFIXES)
        keyring.stat()
    except OSError as exc:
        raise ConfigError(f"GPG keyring {keyring} cannot be read: {exc.strerror}") from None
    return [keyring]


def _primary_fingerprints(listing: str) -> list[str]:
    """The fingerprint of every primary key in ``gpg --with-colons --list-keys`` output."""
    fingerprints: list[str] = []
    want = False
    for line in listing.splitlines():
        fields = line.split(":")
        if fields[0] == "pub":
            want = True
        elif fields[0] == "fpr" and want and len(fields) > 9:
            fingerprints.append(fields[9])
            want = False
    return fingerprints


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return (lines or ["no output"])[-1][:300]
