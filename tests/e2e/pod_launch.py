"""Start one container process the way the kubelet and the container runtime would, on this
machine (run as root, by tests/e2e/pod_kit.py; not a test module, no pytest).

    python3 pod_launch.py SPEC.json

SPEC (written by `pod_kit.Pod`)::

    argv, env, workdir          the process: exactly these (nothing inherited from the caller)
    uid, gid, groups            runAsUser, runAsGroup, fsGroup + supplementalGroups
    mounts                      [{source, target, readOnly}]: bind mounts (volumes, the service
                                account, /etc/passwd and /etc/group with the image's user)
    expose                      paths the container user must reach (the interpreter): a
                                directory on the way that the user may not enter (/root 0700) is
                                covered, in this mount namespace only, by a tmpfs holding the
                                same entries
    read_only_root              readOnlyRootFilesystem: every mount but the writable volumes,
                                /proc, /sys and /dev is read-only
    no_new_privs, drop_caps     allowPrivilegeEscalation: false; capabilities drop ALL
    pod_ip                      the pod's address on its own loopback (the kubelet probes it)
    outbound                    [[ip, port]]: addresses of this machine's loopback the pod may
                                reach (the fake API server, the git servers...): listened on in
                                the pod's network namespace, forwarded to the same address here
    inbound                     [[fd, port]]: listening sockets of the caller (passed as fds);
                                each connection is forwarded to pod_ip:port (the kubelet's probes,
                                the test's requests)
    host_net_fd                 an fd of the caller's network namespace

The launcher unshares a mount, a network (only ``lo``, up) and a process namespace, starts the
forwarders, then forks: the child (process 1 of the pod, as the image's init is in a container)
sets up the mounts and a /proc of its own, drops to the user and execs ``argv``; the parent
relays SIGTERM/SIGINT to it, forwards connections, and exits with the child's status (128+N
when killed by signal N).  Every mount is made in the new mount namespace, with private
propagation: nothing of this machine's mounts changes, and no file outside the test's
directories is written.  No packet leaves loopback: the pod's namespace has only its own ``lo``.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import errno
import fcntl
import json
import os
import selectors
import signal
import socket
import stat
import struct
import sys
import threading
from pathlib import Path
from typing import Any

CLONE_NEWNS = 0x00020000
CLONE_NEWNET = 0x40000000
CLONE_NEWPID = 0x20000000
MS_RDONLY = 1
MS_NOSUID = 2
MS_NODEV = 4
MS_NOEXEC = 8
MS_REMOUNT = 32
MS_NOATIME = 1024
MS_NODIRATIME = 2048
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18
MS_RELATIME = 1 << 21
KEPT_FLAGS = MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_NOATIME | MS_NODIRATIME | MS_RELATIME  # statvfs == MS_ bits
PR_CAPBSET_DROP = 24
PR_SET_NO_NEW_PRIVS = 38
SIOCGIFFLAGS = 0x8913
SIOCSIFFLAGS = 0x8914
IFF_UP = 0x1
KERNEL_TREES = ("/proc", "/sys", "/dev")

libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]


def _check(result: int, what: str) -> None:
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    _check(libc.mount(source.encode() if source else None, target.encode(), fstype.encode() if fstype else None,
                      flags, data.encode() if data else None), f"mount {source} {target}")


def unshare(flags: int) -> None:
    _check(libc.unshare(flags), "unshare")


def setns(fd: int, nstype: int) -> None:
    _check(libc.setns(fd, nstype), "setns")


def prctl(option: int, arg: int) -> None:
    _check(libc.prctl(option, ctypes.c_ulong(arg), ctypes.c_ulong(0), ctypes.c_ulong(0), ctypes.c_ulong(0)),
           f"prctl {option}")


def loopback_up() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        ifreq = struct.pack("16sH14x", b"lo", 0)
        flags = struct.unpack("16sH14x", fcntl.ioctl(sock.fileno(), SIOCGIFFLAGS, ifreq))[1]
        fcntl.ioctl(sock.fileno(), SIOCSIFFLAGS, struct.pack("16sH14x", b"lo", flags | IFF_UP))


# -- the forwarders (the pod's network namespace <-> this machine's loopback) --------------------


def _pipe(a: socket.socket, b: socket.socket) -> None:
    try:
        while True:
            data = a.recv(65536)
            if not data:
                break
            b.sendall(data)
    except OSError:
        pass
    finally:
        for sock, how in ((b, socket.SHUT_WR), (a, socket.SHUT_RD)):
            with contextlib.suppress(OSError):
                sock.shutdown(how)


def _splice(a: socket.socket, b: socket.socket) -> None:
    def run() -> None:
        back = threading.Thread(target=_pipe, args=(b, a), daemon=True)
        back.start()
        _pipe(a, b)
        back.join()
        a.close()
        b.close()
    threading.Thread(target=run, daemon=True).start()


class Forwarder:
    """One thread: accepts on every listener and splices each connection to its destination,
    opened in the destination's network namespace."""

    def __init__(self, host_ns: int, pod_ns: int) -> None:
        self.host_ns, self.pod_ns = host_ns, pod_ns
        self.selector = selectors.DefaultSelector()
        self.lock = threading.Lock()

    def listen(self, sock: socket.socket, dest: tuple[str, int], dest_ns: int) -> None:
        sock.setblocking(False)
        self.selector.register(sock, selectors.EVENT_READ, (dest, dest_ns))

    def _connect(self, dest: tuple[str, int], dest_ns: int) -> socket.socket:
        with self.lock:  # the namespace a socket is made in is the calling thread's
            setns(dest_ns, CLONE_NEWNET)
            try:
                out = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            finally:
                setns(self.pod_ns, CLONE_NEWNET)
        out.settimeout(10)
        out.connect(dest)
        out.settimeout(None)
        return out

    def run(self) -> None:
        while True:
            for key, _ in self.selector.select():
                listener: socket.socket = key.fileobj  # type: ignore[assignment]
                dest, dest_ns = key.data
                try:
                    conn, _ = listener.accept()
                except (BlockingIOError, InterruptedError):
                    continue
                conn.setblocking(True)
                try:
                    out = self._connect(dest, dest_ns)
                except OSError:
                    conn.close()  # nothing listens there: the client sees the connection end
                    continue
                _splice(conn, out)


# -- the mounts -------------------------------------------------------------------------------------


class Mounts:
    """Bind mounts at container paths, made where a directory is missing by covering its nearest
    existing ancestor with a tmpfs that holds the same entries (bound back), so nothing on this
    machine's file systems is created."""

    def __init__(self) -> None:
        self.covered: set[str] = set()  # tmpfs roots made here
        self.made: set[str] = set()  # directories and files made inside them
        self.fds: list[int] = []

    def _cover(self, directory: str, mode: int | None = None) -> None:
        fd = os.open(directory, os.O_PATH | os.O_DIRECTORY)
        self.fds.append(fd)
        st = os.stat(directory)
        names = os.listdir(directory)
        mount("tmpfs", directory, "tmpfs", MS_NOSUID | MS_NODEV,
              f"mode={(mode if mode is not None else stat.S_IMODE(st.st_mode)):o},uid={st.st_uid},gid={st.st_gid}")
        self.covered.add(directory)
        for name in names:
            original = f"/proc/self/fd/{fd}/{name}"
            here = os.path.join(directory, name)
            info = os.lstat(original)
            if stat.S_ISLNK(info.st_mode):
                os.symlink(os.readlink(original), here)
                continue
            if stat.S_ISDIR(info.st_mode):
                os.mkdir(here)
            elif stat.S_ISREG(info.st_mode):
                open(here, "w").close()
            else:
                continue  # sockets, fifos, devices at the top of a covered directory: not needed
            mount(original, here, None, MS_BIND | MS_REC)

    def _writable(self, directory: str) -> bool:
        return directory in self.covered or directory in self.made

    def ensure(self, target: str, *, directory: bool) -> str:
        """``target`` exists (a directory, or a file when not ``directory``): its real path."""
        real = os.path.realpath(target)
        if os.path.lexists(real):
            return real
        missing: list[str] = []
        parent = real
        while not os.path.lexists(parent):
            missing.append(os.path.basename(parent))
            parent = os.path.dirname(parent)
        if not self._writable(parent):
            self._cover(parent)
        for index, name in enumerate(reversed(missing)):
            parent = os.path.join(parent, name)
            last = index == len(missing) - 1
            if last and not directory:
                open(parent, "w").close()
            else:
                os.mkdir(parent, 0o755)
            self.made.add(parent)
        return real

    def bind(self, source: str, target: str, source_fd: int) -> str:
        is_dir = stat.S_ISDIR(os.fstat(source_fd).st_mode)  # the path may be hidden by now (/tmp)
        real = self.ensure(target, directory=is_dir)
        mount(f"/proc/self/fd/{source_fd}", real, None, MS_BIND | MS_REC)
        return real

    def expose(self, path: str, uid: int, gids: set[int]) -> None:
        """Every directory on the way to ``path`` searchable by ``uid``."""
        current = "/"
        for part in Path(os.path.realpath(path)).parts[1:]:
            st = os.stat(current)
            mode = stat.S_IMODE(st.st_mode)
            allowed = (mode & 0o001 or (st.st_uid == uid and mode & 0o100)
                       or (st.st_gid in gids and mode & 0o010))
            if not allowed:
                self._cover(current, mode | 0o755)
            current = os.path.join(current, part)


def mount_points() -> list[tuple[str, str]]:
    """(mount point, mount options) of this namespace, in mount order."""
    out = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        fields = line.split()
        point = fields[4].encode().decode("unicode_escape")  # \040 and friends
        out.append((point, fields[5]))
    return out


def read_only_root(writable: set[str]) -> None:
    for point, _ in mount_points():
        if point in writable or any(point == t or point.startswith(t + "/") for t in KERNEL_TREES):
            continue
        try:
            flags = os.statvfs(point).f_flag & KEPT_FLAGS
        except OSError:
            continue  # hidden below another mount
        try:
            mount(None, point, None, MS_REMOUNT | MS_BIND | MS_RDONLY | flags)
        except OSError as exc:
            if exc.errno not in (errno.EINVAL, errno.ENOENT):
                raise


def setup_container(spec: dict[str, Any]) -> None:
    mount(None, "/", None, MS_REC | MS_PRIVATE)
    mounts = Mounts()
    # every source opened before anything is mounted: a mount at /tmp would hide sources below it
    sources = [(m, os.open(m["source"], os.O_PATH)) for m in spec["mounts"]]
    sources.sort(key=lambda item: len(Path(item[0]["target"]).parts))
    writable: set[str] = set()
    read_only: list[str] = []
    for entry, fd in sources:
        real = mounts.bind(entry["source"], entry["target"], fd)
        if entry.get("readOnly"):
            read_only.append(real)
        else:
            writable.add(real)
        os.close(fd)
    # the pod's own process namespace, as /proc shows it (the child is process 1 of it)
    mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    gids = {spec["gid"], *spec["groups"]}
    for path in spec.get("expose", []):
        mounts.expose(path, spec["uid"], gids)
    if spec.get("read_only_root"):
        read_only_root(writable)
    else:
        for real in read_only:
            mount(None, real, None, MS_REMOUNT | MS_BIND | MS_RDONLY | (os.statvfs(real).f_flag & KEPT_FLAGS))
    for fd in mounts.fds:
        os.close(fd)


def become(spec: dict[str, Any]) -> None:
    if spec.get("drop_caps"):
        last = int(Path("/proc/sys/kernel/cap_last_cap").read_text())
        for cap in range(last + 1):
            prctl(PR_CAPBSET_DROP, cap)
    os.setgroups(sorted(set(spec["groups"])))
    os.setresgid(spec["gid"], spec["gid"], spec["gid"])
    os.setresuid(spec["uid"], spec["uid"], spec["uid"])  # the permitted and effective caps go with root
    if spec.get("no_new_privs"):
        prctl(PR_SET_NO_NEW_PRIVS, 1)
    os.umask(0o022)


def resolve(argv0: str, env: dict[str, str]) -> str:
    if "/" in argv0:
        return argv0
    for directory in env.get("PATH", "").split(":"):
        candidate = os.path.join(directory or ".", argv0)
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    raise FileNotFoundError(f'exec: "{argv0}": executable file not found in $PATH')


def child(spec: dict[str, Any]) -> None:
    try:
        setup_container(spec)
        become(spec)
        os.chdir(spec["workdir"])
        env = spec["env"]
        os.execve(resolve(spec["argv"][0], env), spec["argv"], env)
    except BaseException as exc:  # the runtime's "failed to create containerd task"
        print(f"pod_launch: cannot start the container: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
        os._exit(128)


def main() -> int:
    spec = json.loads(Path(sys.argv[1]).read_text())
    host_ns = int(spec["host_net_fd"])
    unshare(CLONE_NEWNS | CLONE_NEWNET)
    pod_ns = os.open("/proc/self/ns/net", os.O_RDONLY)
    loopback_up()
    forwarder = Forwarder(host_ns, pod_ns)
    for ip, port in spec["outbound"]:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((ip, int(port)))
        sock.listen(64)
        forwarder.listen(sock, (ip, int(port)), host_ns)
    for fd, port in spec["inbound"]:
        forwarder.listen(socket.socket(fileno=int(fd)), (spec["pod_ip"], int(port)), pod_ns)
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        os.close(host_ns)
        os.close(pod_ns)
        # a process namespace of its own: the child forked next is its process 1 (a process that
        # unshared one can start no thread, hence this intermediate, which only relays)
        unshare(CLONE_NEWPID)
        init = os.fork()
        if init == 0:
            child(spec)
        os._exit(supervise(init))
    threading.Thread(target=forwarder.run, daemon=True).start()
    return supervise(pid)


def supervise(pid: int) -> int:
    """Relay SIGTERM/SIGINT/SIGHUP to ``pid``; its exit status (128+N when killed by signal N)."""
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda signum, _frame: os.kill(pid, signum))
    while True:
        try:
            _, status = os.waitpid(pid, 0)
            break
        except InterruptedError:
            continue
    if os.WIFSIGNALED(status):
        return 128 + os.WTERMSIG(status)
    return os.WEXITSTATUS(status)

if __name__ == "__main__":
    sys.exit(main())
