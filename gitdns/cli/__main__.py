"""``python -m gitdns.cli``: the same as the ``gitdns`` command."""

import sys

from gitdns.cli import main

sys.exit(main())
