"""The gitdns error tree.

    GitdnsError                      every error gitdns raises on purpose; has ``reason``
    ├── PermanentError               retrying will not help: fix input or configuration
    │   ├── ConfigError              bad flags, settings, or an unknown provider
    │   ├── ValidationError          the desired state does not validate (carries problems)
    │   ├── AuthError                credentials refused (messages never carry secrets)
    │   └── UnsupportedError         a provider cannot do what is asked
    └── RetryableError               try again later, with backoff
        ├── UnreachableError         a zone, remote or API cannot be reached
        │   └── TimedOutError        it did not answer in time (the request may have taken effect)
        ├── ThrottledError           the service asked us to slow down (``retry_after``)
        └── StaleWriteError          a compare-and-swap was refused: re-read and re-plan

``reason`` is a CamelCase word from a closed set (docs/architecture.md, docs/records.md).
"""

from __future__ import annotations


class GitdnsError(Exception):
    reason = "Error"

    def __init__(self, message: str, *, reason: str | None = None) -> None:
        super().__init__(message)
        if reason is not None:
            self.reason = reason


class PermanentError(GitdnsError):
    reason = "PermanentError"


class ConfigError(PermanentError):
    reason = "InvalidConfiguration"


class ValidationError(PermanentError):
    reason = "ValidationFailed"

    def __init__(self, message: str, problems: list[object] | None = None) -> None:
        super().__init__(message)
        self.problems = list(problems or [])


class AuthError(PermanentError):
    reason = "AuthenticationFailed"


class UnsupportedError(PermanentError):
    reason = "Unsupported"


class RetryableError(GitdnsError):
    reason = "Retrying"


class UnreachableError(RetryableError):
    reason = "Unreachable"


class TimedOutError(UnreachableError):
    """The call was sent and no answer came in time: whether it took effect is unknown (the
    next read says).  Its reason stays ``Unreachable``; the agent's metrics tell it apart as
    the provider fault kind ``timeout``."""


class ThrottledError(RetryableError):
    reason = "Throttled"

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class StaleWriteError(RetryableError):
    reason = "StaleWrite"
