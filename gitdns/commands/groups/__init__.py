"""``gitdns groups get|add|remove|set|reconcile|log``: active failover groups (docs/failover.md).

    verbs.py     the verbs: Request, run; a change is a pull request (or --direct)
    file.py      the ActiveGroups file: edit in place, new file, its problems
    check.py     group names and sets: the checks every verb shares
    health.py    whether the groups a change activates have a healthy endpoint
    status.py    what the clusters' status branches say (for the verbs and failover simulate)
    fetch.py     origin's desired branch fetched before judging; a free branch name for a change
    direct.py    the break-glass write when git is unreachable
    view.py      get's answer: git's ActiveGroups, the zone's TXT, whether they diverge
    log/         ``groups log``: the switches of a zone and when each cluster applied them
                 (its ``__init__``), with ``fmt``: its text and JSON, and the command

Nothing is imported here: ``gitdns --help`` stays light and each module is imported by name.
"""
