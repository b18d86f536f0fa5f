"""The `gitdns` command line: parse the arguments (`gitdns.cli.parser`), call one command
(`gitdns.commands`), print its result.  The only module that prints.

Imports are kept inside the command handlers so that `gitdns --help` starts fast and never
loads a provider SDK, jinja2, jsonschema or ruamel.yaml.
"""

from __future__ import annotations

import argparse
import difflib
import sys
from collections.abc import Callable, Sequence

from gitdns.cli.parser import build_parser, fences_of, transport_of
from gitdns.commands import EXIT_ERROR, EXIT_OK, EXIT_USAGE, Result

__all__ = ["EXIT_ERROR", "EXIT_OK", "EXIT_USAGE", "build_parser", "fences_of", "main", "transport_of"]


# --- handlers: one command each ------------------------------------------------------------------


def cmd_validate(args: argparse.Namespace) -> Result:
    from gitdns.commands.validate import validate

    return validate(args.path, args.format, probe_ranges=args.probe_allow_ranges)


def cmd_plan(args: argparse.Namespace) -> Result:
    from gitdns.commands.plan.command import plan

    return plan(args.repo, cluster=args.cluster, all_clusters=args.all_clusters, fmt=args.format,
                zones=args.zone, exit_code=args.exit_code, force=args.force, mode=args.mode, fences=fences_of(args),
                base=args.base, verbose=args.verbose)


def cmd_apply(args: argparse.Namespace) -> Result:
    from gitdns.cli.progress import progress_for
    from gitdns.commands.apply import apply

    with progress_for(args.format) as progress:
        return apply(args.repo, cluster=args.cluster, all_clusters=args.all_clusters, fmt=args.format,
                     zones=args.zone, force=args.force, dry_run=args.dry_run, verify=args.verify, mode=args.mode,
                     fences=fences_of(args), from_worktree=args.from_worktree, base=args.base, progress=progress)


def cmd_render(args: argparse.Namespace) -> Result:
    from gitdns.commands.render import render

    return render(args.repo, args.cluster, args.out, namespace=args.namespace, templates=args.templates,
                  all_zones=args.all_zones)


def cmd_zone_show(args: argparse.Namespace) -> Result:
    from gitdns.commands.zones import zone_show

    return zone_show(args.repo, args.zone, args.format, fences=fences_of(args))


def cmd_cluster_id(args: argparse.Namespace) -> Result:
    from gitdns.commands.clusters import cluster_id

    return cluster_id(args.instance or "")


def cmd_add_cluster_secret(args: argparse.Namespace) -> Result:
    from gitdns.commands.clusters import add_cluster_secret

    return add_cluster_secret(args.name, remote_context=args.remote_context, primary_context=args.primary_context,
                              kubeconfig=args.kubeconfig, remote_server=args.remote_server,
                              remote_namespace=args.remote_namespace, service_account=args.service_account,
                              cluster_secret_namespace=args.cluster_secret_namespace,
                              cluster_secret_label=args.cluster_secret_label, timeout=args.timeout,
                              dry_run=args.dry_run)


def cmd_agent(args: argparse.Namespace) -> Result:
    from gitdns.commands.daemons import run_agent

    return run_agent({k: v for k, v in vars(args).items() if k not in ("command", "version")})


def cmd_orchestrator(args: argparse.Namespace) -> Result:
    from gitdns.commands.orchestrate import run_orchestrator

    flags = {k: v for k, v in vars(args).items() if k not in ("command", "version")}
    return run_orchestrator(flags, auth=transport_of(args))


def cmd_lease_name(args: argparse.Namespace) -> Result:
    from gitdns.commands.orchestrate import lease_name

    return lease_name(node_pool=args.node_pool, cluster=args.cluster)


def cmd_owners(args: argparse.Namespace) -> Result:
    from gitdns.commands.owners import owners

    return owners(args.repo, args.zone, args.format, fences=fences_of(args))


def _ask(shown: str, question: str) -> bool:
    from gitdns.core.text import block

    print(block(shown), end="")
    return input(question).strip().lower() in ("y", "yes")


def cmd_prune_owner(args: argparse.Namespace) -> Result:
    from gitdns.commands.owners import prune_owner

    return prune_owner(args.repo, args.owner, args.zone, force=args.force, ask=None if args.yes else _ask,
                       fences=fences_of(args), from_worktree=args.from_worktree)


def cmd_adopt(args: argparse.Namespace) -> Result:
    from gitdns.commands.owners import adopt

    if bool(args.names) == args.every:
        return Result(EXIT_USAGE, err=["adopt: give the record names to adopt, or --all (not both)"])
    return adopt(args.repo, None if args.every else args.names, args.zone, args.cluster, rtype=args.rtype,
                 force=args.force, fences=fences_of(args), from_worktree=args.from_worktree)


def cmd_status(args: argparse.Namespace) -> Result:
    from gitdns.commands.status.command import status

    return status(args.repo, cluster=args.cluster, branch=args.branch, fmt=args.format, state_dir=args.state_dir,
                  auth=transport_of(args), revision=args.revision)


def cmd_history(args: argparse.Namespace) -> Result:
    from gitdns.cli.progress import progress_for
    from gitdns.commands.history.fmt import history_command

    with progress_for(args.format) as progress:
        return history_command(args.name, args.repo, branch=args.branch, path=args.path,
                               max_commits=args.max_commits, state_dir=args.state_dir, fmt=args.format,
                               auth=transport_of(args), since=args.since, until=args.until, progress=progress)


def cmd_groups(args: argparse.Namespace) -> Result:
    from gitdns.commands.groups.verbs import Request, run

    if args.groups_command == "log":
        from gitdns.commands.groups.log.fmt import log_command

        return log_command(args.zone, args.repo, branch=args.branch, path=args.path, state_dir=args.state_dir,
                           fmt=args.format, auth=transport_of(args))
    opts = {k: v for k, v in vars(args).items() if k in Request.__dataclass_fields__}
    req = Request(action=args.groups_command, zone=args.zone, groups=tuple(getattr(args, "groups", ())),
                  provider_settings=tuple(getattr(args, "provider_setting", ())), auth=transport_of(args),
                  fences=fences_of(args), **{k: v for k, v in opts.items() if k not in ("zone", "groups", "auth")})
    return run(req)


def cmd_import(args: argparse.Namespace) -> Result:
    from gitdns.cli.progress import progress_for
    from gitdns.commands.importzone import Request, import_zone

    with progress_for(args.format) as progress:
        return import_zone(Request(zone=args.zone, source=args.source, repo=args.repo, out=args.out,
                                   split=args.split, name=args.name, force=args.force, fmt=args.format),
                           fences=fences_of(args), step=progress.step)


def cmd_completion(args: argparse.Namespace) -> Result:
    from gitdns.commands.completion import completion

    return completion(build_parser(), args.shell)


def cmd_failover(args: argparse.Namespace) -> Result:
    from gitdns.commands.failover import simulate

    return simulate(args.repo, args.zone, tuple(args.to), args.format, fences=fences_of(args), base=args.base)


HANDLERS: dict[str, Callable[[argparse.Namespace], Result]] = {
    "validate": cmd_validate,
    "plan": cmd_plan,
    "apply": cmd_apply,
    "render": cmd_render,
    "zone": cmd_zone_show,
    "cluster-id": cmd_cluster_id,
    "add-cluster-secret": cmd_add_cluster_secret,
    "agent": cmd_agent,
    "orchestrator": cmd_orchestrator,
    "lease-name": cmd_lease_name,
    "owners": cmd_owners,
    "prune-owner": cmd_prune_owner,
    "adopt": cmd_adopt,
    "status": cmd_status,
    "history": cmd_history,
    "groups": cmd_groups,
    "failover": cmd_failover,
    "import": cmd_import,
    "completion": cmd_completion,
}


# --- printing ------------------------------------------------------------------------------------


def _err(message: str) -> None:
    """One line on stderr, through the text gate (`gitdns.core.text.inline`)."""
    from gitdns.core.text import inline

    print(f"gitdns: {inline(message)}", file=sys.stderr)


def _print(result: Result) -> int:
    """A command's result through the text gate: each error line with `inline`, the output with
    `block` (its own lines kept, every other control, format or bidi character escaped), so no
    escape sequence from a repository, a status branch or a commit reaches the terminal."""
    from gitdns.core.text import block

    for line in result.err:
        _err(line)
    for text in result.out:
        print(block(text), end="")
    return result.code


DAEMONS = ("agent", "orchestrator")  # they set up their own logging (--log-level)
LOG_LEVEL_ENV = "GITDNS_LOG_LEVEL"


def _one_shot_logging() -> None:
    """A one-shot command reports through its output and its errors; its modules' log lines
    (the same failures, in key=value form) show only at GITDNS_LOG_LEVEL (default: error)."""
    import logging
    import os

    from gitdns.adapters import logs

    if logging.getLogger().handlers:  # the embedding program (or a test harness) decides
        return
    level = os.environ.get(LOG_LEVEL_ENV, "error").upper()
    if level not in ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"):
        level = "ERROR"
    logs.install(logs.handler("text", "gitdns: log: %(levelname)s %(name)s: %(message)s"), level)


_FORMATS = ("json", "text", "markdown")  # --json: the verb's --format json


def _verb_parser(parser: argparse.ArgumentParser, argv: Sequence[str]) -> argparse.ArgumentParser:
    """The parser of the (sub)verb ``argv`` names: ``status``, ``groups set``, ..."""
    current = parser
    for token in argv:
        subs = next((a for a in current._actions if isinstance(a, argparse._SubParsersAction)), None)
        if subs is None:
            break
        if not token.startswith("-") and token in subs.choices:
            current = subs.choices[token]
    return current


def _parse(parser: argparse.ArgumentParser, argv: Sequence[str] | None) -> argparse.Namespace:
    """Parse; an unknown flag is reported by its verb's parser (its usage line, not the top
    level's) with the flags it may have meant."""
    args, extras = parser.parse_known_args(argv)
    if extras:
        verb = _verb_parser(parser, list(sys.argv[1:] if argv is None else argv))
        flags = [o for a in verb._actions for o in a.option_strings if o.startswith("--")]
        meant = sorted({m for e in extras if e.startswith("--")
                        for m in ([f"--format {e[2:]}"] if e[2:] in _FORMATS and "--format" in flags else
                                  difflib.get_close_matches(e.split("=", 1)[0], flags, n=1, cutoff=0.75))})
        verb.error(f"unrecognized arguments: {' '.join(extras)}"
                   + (f" (did you mean {', '.join(meant)}?)" if meant else ""))
    return args


# A one-shot verb builds its objects once and keeps most of them to the end: with the cyclic
# collector's default thresholds (a young collection every 700 allocations, the whole heap every
# ~70,000) a 10,000-record `gitdns apply` spent a quarter of its CPU walking objects that all live
# to the end.  Collections still run, about 30 times less often.
ONE_SHOT_GC = (20_000, 20, 20)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = _parse(parser, argv)
    if args.version:
        from gitdns import __version__

        print(f"gitdns {__version__}")
        return EXIT_OK
    if args.command is None:
        parser.print_help()
        return EXIT_USAGE
    del parser  # some 0.4 MiB of argparse objects that a daemon's whole run would otherwise hold
    import gc

    from gitdns.errors import GitdnsError

    thresholds = gc.get_threshold()
    if args.command not in DAEMONS:
        _one_shot_logging()
        gc.set_threshold(*ONE_SHOT_GC)
    try:
        return _print(HANDLERS[args.command](args))
    except GitdnsError as exc:
        _err(f"{exc} (reason: {exc.reason})")
        return EXIT_ERROR
    except KeyboardInterrupt:
        _err("interrupted")
        return 130
    except BrokenPipeError:  # output piped into `head` and the like
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
    finally:
        gc.set_threshold(*thresholds)  # as it was (a caller in the same process: the tests)
