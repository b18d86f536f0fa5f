"""Deliver the orchestrator's CoreDNS files: a shared directory, or the CoreDNS ConfigMap.

    DirectoryDelivery(directory, owner, pid_file=None)     the recommended path
    ConfigMapDelivery(namespace, name, owner, api=None)    the CoreDNS custom ConfigMap

Both take the *complete* set of files an owner (a node pool) publishes, ``{name: text}``,
and make the target hold exactly that: files whose content changed are written, files the
owner wrote before and no longer publishes are removed, every other file is left alone.
What the owner wrote is remembered next to the files (a hidden manifest
``.gitdns-<owner>.owned`` in the directory; the annotation ``gitdns.io/owned-<owner>`` on the
ConfigMap), so files of other owners and of people (``*.override``, other ``*.server``) are
never touched.  Nothing is written when nothing changed.

Directory (the orchestrator as a sidecar of the CoreDNS pod, an emptyDir mounted at
``/etc/coredns/custom`` in both containers): each file is written to a hidden temporary file
in the same directory, fsynced, chmod 0644 (dnsmasq and CoreDNS may run as another user) and
renamed over the old one, so a reader sees the old or the new file, never half of one.  A
process killed mid-write leaves such a temporary file (hidden: CoreDNS and dnsmasq never read
it); the first delivery of the next process removes those of this owner's files and manifest
(one orchestrator per pool writes them).  With ``pid_file`` the process named there gets
SIGHUP after a change (dnsmasq re-reads its ``addn-hosts`` on SIGHUP; CoreDNS's ``hosts``
plugin re-reads on its own timer instead).

ConfigMap: read, change only the keys that differ, replace with the resourceVersion read (a
concurrent writer makes that a 409: re-read and retry, at most ``max_attempts`` times).  A
result past 1 MiB (``data`` plus ``binaryData``, keys included: the Kubernetes limit) is
refused before writing.  The kubelet projects a ConfigMap change into the pod's volume on
its sync period plus its cache TTL: about a minute, so this path adds ~60 s to failover.
The ``kubernetes`` client is imported only when this class is built.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import random
import re
import signal
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from gitdns import fsutil
from gitdns.errors import AuthError, ConfigError, PermanentError, StaleWriteError, UnreachableError

log = logging.getLogger(__name__)

CONFIGMAP_LIMIT = 1024 * 1024  # bytes: Kubernetes refuses a ConfigMap whose data passes 1 MiB
OWNED_ANNOTATION = "gitdns.io/owned-{owner}"
FILE_MODE = 0o644
_NAME = re.compile(r"^[-._a-zA-Z0-9]+$")  # a ConfigMap key, and a safe file name


class ConfigMapTooLargeError(PermanentError):
    reason = "ConfigMapTooLarge"


@dataclass(frozen=True, slots=True)
class DeliveryResult:
    written: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    signalled: bool = False
    attempts: int = 0  # ConfigMap writes tried (409s retried)

    @property
    def changed(self) -> bool:
        return bool(self.written or self.removed)


class Delivery(Protocol):
    @property
    def target(self) -> str: ...  # where the files go, for logs and /status

    def deliver(self, files: Mapping[str, str]) -> DeliveryResult: ...


def check_names(files: Mapping[str, str]) -> None:
    for name in files:
        if not _NAME.match(name) or name.startswith("."):
            raise ConfigError(f"delivery: {name!r} is not a valid file name / ConfigMap key")


# --- a shared directory ---------------------------------------------------------------------


class DirectoryDelivery:
    def __init__(self, directory: Path, owner: str, *, pid_file: Path | None = None,
                 sig: int = signal.SIGHUP) -> None:
        self.directory = Path(directory)
        self.owner = owner
        self.pid_file = pid_file
        self.sig = sig
        self.manifest = self.directory / f".gitdns-{owner}.owned"
        self._swept = False  # the first delivery removes what a killed predecessor left

    @property
    def target(self) -> str:
        return f"dir:{self.directory}"

    def owned(self) -> set[str]:
        try:
            names = json.loads(self.manifest.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return set()
        except (OSError, ValueError) as exc:
            log.warning("manifest unreadable: path=%s error=%s", self.manifest, exc)
            return set()
        return {n for n in names if isinstance(n, str) and _NAME.match(n) and not n.startswith(".")}

    def deliver(self, files: Mapping[str, str]) -> DeliveryResult:
        check_names(files)
        self.directory.mkdir(parents=True, exist_ok=True)
        before = self.owned()
        if not self._swept:
            self._sweep(before | set(files))
        if not before >= set(files):  # own a file before it exists: a crash leaves nothing unowned
            self._write_manifest(before | set(files))
        written = tuple(sorted(n for n, text in files.items() if self._write_if_changed(n, text)))
        removed: list[str] = []
        for name in sorted(before - set(files)):
            try:
                (self.directory / name).unlink()
                removed.append(name)
            except FileNotFoundError:
                pass
        if before != set(files):
            self._write_manifest(set(files))
        result = DeliveryResult(written, tuple(removed))
        if result.changed:
            log.info("delivered: target=%s written=%s removed=%s", self.target, ",".join(written) or "-",
                     ",".join(removed) or "-")
            if self.pid_file is not None:
                result = DeliveryResult(written, tuple(removed), signalled=self._signal())
        return result

    def _sweep(self, names: set[str]) -> None:
        """Remove the temporary files of ``names`` and of the manifest that a killed writer
        left (another owner's are never touched)."""
        for name in sorted(names | {self.manifest.name}):
            for stray in fsutil.remove_stray_temps(self.directory, fsutil.temp_glob(self.directory / name)):
                log.warning("removed stray temp: path=%s", stray)
        self._swept = True

    def _write_if_changed(self, name: str, text: str) -> bool:
        path = self.directory / name
        data = text.encode("utf-8")
        try:
            if path.read_bytes() == data:
                return False
        except FileNotFoundError:
            pass
        atomic_write(path, data)
        return True

    def _write_manifest(self, names: set[str]) -> None:
        atomic_write(self.manifest, (json.dumps(sorted(names)) + "\n").encode("utf-8"))

    def _signal(self) -> bool:
        assert self.pid_file is not None
        try:
            pid = int(self.pid_file.read_text(encoding="ascii").strip())
            os.kill(pid, self.sig)
        except (OSError, ValueError) as exc:
            log.warning("signal failed: pid_file=%s error=%s", self.pid_file, exc)
            return False
        log.debug("signalled: pid=%d signal=%d", pid, self.sig)
        return True


def atomic_write(path: Path, data: bytes, mode: int = FILE_MODE) -> None:
    """Write ``data`` to ``path`` crash-safely, with file mode ``mode`` (CoreDNS and dnsmasq
    read it as another user)."""
    fsutil.write_atomic(path, data, mode=mode)


# --- the CoreDNS ConfigMap --------------------------------------------------------------------


def configmap_size(data: Mapping[str, str], binary: Mapping[str, str] | None = None) -> int:
    """The size Kubernetes checks against 1 MiB: every key and value of ``data`` (UTF-8) and
    ``binaryData`` (decoded; the client hands it over base64-encoded)."""
    size = sum(len(k.encode()) + len(v.encode()) for k, v in data.items())
    for key, value in (binary or {}).items():
        size += len(key.encode()) + len(base64.b64decode(value))
    return size


def load_core_api() -> Any:
    """A CoreV1Api from in-cluster credentials, else the kubeconfig."""
    from gitdns.adapters.kube.client import load_default

    load_default("ConfigMap delivery")
    from kubernetes import client

    return client.CoreV1Api()


class ConfigMapDelivery:
    def __init__(self, namespace: str, name: str, owner: str, *, api: Any | None = None, max_attempts: int = 5,
                 sleep: Callable[[float], None] = time.sleep, timeout: float = 10.0) -> None:
        from kubernetes.client.exceptions import ApiException

        self._api_exception = ApiException
        self.api = api if api is not None else load_core_api()
        self.namespace = namespace
        self.name = name
        self.owner = owner
        self.max_attempts = max(1, max_attempts)
        self.sleep = sleep
        self.timeout = timeout
        self.annotation = OWNED_ANNOTATION.format(owner=owner)

    @property
    def target(self) -> str:
        return f"configmap:{self.namespace}/{self.name}"

    def deliver(self, files: Mapping[str, str]) -> DeliveryResult:
        check_names(files)
        for attempt in range(1, self.max_attempts + 1):
            cm = self._call("read", lambda: self.api.read_namespaced_config_map(
                self.name, self.namespace, _request_timeout=self.timeout))
            change = self._apply(cm, files)
            if change is None:
                return DeliveryResult(attempts=attempt - 1)
            written, removed = change
            try:
                self.api.replace_namespaced_config_map(self.name, self.namespace, cm, _request_timeout=self.timeout)
            except self._api_exception as exc:
                if exc.status != 409:
                    raise self._error("replace", exc) from None
                log.info("configmap conflict: target=%s attempt=%d", self.target, attempt)
                self.sleep(random.uniform(0.0, min(1.0, 0.05 * 2 ** attempt)))
                continue
            log.info("delivered: target=%s written=%s removed=%s attempt=%d", self.target,
                     ",".join(written) or "-", ",".join(removed) or "-", attempt)
            return DeliveryResult(written, removed, attempts=attempt)
        raise StaleWriteError(f"{self.target}: still changed by another writer after {self.max_attempts} "
                              "attempts (409 Conflict each time); the next change retries")

    def _apply(self, cm: Any, files: Mapping[str, str]) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
        """Change ``cm`` in place to hold ``files``; None when it already does."""
        data: dict[str, str] = dict(cm.data or {})
        meta = cm.metadata
        annotations: dict[str, str] = dict(meta.annotations or {})
        owned = {n for n in annotations.get(self.annotation, "").split(",") if n}
        written = tuple(sorted(n for n, text in files.items() if data.get(n) != text))
        removed = tuple(sorted(n for n in owned - set(files) if n in data))
        new_owned = ",".join(sorted(files))
        if not written and not removed and annotations.get(self.annotation, "") == new_owned:
            return None
        for name in written:
            data[name] = files[name]
        for name in removed:
            del data[name]
        size = configmap_size(data, cm.binary_data)
        if size > CONFIGMAP_LIMIT:
            ours = sum(len(n) + len(files[n].encode()) for n in files)
            raise ConfigMapTooLargeError(
                f"{self.target}: the result would hold {size} bytes, over the Kubernetes limit of "
                f"{CONFIGMAP_LIMIT} (1 MiB); {ours} of them are this node pool's files. Nothing was "
                "written: deliver to a shared directory (--out) instead, or split the tenants over "
                "ConfigMaps")
        if new_owned:
            annotations[self.annotation] = new_owned
        else:
            annotations.pop(self.annotation, None)
        cm.data = data
        meta.annotations = annotations
        return written, removed

    def _call(self, what: str, fn: Callable[[], Any]) -> Any:
        try:
            return fn()
        except self._api_exception as exc:
            raise self._error(what, exc) from None
        except Exception as exc:  # urllib3 connection errors and timeouts
            raise UnreachableError(f"{self.target}: {what} failed: {type(exc).__name__}: {exc}") from None

    def _error(self, what: str, exc: Any) -> Exception:
        status = getattr(exc, "status", None)
        if status == 404:
            return ConfigError(f"{self.target} does not exist: create it (kubectl -n {self.namespace} create "
                               f"configmap {self.name}); the orchestrator only gets and updates it")
        if status in (401, 403):
            return AuthError(f"{self.target}: {what} refused ({status}); the orchestrator's RBAC needs get and "
                             f"update on configmaps/{self.name} in {self.namespace}")
        if status == 422:
            return ConfigError(f"{self.target}: {what} refused as invalid (422): {getattr(exc, 'body', '')}")
        return UnreachableError(f"{self.target}: {what} failed ({status})")
