"""The measuring half of bench/bench_memory.py: a process watched through /proc (its VmHWM, and
the sampled resident memory of it and its children), and the stand-ins an agent or orchestrator
in a pod would talk to (moto's Route53 and the fake Kubernetes API, both over TLS on 127.0.0.1)."""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.e2e.agent_kit import free_ports  # noqa: E402

POD_NAMESPACE = "gitdns-system"
ORCH_NAMESPACE = "dns-failover"


# -- measuring a process -------------------------------------------------------------------------


def _status_kib(pid: int, keys: tuple[str, ...]) -> int:
    """The sum of ``keys`` (kB fields of /proc/<pid>/status); 0 once the process is gone."""
    try:
        with open(f"/proc/{pid}/status") as fh:
            return sum(int(line.split()[1]) for line in fh if line.split(":", 1)[0] in keys)
    except (OSError, IndexError, ValueError):
        return 0


def _cmdline(pid: int) -> bytes:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read()
    except OSError:
        return b""


def _children() -> dict[int, list[int]]:
    """ppid -> pids, from /proc/*/stat (this kernel has no /proc/<pid>/task/<tid>/children)."""
    out: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat") as fh:
                stat = fh.read()
        except OSError:
            continue
        ppid = int(stat[stat.rindex(")") + 2 :].split()[1])
        out.setdefault(ppid, []).append(int(entry.name))
    return out


SERVER_SIDE = (b"upload-pack", b"receive-pack")  # the git host's half of a local transport


def proc_status(pid: int) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        out[key] = value.strip()
    return out


def status_mib(pid: int, key: str) -> float:
    return int(proc_status(pid)[key].split()[0]) / 1024


class Watched:
    """A process, and a thread sampling every 20 ms its VmRSS plus the private memory (RssAnon)
    of its descendants: git and ssh, but not the server side of the local git transport
    (upload-pack, receive-pack and their children), which in a pod runs on the git host.
    Shared pages (libraries, the page cache) are counted once, in the process itself."""

    def __init__(self, cmd: list[str], env: dict[str, str], log: Path) -> None:
        self.log = log
        self.proc = subprocess.Popen(cmd, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT, cwd=ROOT)
        self.tree_peak = 0  # KiB
        self.child_peak = 0  # KiB, the largest single descendant (RssAnon)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        pid = self.proc.pid
        mine = _cmdline(pid)
        while not self._stop.wait(0.02):
            tree = _children()
            todo, total = list(tree.get(pid, [])), _status_kib(pid, ("VmRSS",))
            while todo:
                child = todo.pop()
                cmdline = _cmdline(child)
                if cmdline == mine or any(word in cmdline for word in SERVER_SIDE):
                    continue  # forked, not yet exec'd: its pages are the parent's (copy on write)
                anon = _status_kib(child, ("RssAnon",))
                total += anon
                self.child_peak = max(self.child_peak, anon)
                todo.extend(tree.get(child, []))
            self.tree_peak = max(self.tree_peak, total)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def hwm(self) -> float:
        return status_mib(self.proc.pid, "VmHWM")

    def rss(self) -> float:
        return status_mib(self.proc.pid, "VmRSS")

    def stop(self) -> int:
        self._stop.set()
        self._thread.join(5)
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        return self.proc.returncode

    def tail(self, chars: int = 3000) -> str:
        return self.log.read_text(errors="replace")[-chars:]


@dataclass
class Result:
    name: str
    kind: str  # agent | orchestrator
    what: str
    ok: bool = False
    error: str = ""
    peak: float = 0.0  # MiB, VmHWM
    tree: float = 0.0  # MiB, sampled peak of the process and its children
    child: float = 0.0  # MiB, sampled peak of the largest child
    ready_rss: float = 0.0  # MiB, VmRSS once ready
    idle: float = 0.0  # MiB, VmRSS at the end
    cycles: int = 0
    writes: int = 0
    pushes: int = 0
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)
    rss_after: list[float] = field(default_factory=list)  # VmRSS after every 10th write

    def finish(self, watched: Watched) -> None:
        if watched.alive():
            self.peak, self.idle = watched.hwm(), watched.rss()
        self.tree = watched.tree_peak / 1024
        self.child = watched.child_peak / 1024


def wait_for(predicate: Callable[[], Any], timeout: float, watched: Watched | None = None, every: float = 0.2) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        if watched is not None and not watched.alive():
            raise RuntimeError(f"exited {watched.proc.returncode}: {watched.tail()}")
        time.sleep(every)
    raise TimeoutError(f"not within {timeout:.0f} s")


def base_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GITDNS_", "AWS_", "KUBE"))}
    env.update({"GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1", "PYTHONPATH": str(ROOT)})
    return env



def python(*args: str, timeout: float = 1800) -> str:
    done = subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout,
                          env=base_env(), check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{args}: {done.stdout[-2000:]} {done.stderr[-2000:]}")
    return done.stdout



# -- the stand-ins: moto's Route53 and the fake Kubernetes API, both over TLS --------------------


def settings(path: Path) -> dict[str, str]:
    """A kustomize env file (deploy/.../settings.env) as a dict."""
    out = {}
    for line in path.read_text().splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            key, _, value = line.partition("=")
            out[key.strip()] = value.strip()
    return out


class Cloud:
    """AWS (Route53 and STS: moto_server) and a Kubernetes API server (the fake one), on loopback
    over TLS, and the environment a process in a pod would have to reach them: IRSA's role and
    web identity token (no key), botocore's endpoint and CA bundle (certifi's, as in the image,
    plus the CA of the stand-ins), a kubeconfig in place of the in-cluster service account."""

    ACCOUNT = "123456789012"  # moto's default account

    def __init__(self, work: Path) -> None:
        import certifi

        from tests.providers.tls import loopback_tls

        self.work = work
        self.tls = loopback_tls()
        work.mkdir(parents=True, exist_ok=True)
        self.bundle = work / "ca-bundle.pem"
        self.bundle.write_text(Path(certifi.where()).read_text() + self.tls.ca_file.read_text())
        self.token = work / "web-identity-token"
        self.token.write_text("eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJzeXN0ZW06c2VydmljZWFjY291bnQ6Z2l0ZG5zLXN5c3RlbTpnaXRkbnMifQ.c2ln")
        (self.port,) = free_ports(1)
        exe = shutil.which("moto_server")
        command = [exe] if exe else [sys.executable, "-m", "moto.server"]
        self.moto = subprocess.Popen([*command, "-H", "127.0.0.1", "-p", str(self.port), "--ssl-cert",
                                      str(self.tls.cert_file), "--ssl-key", str(self.tls.key_file)],
                                     stdout=(work / "moto.log").open("w"), stderr=subprocess.STDOUT,
                                     start_new_session=True)
        self.kube: Any = None
        self.kube_port = 0
        self.kubeconfig = work / "kubeconfig"
        wait_for(self._moto_up, 60)

    @property
    def endpoint(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    def _moto(self, path: str, method: str = "GET") -> bool:
        import ssl

        context = ssl.create_default_context(cafile=str(self.tls.ca_file))
        request = urllib.request.Request(self.endpoint + path, method=method)
        with urllib.request.urlopen(request, timeout=10, context=context) as resp:
            return bool(resp.status == 200)

    def _moto_up(self) -> bool:
        try:
            return self._moto("/moto-api/")
        except OSError:
            return False

    def cluster(self, kube_system_uid: str) -> None:
        """A fresh API server whose kube-system UID is ``kube_system_uid`` (the cluster id the
        agent reads), with the namespaces and the ConfigMap deploy/ expects; no hosted zone."""
        from tests.fakes.kube_apiserver import FakeKube

        if self.kube is not None:
            self.kube.stop()
        self._moto("/moto-api/reset", "POST")
        self.kube = FakeKube(kube_system_uid=kube_system_uid)
        url = self.kube.start(certfile=str(self.tls.cert_file), keyfile=str(self.tls.key_file))
        self.kube_port = int(url.rsplit(":", 1)[1])
        for namespace in (POD_NAMESPACE, ORCH_NAMESPACE):
            self.kube.create("", "v1", "namespaces", {"metadata": {"name": namespace}})
        self.kube.create("", "v1", "configmaps", {"metadata": {"name": "coredns-custom", "namespace": "kube-system"},
                                                 "data": {}})
        self.kubeconfig.write_text(
            "apiVersion: v1\nkind: Config\ncurrent-context: fake\n"
            f"clusters: [{{name: fake, cluster: {{server: '{url}', certificate-authority: '{self.tls.ca_file}'}}}}]\n"
            "users: [{name: fake, user: {token: bench}}]\n"
            "contexts: [{name: fake, context: {cluster: fake, user: fake}}]\n")

    def env(self) -> dict[str, str]:
        return {"AWS_ENDPOINT_URL": self.endpoint, "AWS_CA_BUNDLE": str(self.bundle),
                "AWS_ROLE_ARN": f"arn:aws:iam::{self.ACCOUNT}:role/gitdns",
                "AWS_WEB_IDENTITY_TOKEN_FILE": str(self.token), "AWS_STS_REGIONAL_ENDPOINTS": "regional",
                "AWS_DEFAULT_REGION": "us-east-1", "AWS_REGION": "us-east-1", "KUBECONFIG": str(self.kubeconfig),
                # in a pod (the kubelet sets these); no service-account token here, so the
                # client falls back to the kubeconfig
                "KUBERNETES_SERVICE_HOST": "127.0.0.1", "KUBERNETES_SERVICE_PORT": str(self.kube_port)}

    def route53(self) -> Any:
        import boto3

        return boto3.client("route53", endpoint_url=self.endpoint, region_name="us-east-1",
                            verify=str(self.tls.ca_file), aws_access_key_id="bench", aws_secret_access_key="bench")

    def create_zones(self, domains: list[str]) -> None:
        client = self.route53()
        for domain in domains:
            client.create_hosted_zone(Name=domain + ".", CallerReference=f"{domain}-{random.random()}")

    def value(self, fqdn: str) -> list[str]:
        client = self.route53()
        for zone in client.list_hosted_zones()["HostedZones"]:
            if fqdn.endswith("." + zone["Name"].rstrip(".")):
                rrs = client.list_resource_record_sets(HostedZoneId=zone["Id"], StartRecordName=fqdn + ".",
                                                       StartRecordType="A", MaxItems="1")["ResourceRecordSets"]
                return [r["Value"] for rs in rrs if rs["Name"] == fqdn + "." and rs["Type"] == "A"
                        for r in rs.get("ResourceRecords", [])]
        return []

    def close(self) -> None:
        if self.kube is not None:
            self.kube.stop()
        if self.moto.poll() is None:
            os.killpg(self.moto.pid, signal.SIGTERM)
            self.moto.wait(30)
