"""``gitdns status``: the fleet's status branches, aggregated.

    command.py   `gitdns status`: the fleet's status branches, aggregated, with each cluster's ...
    log.py       `gitdns status`: the history behind the tips — every status branch's commits and ...
    revision.py  Where one desired commit stands across the fleet: ``gitdns status --revision``
    view.py      `gitdns status`: every cluster's status branch, aggregated (docs/agent.md)

Nothing is imported here: each module is imported by name, so that importing one part
(a pure conversion, a listing) does not bring the rest or its SDK.
"""
