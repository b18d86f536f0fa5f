"""Helpers for the default provider secret tests: the namespace, a Kuadrant AWS secret's data,
and `add_secret` (a Secret in the HTTP fake Kubernetes API, labelled as the default unless told)."""

from __future__ import annotations

import base64
from typing import Any

from tests.fakes.kube_apiserver import FakeKube

NS = "dns"
DEFAULT = {"kuadrant.io/default-provider": "true"}
AWS_DATA = {"AWS_ACCESS_KEY_ID": "AKIDEFAULTPROVIDER01", "AWS_SECRET_ACCESS_KEY": "sup3r-s3cret-value",
            "AWS_REGION": "eu-west-1"}



def add_secret(fake: FakeKube, name: str, type_: str, data: dict[str, str] | None = None, *,
               labels: dict[str, str] | None = None, annotations: dict[str, str] | None = None,
               namespace: str = NS) -> None:
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "labels": DEFAULT if labels is None else labels}
    if annotations:
        meta["annotations"] = annotations
    encoded = {k: base64.b64encode(v.encode()).decode() for k, v in (data or {}).items()}
    fake.create("", "v1", "secrets", {"metadata": meta, "type": type_, "data": encoded})
