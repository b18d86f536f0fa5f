"""moto_server single-threaded under cProfile (``bench_route53_octodns.py --profile-moto``).

    python bench/moto_profiled.py OUT.prof -H 127.0.0.1 -p PORT

The same Werkzeug application ``python -m moto.server`` serves, in one thread so that the
profile sees every request (moto's threaded server handles each in a thread of its own, which
cProfile does not follow).  SIGTERM or SIGINT ends it and writes the profile to OUT.prof.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import signal
import sys
from typing import NoReturn


def _stop(*_: object) -> NoReturn:
    raise KeyboardInterrupt


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("-H", "--host", default="127.0.0.1")
    ap.add_argument("-p", "--port", type=int, required=True)
    args = ap.parse_args(argv)
    os.environ.setdefault("MOTO_PORT", str(args.port))
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app
    from werkzeug.serving import run_simple

    app = DomainDispatcherApplication(create_backend_app)
    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    prof = cProfile.Profile()
    prof.enable()
    try:
        run_simple(args.host, args.port, app, threaded=False, use_reloader=False)
    except KeyboardInterrupt:
        pass
    finally:
        prof.disable()
        prof.dump_stats(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
