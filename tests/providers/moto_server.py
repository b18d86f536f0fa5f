"""``moto_server`` on a free loopback port over TLS with the test CA (provider endpoints are
https only), started as a process of its own: what the Route53 end-to-end tests, the pod kit and
the soak share.  ``command`` is what serves (``moto_server`` itself, or a module that gives moto
Route53's batch semantics first); this class starts it, waits for it and stops it."""

from __future__ import annotations

import importlib.util
import os
import ssl
import subprocess
import time
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tests.e2e.dns_servers import ToolMissing, free_port, stop_process

INSTALL_HINT = "pip install moto flask flask-cors boto3  (the test extra)"


def moto_missing() -> str | None:
    """Why moto cannot run here, or None."""
    if all(importlib.util.find_spec(m) for m in ("moto", "flask", "flask_cors", "boto3")):
        return None
    return f"moto is not installed: {INSTALL_HINT}"


class MotoServer:
    def __init__(self, directory: Path, command: Sequence[str], cwd: Path | None = None,
                 pythonpath: Path | None = None, wait: float = 30) -> None:
        missing = moto_missing()
        if missing:
            raise ToolMissing(missing)
        from tests.providers.tls import loopback_tls

        self.tls = loopback_tls()
        self.port = free_port()
        directory.mkdir(parents=True, exist_ok=True)
        self.log = directory / "moto.log"
        env = {**os.environ, "PYTHONPATH": str(pythonpath)} if pythonpath else None
        with self.log.open("w") as out:
            self.proc = subprocess.Popen(
                [*command, "-H", "127.0.0.1", "-p", str(self.port), "--ssl-cert", str(self.tls.cert_file),
                 "--ssl-key", str(self.tls.key_file)],
                stdout=out, stderr=subprocess.STDOUT, cwd=cwd, env=env, start_new_session=True)
        deadline = time.monotonic() + wait
        while not self._up():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"moto did not start: {self.log.read_text()[-2000:]}")
            time.sleep(0.05)

    @property
    def endpoint(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    def _up(self) -> bool:
        try:
            context = ssl.create_default_context(cafile=str(self.tls.ca_file))
            with urllib.request.urlopen(self.endpoint + "/moto-api/", timeout=1, context=context) as resp:
                return bool(resp.status == 200)
        except OSError:
            return False

    def client(self) -> Any:
        """A boto3 Route53 client of the test (moto's default account)."""
        import boto3

        return boto3.client("route53", endpoint_url=self.endpoint, region_name="us-east-1",
                            verify=str(self.tls.ca_file), aws_access_key_id="testing",
                            aws_secret_access_key="testing")

    def stop(self) -> None:
        stop_process(self.proc)
