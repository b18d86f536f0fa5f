"""The git side of the adapters: transport and credentials, caches, revisions, sources, signatures.

    auth.py      Credentials for the git source, kept out of URLs, argv, git config, logs and errors
    cache.py     The bare cache of a git source (`gitdns.adapters.git.source`) and the git commands ...
    errors.py    What a failed git command tells, kept: ssh's and curl's own diagnosis, classified
    rev.py       The desired revision of a work tree: commit time, sha and trailers of HEAD
    source.py    The agent's git source: a shallow bare cache of one branch, read without a checkout
    verify.py    Commit signature verification for the git source

Nothing is imported here: each module is imported by name, so that importing one part
(a pure conversion, a listing) does not bring the rest or its SDK.
"""
