"""A failed git transport keeps its cause: ssh's and curl's own messages, classified."""

from __future__ import annotations

import pytest

from gitdns.adapters.git.errors import classify, diagnosis, git_error
from gitdns.core.conditions import REASONS
from gitdns.errors import AuthError, PermanentError, UnreachableError

CHANGED = """@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@
@    WARNING: REMOTE HOST IDENTIFICATION HAS CHANGED!     @
@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@
IT IS POSSIBLE THAT SOMEONE IS DOING SOMETHING NASTY!
Someone could be eavesdropping on you right now (man-in-the-middle attack)!
It is also possible that a host key has just been changed.
The fingerprint for the ED25519 key sent by the remote host is
SHA256:Vt9ozEJfqvEgwkS3mjkChZhzTigxmBHKnCSbx4Mk8d8.
Please contact your system administrator.
Add correct host key in /keys/known_hosts to get rid of this message.
Offending ED25519 key in /keys/known_hosts:1
Host key for [127.0.0.1]:40123 has changed and you have requested strict checking.
Host key verification failed.
fatal: Could not read from remote repository.

Please make sure you have the correct access rights
and the repository exists.
"""
UNKNOWN = """No ED25519 host key is known for [127.0.0.1]:40123 and you have requested strict checking.
Host key verification failed.
fatal: Could not read from remote repository.
"""
PERMS = """@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@
@         WARNING: UNPROTECTED PRIVATE KEY FILE!          @
@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@
Permissions 0644 for '/keys/id' are too open.
It is required that your private key files are NOT accessible by others.
This private key will be ignored.
Load key "/keys/id": bad permissions
git@127.0.0.1: Permission denied (publickey).
fatal: Could not read from remote repository.
"""
MISSING = """Warning: Identity file /keys/id not accessible: No such file or directory.
git@127.0.0.1: Permission denied (publickey).
fatal: Could not read from remote repository.
"""
REFUSED_KEY = "git@127.0.0.1: Permission denied (publickey).\nfatal: Could not read from remote repository.\n"
NO_REPO = ("fatal: '/srv/git/nope.git' does not appear to be a git repository\n"
           "fatal: Could not read from remote repository.\n")
HTTP_404 = "fatal: repository 'https://127.0.0.1:8443/nope.git/' not found\n"
HTTP_401 = "fatal: Authentication failed for 'https://127.0.0.1:8443/dns.git/'\n"
NO_USERNAME = "fatal: could not read Username for 'https://127.0.0.1:8443': terminal prompts disabled\n"
TLS = ("fatal: unable to access 'https://127.0.0.1:8443/dns.git/': server certificate verification failed. "
       "CAfile: /etc/ssl/certs/ca-certificates.crt CRLfile: none\n")
HOOK = """remote: no pushes here
To ssh://127.0.0.1:40123/srv/dns.git
 ! [remote rejected] abc -> gitdns-status/x (pre-receive hook declined)
error: failed to push some refs to 'ssh://127.0.0.1:40123/srv/dns.git'
"""
DOWN = "ssh: connect to host 127.0.0.1 port 40123: Connection refused\nfatal: Could not read from remote repository.\n"
# sshd (OpenSSH 9.2, MaxStartups) turning a connection away before the key exchange, as git
# ls-remote printed it when twenty agents connected at once (tests/e2e/test_status_fleet_push.py)
CLOSING = """\
Please make sure you have the correct access rights
and the repository exists.
"""
KEX_RESET = ("kex_exchange_identification: read: Connection reset by peer\n"
             "Connection reset by 127.0.0.1 port 35239\n"
             "fatal: Could not read from remote repository.\n\n" + CLOSING)
KEX_CLOSED = ("kex_exchange_identification: Connection closed by remote host\n"
              "Connection closed by 127.0.0.1 port 35239\n"
              "fatal: Could not read from remote repository.\n\n" + CLOSING)
# the same refusal in the wording of OpenSSH before 8.2
FATAL = "fatal: Could not read from remote repository.\n"
OLD_RESET = "ssh_exchange_identification: read: Connection reset by peer\n" + FATAL
OLD_CLOSED = "ssh_exchange_identification: Connection closed by remote host\n" + FATAL


@pytest.mark.parametrize(("stderr", "reason"), [
    (CHANGED, "HostKeyMismatch"), (UNKNOWN, "HostKeyUnknown"), (PERMS, "KeyPermissions"),
    (MISSING, "KeyMissing"), (REFUSED_KEY, "AuthenticationFailed"), (NO_REPO, "RepositoryNotFound"),
    (HTTP_404, "RepositoryNotFound"), (HTTP_401, "AuthenticationFailed"), (NO_USERNAME, "AuthenticationFailed"),
    (TLS, "TLSVerificationFailed"), (HOOK, "PushDeclined"), (DOWN, "GitUnreachable"),
    (KEX_RESET, "GitConnectionRefused"), (KEX_CLOSED, "GitConnectionRefused"),
    (OLD_RESET, "GitConnectionRefused"), (OLD_CLOSED, "GitConnectionRefused"),
])
def test_each_cause_has_its_reason(stderr: str, reason: str) -> None:
    assert classify(stderr) == reason
    assert reason in REASONS  # a reason from the closed set conditions carry


def test_the_message_keeps_ssh_diagnosis_and_the_offered_fingerprint() -> None:
    err = git_error("ls-remote", "ssh://git@127.0.0.1:40123/srv/dns.git", CHANGED)
    assert isinstance(err, AuthError) and err.reason == "HostKeyMismatch"
    text = str(err)
    assert "Host key for [127.0.0.1]:40123 has changed" in text
    assert "the server offered SHA256:Vt9ozEJfqvEgwkS3mjkChZhzTigxmBHKnCSbx4Mk8d8" in text
    assert "Could not read from remote repository" not in text  # git's generic closing line is dropped
    assert "fix:" in text and "git@" not in text  # URL userinfo redacted


def test_error_types_follow_the_cause() -> None:
    assert isinstance(git_error("push", "ssh://h/r", HOOK), PermanentError)
    assert git_error("push", "ssh://h/r", HOOK).reason == "PushDeclined"
    gone = git_error("fetch", "file:///srv/dns.git", NO_REPO)
    assert isinstance(gone, UnreachableError) and gone.reason == "RepositoryNotFound"
    down = git_error("fetch", "ssh://h/r", DOWN)
    assert isinstance(down, UnreachableError) and "Connection refused" in str(down)
    perms = git_error("fetch", "ssh://h/r", PERMS)
    assert "Permissions 0644 for '/keys/id' are too open" in str(perms) and "chmod 600" in str(perms)


def test_secrets_never_reach_the_message() -> None:
    stderr = "fatal: unable to access 'https://x-token:s3cret-token@127.0.0.1/dns.git/': returned error: 403\n"
    text = diagnosis(stderr, ("s3cret-token",))
    assert "s3cret-token" not in text and "x-token" not in text


def test_a_connection_turned_away_before_the_key_exchange_is_transient_and_says_so() -> None:
    for stderr in (KEX_RESET, KEX_CLOSED):
        err = git_error("ls-remote", "ssh://git@127.0.0.1:35239/srv/dns.git", stderr)
        assert isinstance(err, UnreachableError) and err.reason == "GitConnectionRefused"
        assert "kex_exchange_identification" in str(err) and "MaxStartups" in str(err)
    # a closed port is not the server turning us away: it stays GitUnreachable
    assert git_error("fetch", "ssh://h/r", DOWN).reason == "GitUnreachable"


@pytest.mark.parametrize("stderr", [
    "ERROR: The key you are authenticating with has been marked as read only.\nfatal: Could not read from remote "
    "repository.",  # GitHub, a read-only deploy key
    "remote: GitLab: This deploy key does not have write access to this project.\nfatal: Could not read from "
    "remote repository.",  # GitLab
    "remote: GitLab: You are not allowed to push code to this project.\n",
    "read-only deploy key: 'git-receive-pack '/srv/dns.git'' refused\nfatal: Could not read from remote repository.",
])
def test_a_key_that_may_not_write_is_a_declined_push_not_an_outage(stderr: str) -> None:
    assert classify(stderr) == "PushDeclined"
    error = git_error("push", "ssh://git@git.example.test/dns.git", stderr)
    assert isinstance(error, PermanentError) and not isinstance(error, UnreachableError)
    assert "write access" in str(error)


def test_an_authentication_failure_names_the_https_user_name_setting() -> None:
    error = git_error("fetch", "https://git.example.test/dns.git", "fatal: Authentication failed for 'x'")
    assert error.reason == "AuthenticationFailed" and "--git-username" in str(error)
