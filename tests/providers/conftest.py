"""The provider tests' fakes serve HTTPS (provider endpoints must be HTTPS): the SDKs trust the
test CA of `tests.providers.tls` through the variables they read (``REQUESTS_CA_BUNDLE`` for
google-auth and azure-core, ``AWS_CA_BUNDLE`` for botocore)."""

from __future__ import annotations

import pytest

from tests.providers.tls import loopback_tls


@pytest.fixture(autouse=True)
def _trust_the_test_ca(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in loopback_tls().env().items():
        monkeypatch.setenv(name, value)
