"""What a failed git command tells, kept: ssh's and curl's own diagnosis, classified.

git prints its transport's messages before its own last line ("fatal: Could not read from
remote repository."), which says nothing.  `classify` reads the whole stderr and returns the
reason (one of the closed set, docs/agent.md lists each with its fix) and the lines that matter,
with secrets and URL userinfo taken out.

    reason                 cause                                                  error type
    HostKeyMismatch        the server's host key is not the one pinned (the key   AuthError
                           it offered is named by its fingerprint)
    HostKeyUnknown         no key pinned for this host in known_hosts             AuthError
    KeyPermissions         the private key file is readable by others             AuthError
    KeyMissing             the private key file does not exist or cannot be read  AuthError
    AuthenticationFailed   the server refused the key or the token                AuthError
    RepositoryNotFound     no such repository on the server (or no access to it)  UnreachableError
    TLSVerificationFailed  the HTTPS certificate does not verify (a private CA    AuthError
                           needs --ca-file)
    PushDeclined           the server refused the push (a hook, a protected       PermanentError
                           branch, a read-only key)
    GitConnectionRefused   the SSH server closed the connection before the key    UnreachableError
                           exchange (sshd's MaxStartups drops unauthenticated
                           connections beyond its limit): transient, retried at
                           once with backoff (`gitdns.adapters.status.cache`)
    GitUnreachable         anything else: DNS, connection refused, timeouts       UnreachableError
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from gitdns.adapters.git.auth import redact
from gitdns.errors import AuthError, GitdnsError, PermanentError, UnreachableError

# (reason, pattern in stderr, lowercase), first match wins: the most specific first
_RULES: tuple[tuple[str, str], ...] = (
    ("HostKeyMismatch", "remote host identification has changed"),
    ("HostKeyUnknown", "host key is known for"),
    ("HostKeyMismatch", "host key verification failed"),
    ("KeyPermissions", "unprotected private key file"),
    ("KeyPermissions", "bad permissions"),
    ("KeyMissing", "identity file"),
    ("KeyMissing", "no such identity"),
    ("TLSVerificationFailed", "server certificate verification failed"),
    ("TLSVerificationFailed", "ssl certificate problem"),
    ("TLSVerificationFailed", "unable to get local issuer certificate"),
    ("RepositoryNotFound", "repository not found"),
    ("RepositoryNotFound", "does not appear to be a git repository"),
    ("RepositoryNotFound", "not found"),
    ("PushDeclined", "pre-receive hook declined"),
    ("PushDeclined", "[remote rejected]"),
    ("PushDeclined", "protected branch"),
    # a key or token that may read but not write (GitHub, GitLab, a forced-command key)
    ("PushDeclined", "marked as read only"),
    ("PushDeclined", "does not have write access"),
    ("PushDeclined", "not allowed to push"),
    ("PushDeclined", "read-only deploy key"),
    ("AuthenticationFailed", "permission denied"),
    ("AuthenticationFailed", "authentication failed"),
    ("AuthenticationFailed", "could not read username"),
    ("AuthenticationFailed", "could not read password"),
    ("AuthenticationFailed", "returned error: 403"),
    ("AuthenticationFailed", "returned error: 401"),
    # the server dropped the connection before its banner: nothing was sent, nothing was checked
    # ("kex_..." since OpenSSH 8.2, "ssh_..." before)
    ("GitConnectionRefused", "_exchange_identification: connection closed by remote host"),
    ("GitConnectionRefused", "_exchange_identification: read: connection reset by peer"),
    ("GitConnectionRefused", "_exchange_identification: write: connection reset by peer"),
    ("GitConnectionRefused", "_exchange_identification: write: broken pipe"),
)
_FINGERPRINT = re.compile(r"SHA256:[A-Za-z0-9+/=]{20,}")
_NOISE = ("fatal: could not read from remote repository", "please make sure you have the correct access",
          "and the repository exists", "@@@@@", "it is also possible", "someone could be eavesdropping")
FIXES = {
    "HostKeyMismatch": "check the server's key; if it really changed, pin the new one in the known_hosts file",
    "HostKeyUnknown": "pin the server's host key in the known_hosts file (ssh-keyscan, checked out of band)",
    "KeyPermissions": "make the private key readable by its owner only (chmod 600; a Secret: defaultMode 0400)",
    "KeyMissing": "give --ssh-key the path of the mounted private key",
    "AuthenticationFailed": "check that the deploy key or token is registered and has access to the repository; "
                            "over HTTPS the user name sent with the token is --git-username (default git)",
    "RepositoryNotFound": "check the repository URL, and that the key or token can see the repository",
    "TLSVerificationFailed": "give --ca-file the CA bundle that signed the server's certificate",
    "PushDeclined": "the push needs a key or token with write access, and no hook or branch protection refusing "
                    "the branch (gitdns-status/* for the agent, gitdns/groups-* for groups --push)",
    "GitConnectionRefused": "the SSH server turned the connection away before the key exchange (sshd's "
                            "MaxStartups or a per-source penalty); if it recurs, size MaxStartups for the fleet "
                            "(docs/agent.md, 'Many agents, one SSH server')",
}


def classify(stderr: str) -> str:
    """The reason a git transport failed (see the module docstring)."""
    text = stderr.lower()
    return next((reason for reason, pattern in _RULES if pattern in text), "GitUnreachable")


def diagnosis(stderr: str, secrets: Sequence[str] = ()) -> str:
    """The lines of ``stderr`` that say what went wrong, without git's generic closing lines."""
    lines = [line.strip() for line in stderr.splitlines()]
    keep = [line for line in lines if line and not any(n in line.lower() for n in _NOISE)]
    text = " ".join(keep) or " ".join(line for line in lines if line)
    return redact(text if len(text) <= 600 else "..." + text[-600:], tuple(secrets))


def git_error(op: str, url: str, stderr: str, secrets: Sequence[str] = ()) -> GitdnsError:
    """The error for a failed remote git operation, with its cause and the fix."""
    reason = classify(stderr)
    fingerprint = _FINGERPRINT.search(stderr)
    offered = f"; the server offered {fingerprint.group(0)}" if fingerprint and reason.startswith("HostKey") else ""
    fix = FIXES.get(reason)
    message = (f"git {op} {redact(url)}: {diagnosis(stderr, secrets)}{offered}"
               + (f" (fix: {fix})" if fix else ""))
    if reason in ("GitUnreachable", "RepositoryNotFound", "GitConnectionRefused"):  # retried: it may come back
        return UnreachableError(message, reason=reason)
    if reason == "PushDeclined":
        return PermanentError(message, reason=reason)
    return AuthError(message, reason=reason)
