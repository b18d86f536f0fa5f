"""Credentials for the git source, kept out of URLs, argv, git config, logs and errors.

    GitAuth            where the token or SSH key lives (never the secret itself)
    auth_env(...)      the environment one git subprocess runs with
    check_url(url)     refuse URLs that carry a token, a password or look like an option
    redact(text, ...)  a message with the secrets and URL userinfo taken out

HTTPS: git asks ``GIT_ASKPASS`` for the username and the password.  The helper is a script
written 0700 into the workdir; it holds no secret and echoes ``$GITDNS_GIT_TOKEN``, which is
set only in the environment of the git subprocess (never in argv, never in a file of ours).
SSH: ``GIT_SSH_COMMAND`` pins the key and the known_hosts file, batch mode, no prompts.
A private CA for HTTPS remotes is trusted through ``GIT_SSL_CAINFO``.
Every command also runs without the user's and the system's git config, so no credential
helper stores the token and no ``url.insteadOf`` rewrites the remote.
"""

from __future__ import annotations

import os
import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from gitdns.errors import AuthError, ConfigError

TOKEN_VAR = "GITDNS_GIT_TOKEN"
USERNAME_VAR = "GITDNS_GIT_USERNAME"
ASKPASS_NAME = "askpass.sh"

# The helper never contains a secret: it answers git's prompts from its environment.
ASKPASS_SCRIPT = f"""#!/bin/sh
# gitdns: answers git's credential prompts from the environment of this git process only.
case "$1" in
    Username*|username*) printf '%s\\n' "${USERNAME_VAR}" ;;
    *) printf '%s\\n' "${TOKEN_VAR}" ;;
esac
"""

# Every git command: no prompts, no user or system config (credential helpers, insteadOf).
BASE_ENV = {
    "GIT_TERMINAL_PROMPT": "0",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": os.devnull,
}

_USERINFO = re.compile(r"(?P<scheme>[a-zA-Z][a-zA-Z0-9+.-]*://)[^/@\s]*@")
_AUTH_HEADER = re.compile(r"(?i)(authorization:\s*)\S+(\s+\S+)?")


@dataclass(frozen=True, slots=True)
class GitAuth:
    """How to authenticate to the remote.  Only references: an env var name, file paths."""

    token_env: str | None = None  # HTTPS token (or password) in this environment variable
    token_file: Path | None = None  # ... or in this file (read on every operation: rotation)
    username: str = "git"  # the HTTPS username sent with the token
    ssh_key: Path | None = None  # private key for ssh:// and scp-like remotes
    known_hosts: Path | None = None  # the pinned known_hosts file (StrictHostKeyChecking=yes)
    multiplex: bool = True  # share one SSH connection between git operations (see mux_dir)
    ca_file: Path | None = None  # CA bundle trusted for https:// remotes (a private CA)

    @property
    def configured(self) -> bool:
        """Anything given: otherwise git runs with the ambient configuration."""
        return self.uses_token or any(p is not None for p in (self.ssh_key, self.known_hosts, self.ca_file))

    @property
    def uses_token(self) -> bool:
        return self.token_env is not None or self.token_file is not None


def read_token(auth: GitAuth) -> str | None:
    """The token named by ``auth`` (None when none is configured).  Errors name the source only."""
    if auth.token_env is not None:
        value = os.environ.get(auth.token_env, "").strip()
        if not value:
            raise AuthError(f"git token environment variable {auth.token_env} is not set or empty")
        return value
    if auth.token_file is not None:
        try:
            value = Path(auth.token_file).read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise AuthError(f"git token file {auth.token_file} cannot be read: {exc.strerror}") from None
        if not value:
            raise AuthError(f"git token file {auth.token_file} is empty")
        return value
    return None


# schemes whose user name is a credential: git hands the URL to git-remote-http(s) on its
# command line (visible in ps), and a token given as the user name is the whole secret
_USERINFO_REFUSED = ("http", "https", "ftp", "ftps")


def check_url(url: str) -> None:
    """Refuse remotes that git would read as an option or that run commands, and URLs that
    carry a credential: a password anywhere, and any user name on an http(s) URL (a token given
    as ``https://TOKEN@host/...`` would show in ``ps``).  ssh:// and scp-like ``git@host:path``
    keep their user name: it is no secret."""
    if not url or url.startswith("-"):
        raise ConfigError(f"git remote URL {redact(url)!r} is empty or starts with '-'")
    if url.startswith("ext::"):
        raise ConfigError("git remote URLs using the ext:: transport are refused (they run commands)")
    if "://" in url:
        try:
            parts = urlsplit(url)
            password, username = parts.password, parts.username
        except ValueError:
            raise ConfigError(f"git remote URL {redact(url)!r} is not a valid URL") from None
        if password is not None:
            raise ConfigError(
                f"git remote URL {redact(url)} carries a password: give the token with --token-file or --token-env "
                "(GITDNS_TOKEN_FILE, GITDNS_TOKEN_ENV) and the user name with --git-username (GITDNS_GIT_USERNAME)"
            )
        if username is not None and parts.scheme.lower() in _USERINFO_REFUSED:
            raise ConfigError(
                f"git remote URL {redact(url)} carries a user name or token: it would show in the process list; "
                "give the URL without it, the token with --token-file or --token-env, and the user name with "
                "--git-username (GITDNS_GIT_USERNAME)"
            )


def write_askpass(workdir: Path) -> Path:
    """Write the askpass helper (0700) into ``workdir`` and return its path."""
    path = Path(workdir) / ASKPASS_NAME
    if not path.exists() or path.read_text(encoding="utf-8") != ASKPASS_SCRIPT:
        tmp = path.with_name(f".{ASKPASS_NAME}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o700)
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(ASKPASS_SCRIPT)
        os.replace(tmp, path)
    os.chmod(path, 0o700)
    return path


MUX_PERSIST = 300  # seconds an idle SSH master connection stays open
_MUX_PATH_MAX = 80  # ControlPath plus ssh's temporary suffix must fit a unix socket path (104)


def mux_dir(auth: GitAuth) -> Path | None:
    """The private directory of this transport's SSH master sockets, or None (no multiplexing).

    One SSH connection per remote is kept open for ``MUX_PERSIST`` seconds after its last use
    and every git operation runs as a session over it: one handshake instead of one per fetch,
    listing and push (the webhook-to-zone time, and sshd's MaxStartups, are dominated by them).
    The directory is named by a hash of the key and known_hosts files (path, inode, size,
    modification time), so a rotated key or re-pinned host key opens a new connection, and
    agents with different keys never share one.  Not done as process 1 (nothing would reap the
    master when it exits), or when the directory is not ours alone (mode 0700)."""
    if os.getpid() == 1 or not auth.multiplex:
        return None
    import hashlib
    import stat
    import tempfile

    parts: list[str] = [str(os.getuid())]
    for path in (auth.ssh_key, auth.known_hosts):
        if path is None:
            parts.append("-")
            continue
        try:
            st = os.stat(path)
        except OSError:
            return None
        parts.append(f"{os.path.abspath(path)}:{st.st_ino}:{st.st_size}:{st.st_mtime_ns}")
    digest = hashlib.sha256("|".join(parts).encode()).hexdigest()[:16]
    directory = Path(tempfile.gettempdir()) / f"gitdns-ssh-{digest}"
    if len(str(directory)) + 41 > _MUX_PATH_MAX:
        return None
    try:
        directory.mkdir(mode=0o700, exist_ok=True)
        st = os.lstat(directory)
    except OSError:
        return None
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077:
        return None
    return directory


def ssh_command(auth: GitAuth, timeout: float) -> str | None:
    """``GIT_SSH_COMMAND`` for a pinned key and known_hosts (None when neither is set), with
    connection sharing (`mux_dir`)."""
    if auth.ssh_key is None and auth.known_hosts is None:
        return None
    argv = ["ssh"]  # ssh runs in the cache directory: paths are made absolute
    if auth.ssh_key is not None:
        argv += ["-i", os.path.abspath(auth.ssh_key), "-o", "IdentitiesOnly=yes"]
    if auth.known_hosts is not None:
        known = os.path.abspath(auth.known_hosts)
        argv += ["-o", f"UserKnownHostsFile={known}", "-o", "GlobalKnownHostsFile=/dev/null"]
    argv += [
        "-o",
        "StrictHostKeyChecking=yes",
        "-o",
        "BatchMode=yes",
        "-o",
        f"ConnectTimeout={max(1, int(timeout))}",
    ]
    shared = mux_dir(auth)
    if shared is not None:
        argv += ["-o", "ControlMaster=auto", "-o", f"ControlPath={shared}/%C", "-o", f"ControlPersist={MUX_PERSIST}",
                 "-o", "ServerAliveInterval=15", "-o", "ServerAliveCountMax=3"]
    return shlex.join(argv)


def auth_env(auth: GitAuth, workdir: Path, timeout: float) -> tuple[dict[str, str], tuple[str, ...]]:
    """The environment for one git subprocess, and the secrets to redact from its output.
    With nothing configured git runs with the ambient configuration (the operator's git config,
    credential helper, GIT_ASKPASS or GIT_SSH_COMMAND): only prompts are turned off."""
    if not auth.configured:
        return {"GIT_TERMINAL_PROMPT": "0", "GCM_INTERACTIVE": "never"}, ()
    env = {
        **BASE_ENV,
        "GCM_INTERACTIVE": "never",
        "SSH_ASKPASS_REQUIRE": "never",
    }
    secrets: tuple[str, ...] = ()
    token = read_token(auth)
    if token is not None:
        env["GIT_ASKPASS"] = str(write_askpass(workdir))
        env[TOKEN_VAR] = token
        env[USERNAME_VAR] = auth.username
        secrets = (token,)
    else:
        env["GIT_ASKPASS"] = "/bin/false"  # a prompt fails at once instead of hanging
    command = ssh_command(auth, timeout)
    if command is not None:
        env["GIT_SSH_COMMAND"] = command
    if auth.ca_file is not None:
        env["GIT_SSL_CAINFO"] = os.path.abspath(auth.ca_file)
    return env, secrets


def redact(text: str, secrets: tuple[str, ...] = ()) -> str:
    """``text`` without the given secrets, URL userinfo or Authorization header values."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, "*****")
    text = _USERINFO.sub(lambda m: f"{m.group('scheme')}*****@", text)
    return _AUTH_HEADER.sub(lambda m: f"{m.group(1)}*****", text)
