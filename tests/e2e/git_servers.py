"""Real git servers on loopback for the transport tests and the bench (recipe: shared
recipes, git-servers.md): OpenSSH ``sshd``, and nginx + fcgiwrap + ``git http-backend`` over
TLS from a private CA with HTTP basic auth.

    start_sshd(directory)   -> SshServer    ssh://USER@127.0.0.1:PORT/abs/path/repo.git
    start_https(directory)  -> HttpsServer  https://127.0.0.1:PORT/path/under/repos.git
    decline_pushes(bare, reason) / accept_pushes(bare)   a pre-receive hook that refuses

Each server is a child process (its own process group) on a free port of 127.0.0.1, with its
configuration, keys, certificates, pid file, logs and temporary paths in ``directory``; nothing
in the system configuration is read or changed, except that sshd needs its privilege-separation
directory (/run/sshd), made when missing.  ``stop()`` ends the process group of the pid started.

SSH: the host key, a deploy key (read/write), a read-only key (its ``command=`` runs
``git-upload-pack`` only: a push is refused), ``known_hosts`` pinned to the host key,
``wrong_known_hosts`` naming another key for the same host, ``empty_known_hosts``.  Every key is
restricted to git (``restrict,command=...``); sshd's own ``MaxStartups`` stays its default unless
given.  HTTPS: ``ca_file`` (the bundle to trust), ``other_ca_file`` (a CA that signed nothing
here), users and tokens in an htpasswd file nginx reads on every request (`set_token` rotates
one), pushes allowed for any authenticated user, ``access_log`` in a fixed format
(`access_entries` parses it: requests and bytes).

Client helpers give the environment a plain git needs for each server (``ssh_env``,
``https_env``): key and known_hosts through ``GIT_SSH_COMMAND``; the CA through
``GIT_SSL_CAINFO`` and the credentials through a ``GIT_ASKPASS`` helper that answers from the
environment, so no secret is ever in an argv.

A missing binary raises `ToolMissing` (its message says what to install); a test skips on it,
or fails under ``CI=true`` (see git_fixtures.py).  No pytest here: the bench imports it too.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import re
import shlex
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

HOST = "127.0.0.1"
INSTALL = "apt-get install -y --no-install-recommends openssh-server openssh-client nginx fcgiwrap openssl git"
GIT_IDENTITY = {"GIT_AUTHOR_NAME": "Dev", "GIT_AUTHOR_EMAIL": "dev@example.com", "GIT_COMMITTER_NAME": "Dev",
                "GIT_COMMITTER_EMAIL": "dev@example.com"}
# Every client git: no user or system config (credential helpers, insteadOf), never a prompt.
CLIENT_ENV = {"GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1", "GIT_TERMINAL_PROMPT": "0",
              "LC_ALL": "C", **GIT_IDENTITY}
TOKEN_VAR = "GITSRV_TOKEN"
USER_VAR = "GITSRV_USER"
ASKPASS = f"""#!/bin/sh
# test helper: answers git's prompts from this process's environment (never holds a secret)
case "$1" in
    Username*|username*) printf '%s\\n' "${USER_VAR}" ;;
    *) printf '%s\\n' "${TOKEN_VAR}" ;;
esac
"""
READ_ONLY = """#!/bin/sh
# test sshd: this key may fetch, never push
case "$SSH_ORIGINAL_COMMAND" in
    "git-upload-pack "*|"git-upload-archive "*) exec git-shell -c "$SSH_ORIGINAL_COMMAND" ;;
esac
echo "read-only deploy key: '$SSH_ORIGINAL_COMMAND' refused" >&2
exit 1
"""
ACCESS_FORMAT = '$remote_addr $remote_user [$time_iso8601] "$request" $status $request_length $bytes_sent'
_ACCESS = re.compile(r'^(?P<addr>\S+) (?P<user>\S+) \[(?P<time>[^]]+)\] "(?P<method>\S+) (?P<path>\S+)[^"]*" '
                     r"(?P<status>\d+) (?P<request_bytes>\d+) (?P<response_bytes>\d+)$")


class ToolMissing(Exception):
    """A server or client binary is not installed; the message carries the install hint."""


def find_tool(name: str) -> str:
    """The absolute path of ``name`` (PATH, then /usr/sbin, /usr/bin, /sbin)."""
    found = shutil.which(name) or shutil.which(name, path="/usr/sbin:/usr/bin:/sbin")
    if not found:
        raise ToolMissing(f"{name} not found: {INSTALL}")
    return os.path.abspath(found)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


def run(argv: list[str], *, cwd: Path | None = None, env: dict[str, str] | None = None,
        stdin: str | None = None, check: bool = True, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """Run a command with ``env`` added to this environment; raise with its output on failure."""
    done = subprocess.run(argv, cwd=cwd, env={**os.environ, **(env or {})}, input=stdin, capture_output=True,
                          text=True, timeout=timeout, check=False)
    if check and done.returncode != 0:
        raise RuntimeError(f"{shlex.join(argv)} exited {done.returncode}: {done.stdout}{done.stderr}")
    return done


class Child:
    """A server process in its own process group; `stop` ends that group (by the pid started)."""

    def __init__(self, name: str, argv: list[str], log: Path) -> None:
        self.name = name
        self.log = log
        with log.open("ab") as out:
            self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                         start_new_session=True)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def check(self) -> None:
        if not self.alive():
            raise RuntimeError(f"{self.name} exited {self.proc.returncode}: {self.log.read_text()[-3000:]}")

    def stop(self) -> None:
        if self.alive():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=5)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)  # children left in the group (forked workers)


def wait_listening(child: Child, port: int, *, banner: bytes = b"", timeout: float = 15) -> None:
    """Until ``port`` accepts a connection (and sends ``banner`` first, when given)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        child.check()
        try:
            with socket.create_connection((HOST, port), timeout=2) as sock:
                if not banner or sock.recv(64).startswith(banner):
                    return
        except OSError:
            pass
        time.sleep(0.05)
    child.check()
    raise RuntimeError(f"{child.name} did not listen on {HOST}:{port}: {child.log.read_text()[-3000:]}")


# -- repositories ------------------------------------------------------------------------------


def init_bare(path: Path, *, seed: bool = True) -> Path:
    """A bare repository (branch main) at ``path``, with one commit on main when ``seed``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    run(["git", "init", "-q", "--bare", "-b", "main", str(path)], env=CLIENT_ENV)
    if seed:
        work = path.with_name(path.name + ".seed")
        run(["git", "init", "-q", "-b", "main", str(work)], env=CLIENT_ENV)
        (work / "README").write_text("seeded by the test git server\n")
        run(["git", "add", "README"], cwd=work, env=CLIENT_ENV)
        run(["git", "commit", "-q", "-m", "seed"], cwd=work, env=CLIENT_ENV)
        run(["git", "push", "-q", str(path), "main"], cwd=work, env=CLIENT_ENV)
        shutil.rmtree(work)
    return path


def decline_pushes(bare: Path, reason: str = "pushes are frozen by policy") -> Path:
    """Install a pre-receive hook in ``bare`` that prints ``reason`` and refuses every push."""
    hook = bare / "hooks" / "pre-receive"
    hook.parent.mkdir(parents=True, exist_ok=True)
    hook.write_text(f"#!/bin/sh\necho {shlex.quote(reason)} >&2\nexit 1\n")
    hook.chmod(0o755)
    return hook


def accept_pushes(bare: Path) -> None:
    """Remove the hook `decline_pushes` installed."""
    (bare / "hooks" / "pre-receive").unlink(missing_ok=True)


def remote_ref(bare: Path, ref: str) -> str | None:
    """The sha of ``ref`` in ``bare`` as the server holds it (None when absent)."""
    done = run(["git", "--git-dir", str(bare), "rev-parse", "--verify", "-q", ref], env=CLIENT_ENV, check=False)
    return done.stdout.strip() or None


# -- OpenSSH -----------------------------------------------------------------------------------


def keygen(path: Path, comment: str) -> Path:
    """An ed25519 key pair without passphrase at ``path`` (+ ``.pub``); the private key 0600."""
    run([find_tool("ssh-keygen"), "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path)])
    return path


def ssh_command(key: Path | None, known_hosts: Path | None) -> str:
    """``GIT_SSH_COMMAND`` as an operator writes it: one key, pinned known_hosts, no prompts, and no
    ssh config of the user (-F /dev/null)."""
    argv = [find_tool("ssh"), "-F", "/dev/null", "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=yes",
            "-o", "GlobalKnownHostsFile=/dev/null", "-o", "ConnectTimeout=10"]
    if key is not None:
        argv += ["-i", str(key), "-o", "IdentitiesOnly=yes"]
    argv += ["-o", f"UserKnownHostsFile={known_hosts or os.devnull}"]
    return shlex.join(argv)


def ssh_env(key: Path | None, known_hosts: Path | None) -> dict[str, str]:
    """The environment (to add to os.environ) for a plain git against an `SshServer`."""
    return {**CLIENT_ENV, "GIT_SSH_COMMAND": ssh_command(key, known_hosts), "GIT_ASKPASS": "/bin/false",
            "SSH_ASKPASS_REQUIRE": "never"}


def _authorized(command: str, pub: Path) -> str:
    quoted = command.replace("\\", "\\\\").replace('"', '\\"')
    return f'restrict,command="{quoted}" {pub.read_text().strip()}\n'


@dataclass
class SshServer:
    directory: Path
    port: int
    user: str
    host_key: Path  # the server's private host key (its .pub beside it)
    deploy_key: Path  # read/write client key (private; .pub beside it)
    readonly_key: Path  # may fetch, a push is refused
    known_hosts: Path  # pinned to host_key
    wrong_known_hosts: Path  # another key for the same [127.0.0.1]:port: "Host key verification failed."
    empty_known_hosts: Path  # nothing known: "No ED25519 host key is known ..."
    repos: Path
    log: Path
    child: Child | None = field(default=None, repr=False)

    @property
    def pid(self) -> int:
        assert self.child is not None
        return self.child.pid

    @property
    def authorized_keys(self) -> Path:
        return self.directory / "authorized_keys"

    def url(self, bare: Path) -> str:
        return f"ssh://{self.user}@{HOST}:{self.port}{Path(bare).resolve()}"

    def create_repo(self, name: str, *, seed: bool = True) -> Path:
        """A bare repository ``repos/<name>.git`` (one commit on main when ``seed``)."""
        return init_bare(self.repos / f"{name}.git", seed=seed)

    def add_key(self, name: str, *, read_only: bool = False) -> Path:
        """A new client key, authorised from the next connection on (sshd reads the file per login)."""
        key = keygen(self.directory / name, name)
        self._authorize(key, read_only=read_only)
        return key

    def _authorize(self, key: Path, *, read_only: bool) -> None:
        command = str(self.directory / "read-only.sh") if read_only else 'git-shell -c "$SSH_ORIGINAL_COMMAND"'
        with self.authorized_keys.open("a") as out:
            out.write(_authorized(command, key.with_name(key.name + ".pub")))

    def env(self, key: Path | None = None, known_hosts: Path | None = None) -> dict[str, str]:
        """`ssh_env` with the deploy key and the pinned known_hosts unless others are given."""
        return ssh_env(key or self.deploy_key, known_hosts or self.known_hosts)

    def stop(self) -> None:
        if self.child is not None:
            self.child.stop()


def sshd_config(server: SshServer, max_startups: str | None) -> str:
    lines = [
        f"Port {server.port}",
        f"ListenAddress {HOST}",
        "AddressFamily inet",
        f"HostKey {server.host_key}",
        f"PidFile {server.directory / 'sshd.pid'}",
        f"AuthorizedKeysFile {server.authorized_keys}",
        "StrictModes no",  # keys and authorized_keys live under the temp dir
        "PubkeyAuthentication yes",
        "PasswordAuthentication no",
        "KbdInteractiveAuthentication no",
        "HostbasedAuthentication no",
        "PermitRootLogin forced-commands-only",  # every key carries command=
        "UsePAM no",
        f"AllowUsers {server.user}",
        "UseDNS no",
        "PrintMotd no",
        "PermitUserEnvironment no",
        "AcceptEnv GIT_PROTOCOL",  # git's protocol v2 over ssh
        "LogLevel VERBOSE",
    ]
    if max_startups:
        lines.append(f"MaxStartups {max_startups}")
    return "\n".join(lines) + "\n"


def start_sshd(directory: Path, *, max_startups: str | None = None) -> SshServer:
    """sshd on a free loopback port serving bare repositories by absolute path (see module doc).
    ``max_startups`` (e.g. ``"200:30:400"``) overrides sshd's default 10:30:100."""
    sshd = find_tool("sshd")
    for tool in ("ssh", "ssh-keygen", "git", "git-shell"):
        find_tool(tool)
    directory.mkdir(parents=True, exist_ok=True)
    user = pwd.getpwuid(os.getuid()).pw_name
    port = free_port()
    host_key = keygen(directory / "host_key", "gitsrv-host")
    other_host_key = keygen(directory / "other_host_key", "gitsrv-other-host")
    known = directory / "known_hosts"
    known.write_text(f"[{HOST}]:{port} {(directory / 'host_key.pub').read_text().strip()}\n")
    wrong = directory / "wrong_known_hosts"
    wrong.write_text(f"[{HOST}]:{port} {(directory / 'other_host_key.pub').read_text().strip()}\n")
    other_host_key.unlink()  # only its public half is needed
    empty = directory / "empty_known_hosts"
    empty.write_text("")
    read_only = directory / "read-only.sh"
    read_only.write_text(READ_ONLY)
    read_only.chmod(0o755)
    server = SshServer(directory=directory, port=port, user=user, host_key=host_key,
                       deploy_key=keygen(directory / "deploy_key", "gitsrv-deploy"),
                       readonly_key=keygen(directory / "readonly_key", "gitsrv-readonly"),
                       known_hosts=known, wrong_known_hosts=wrong, empty_known_hosts=empty,
                       repos=directory / "repos", log=directory / "sshd.log")
    server.repos.mkdir(exist_ok=True)
    server.authorized_keys.write_text("")
    server._authorize(server.deploy_key, read_only=False)
    server._authorize(server.readonly_key, read_only=True)
    config = directory / "sshd_config"
    config.write_text(sshd_config(server, max_startups))
    if os.getuid() == 0:
        os.makedirs("/run/sshd", mode=0o755, exist_ok=True)  # sshd's privilege-separation directory
    run([sshd, "-t", "-f", str(config)])
    server.child = Child("sshd", [sshd, "-D", "-e", "-f", str(config)], server.log)
    try:
        wait_listening(server.child, port, banner=b"SSH-2.0-")
    except BaseException:
        server.stop()
        raise
    return server


# -- nginx + fcgiwrap + git http-backend over TLS -------------------------------------------------


def make_ca(directory: Path, name: str) -> tuple[Path, Path]:
    """A self-signed CA (P-256): (certificate, key)."""
    openssl = find_tool("openssl")
    cert, key = directory / f"{name}.pem", directory / f"{name}.key"
    run([openssl, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
         "-keyout", str(key), "-out", str(cert), "-days", "7", "-subj", f"/CN=gitdns test {name}",
         "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign"])
    return cert, key


def make_server_cert(directory: Path, ca: tuple[Path, Path]) -> tuple[Path, Path]:
    """A server certificate for IP 127.0.0.1 signed by ``ca``: (certificate, key)."""
    openssl = find_tool("openssl")
    cert, key, csr = directory / "server.pem", directory / "server.key", directory / "server.csr"
    ext = directory / "server.ext"
    ext.write_text("subjectAltName=IP:127.0.0.1\nbasicConstraints=critical,CA:FALSE\n"
                   "keyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\n")
    run([openssl, "req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
         "-keyout", str(key), "-out", str(csr), "-subj", "/CN=127.0.0.1"])
    run([openssl, "x509", "-req", "-in", str(csr), "-CA", str(ca[0]), "-CAkey", str(ca[1]), "-CAcreateserial",
         "-out", str(cert), "-days", "7", "-extfile", str(ext)])
    return cert, key


def hash_password(token: str) -> str:
    """crypt(3) SHA-256 of ``token`` (``openssl passwd -5``, the token on stdin, never in argv)."""
    return run([find_tool("openssl"), "passwd", "-5", "-stdin"], stdin=token + "\n").stdout.strip()


def https_env(user: str | None, token: str | None, ca_file: Path | None, workdir: Path) -> dict[str, str]:
    """The environment (to add to os.environ) for a plain git against an `HttpsServer`: the CA in
    ``GIT_SSL_CAINFO``, the credentials answered by a ``GIT_ASKPASS`` helper from the environment."""
    env = dict(CLIENT_ENV)
    if ca_file is not None:
        env["GIT_SSL_CAINFO"] = str(ca_file)
    if user is None or token is None:
        env["GIT_ASKPASS"] = "/bin/false"
        return env
    helper = workdir / "askpass.sh"
    if not helper.exists():
        helper.write_text(ASKPASS)
        helper.chmod(0o700)
    return {**env, "GIT_ASKPASS": str(helper), USER_VAR: user, TOKEN_VAR: token}


@dataclass(frozen=True, slots=True)
class AccessEntry:
    user: str
    method: str
    path: str
    status: int
    request_bytes: int  # $request_length: request line, headers and body
    response_bytes: int  # $bytes_sent: everything sent to the client


@dataclass
class HttpsServer:
    directory: Path
    port: int
    repos: Path  # GIT_PROJECT_ROOT: repositories are served by their path below it
    ca_file: Path  # the CA bundle clients trust
    other_ca_file: Path  # a CA that signed nothing here: "certificate verify failed"
    htpasswd: Path
    access_log: Path
    error_log: Path
    user: str = "git"
    token: str = "gitsrv-token-0"
    children: list[Child] = field(default_factory=list, repr=False)
    _users: dict[str, str] = field(default_factory=dict, repr=False)

    @property
    def pid(self) -> int:
        """nginx's master pid."""
        return self.children[-1].pid

    @property
    def base_url(self) -> str:
        return f"https://{HOST}:{self.port}"

    def url(self, bare: Path) -> str:
        rel = Path(bare).resolve().relative_to(self.repos.resolve())
        return f"{self.base_url}/{rel.as_posix()}"

    def create_repo(self, name: str, *, seed: bool = True) -> Path:
        return init_bare(self.repos / f"{name}.git", seed=seed)

    def set_token(self, user: str, token: str | None) -> None:
        """Give ``user`` the password ``token`` (None: remove the user); the htpasswd file is
        replaced atomically and nginx reads it on the next request: a rotation."""
        if token is None:
            self._users.pop(user, None)
        else:
            self._users[user] = hash_password(token)
        tmp = self.htpasswd.with_name(self.htpasswd.name + ".tmp")
        tmp.write_text("".join(f"{name}:{hashed}\n" for name, hashed in sorted(self._users.items())))
        os.replace(tmp, self.htpasswd)
        if user == self.user and token is not None:
            self.token = token

    def env(self, user: str | None = None, token: str | None = None, ca_file: Path | None = None,
            workdir: Path | None = None) -> dict[str, str]:
        """`https_env` with the server's user, current token and CA unless others are given."""
        return https_env(user or self.user, token or self.token, ca_file or self.ca_file, workdir or self.directory)

    def access_entries(self) -> list[AccessEntry]:
        """The access log so far (nginx writes each line when its request ends)."""
        entries = []
        for line in self.access_log.read_text().splitlines() if self.access_log.exists() else []:
            match = _ACCESS.match(line)
            if match:
                entries.append(AccessEntry(match["user"], match["method"], match["path"], int(match["status"]),
                                           int(match["request_bytes"]), int(match["response_bytes"])))
        return entries

    def stop(self) -> None:
        for child in reversed(self.children):  # nginx, then fcgiwrap
            child.stop()


def nginx_config(server: HttpsServer, cert: Path, key: Path, socket_path: Path, backend: str) -> str:
    d = server.directory
    return f"""user root;
worker_processes 1;
daemon off;
pid {d / 'nginx.pid'};
error_log {server.error_log} info;
events {{ worker_connections 512; }}
http {{
    log_format gitsrv '{ACCESS_FORMAT}';
    access_log {server.access_log} gitsrv;
    client_body_temp_path {d / 'tmp' / 'body'};
    fastcgi_temp_path {d / 'tmp' / 'fastcgi'};
    proxy_temp_path {d / 'tmp' / 'proxy'};
    uwsgi_temp_path {d / 'tmp' / 'uwsgi'};
    scgi_temp_path {d / 'tmp' / 'scgi'};
    server {{
        listen {HOST}:{server.port} ssl;
        ssl_certificate {cert};
        ssl_certificate_key {key};
        client_max_body_size 0;
        location / {{
            auth_basic "git";
            auth_basic_user_file {server.htpasswd};
            fastcgi_pass unix:{socket_path};
            fastcgi_param SCRIPT_FILENAME {backend};
            fastcgi_param GIT_PROJECT_ROOT {server.repos};
            fastcgi_param GIT_HTTP_EXPORT_ALL "";
            fastcgi_param PATH_INFO $uri;
            fastcgi_param REMOTE_USER $remote_user;
            fastcgi_param REMOTE_ADDR $remote_addr;
            fastcgi_param QUERY_STRING $query_string;
            fastcgi_param REQUEST_METHOD $request_method;
            fastcgi_param CONTENT_TYPE $content_type;
            fastcgi_param CONTENT_LENGTH $content_length;
            fastcgi_param GIT_PROTOCOL $http_git_protocol;
        }}
    }}
}}
"""


def start_https(directory: Path, *, user: str = "git", token: str = "gitsrv-token-0") -> HttpsServer:
    """nginx (TLS, basic auth) + fcgiwrap + git http-backend on a free loopback port (see module
    doc); ``user`` may push and fetch with password ``token``."""
    nginx, fcgiwrap = find_tool("nginx"), find_tool("fcgiwrap")
    find_tool("openssl")
    exec_path = run([find_tool("git"), "--exec-path"]).stdout.strip()
    backend = os.path.join(exec_path, "git-http-backend")
    if not os.access(backend, os.X_OK):
        raise ToolMissing(f"git-http-backend not found in {exec_path}: {INSTALL}")
    directory.mkdir(parents=True, exist_ok=True)
    for sub in ("body", "fastcgi", "proxy", "uwsgi", "scgi"):
        (directory / "tmp" / sub).mkdir(parents=True, exist_ok=True)
    ca = make_ca(directory, "ca")
    other_ca, _ = make_ca(directory, "other-ca")
    cert, key = make_server_cert(directory, ca)
    server = HttpsServer(directory=directory, port=free_port(), repos=directory / "repos", ca_file=ca[0],
                         other_ca_file=other_ca, htpasswd=directory / "htpasswd",
                         access_log=directory / "access.log", error_log=directory / "error.log", user=user)
    server.repos.mkdir(exist_ok=True)
    server.set_token(user, token)
    socket_path = directory / "fcgiwrap.sock"
    socket_path.unlink(missing_ok=True)
    config = directory / "nginx.conf"
    config.write_text(nginx_config(server, cert, key, socket_path, backend))
    base = [nginx, "-p", str(directory), "-e", str(server.error_log), "-c", str(config)]
    run([*base, "-t"])
    try:
        fcgi = Child("fcgiwrap", [fcgiwrap, "-c", "4", "-s", f"unix:{socket_path}"], directory / "fcgiwrap.log")
        server.children.append(fcgi)
        deadline = time.monotonic() + 10
        while not socket_path.exists():
            fcgi.check()
            if time.monotonic() > deadline:
                raise RuntimeError(f"fcgiwrap made no socket: {fcgi.log.read_text()[-2000:]}")
            time.sleep(0.02)
        server.children.append(Child("nginx", base, directory / "nginx.log"))
        wait_listening(server.children[-1], server.port)
    except BaseException:
        server.stop()
        raise
    return server
