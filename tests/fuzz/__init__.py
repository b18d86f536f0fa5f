"""Bad input fuzzing (issue 30, item 4): mutated and generated desired-state documents through
`gitdns validate` and an agent cycle, malformed ownership TXT through the registry reader, the
planner and an agent cycle.  The kit here is shared by the tests in this directory and
bench/fuzz.py (the full run)."""
