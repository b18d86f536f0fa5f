"""``gitdns history NAME|VALUE``: how a DNS name's desired records changed, commit by commit, who
changed them, and when each cluster applied them.

    trace.py     history() and trace(): the walk over commits, without git in trace
    walk.py      the git side (of groups log too): one fetch, a few git log calls, files at a commit
    trees.py     the YAML files of a commit below a path
    window.py    --since/--until by git's own date parser
    diff.py      the records at one revision and the changes between two
    who.py       authors, pull requests and who merged them
    applied.py   when each cluster applied a commit, and the health entries (status branches)
    held.py      whether a cluster applied a commit or holds a zone below it (as status --revision)
    status.py    the status-branch side of the walk: every status document the walk reads
    facts.py     what history keeps of each status document, by blob id
    fmt.py       text and JSON, and the command (``history_command``)

Nothing is imported here: ``gitdns --help`` stays light and each module is imported by name.
"""
