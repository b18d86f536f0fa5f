"""``gitdns plan``: what ``apply`` would change, and the pull-request preview.

    base.py      What a preview runs on (`gitdns plan`, `apply --dry-run`, `failover simulate`): ...
    command.py   ``gitdns plan``: what ``apply`` would change, nothing written
    review.py    The reviewer's part of ``gitdns plan --all-clusters`` (`gitdns.core.prpreview`): ...

Nothing is imported here: each module is imported by name, so that importing one part
(a pure conversion, a listing) does not bring the rest or its SDK.
"""
