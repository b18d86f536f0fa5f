"""Status branches: publishing, reading, caching and their refs (docs/agent.md).

    branch.py    Status branches: one per cluster, ``gitdns-status/<cluster-id>`` (docs/agent.md, ...
    cache.py     The status branches' cache repository and the git commands run in it
    objects.py   Git objects of the status branches, read and written through the cache
    refs.py      The status branches (and the desired branch) a local repository already holds: ...

Nothing is imported here: each module is imported by name, so that importing one part
(a pure conversion, a listing) does not bring the rest or its SDK.
"""
