"""``spigap`` command line: one module per subcommand, each with ``add_subparser``.

Every module in this package that defines ``add_subparser(subparsers)`` is a
subcommand; ``ORDER`` (an int, default 100) places it in ``--help``. Helper
modules (``common``) define no ``add_subparser``. Shared option groups live in
``common`` (one definition each, docs/cli.md); a subcommand never imports another.

Subcommand modules must import heavy libraries (scipy, matplotlib, dask)
inside their functions, not at module level: every ``spigap`` run imports all
of them to build the parser, and start-up time counts in the benchmarks.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys

from spigap.cli import runtime

runtime.before_imports()

from spigap import __version__  # noqa: E402  (after runtime.before_imports)
from spigap.cli.common import Parser  # noqa: E402
from spigap.errors import SpigapError  # noqa: E402


class _Version(argparse.Action):
    """--version: the version and which engine this installation runs (the
    compiled core is imported only when asked)."""

    def __call__(self, parser, namespace, values, option_string=None):
        from spigap import native

        print(f"spigap {__version__} ({native.engine()} engine: {native.status()})")
        parser.exit()


def subcommand_modules(only: str | None = None):
    """Subcommand modules (all of them, or just ``only`` when it names one: a
    run of one subcommand does not pay for importing the others)."""
    names = [info.name for info in pkgutil.iter_modules(__path__)]
    if only in names:
        names = [only]
    mods = []
    for name in names:
        mod = importlib.import_module(f"{__name__}.{name}")
        if hasattr(mod, "add_subparser"):
            mods.append(mod)
    return sorted(mods, key=lambda m: (getattr(m, "ORDER", 100), m.__name__))


def build_parser(argv=None) -> argparse.ArgumentParser:
    parser = Parser(
        prog="spigap",
        description="Where the microseconds go on an SPI bus: per-transfer timing from logic "
                    "captures (CS setup/hold, inter-byte, cs_change, context switch).")
    parser.add_argument("--version", action=_Version, nargs=0,
                        help="print the version and the engine in use (compiled core or numpy), then exit")
    parser.add_argument("--debug", action="store_true", help="show tracebacks")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    command = next((a for a in (argv or []) if not a.startswith("-")), None)
    for mod in subcommand_modules(command):
        mod.add_subparser(sub)
    # parse() suggests from them when a command or option is misspelt
    parser.subcommands = sub.choices  # type: ignore[attr-defined]
    return parser


def _closest(word: str, candidates) -> str:
    """' (did you mean X?)' for the candidate nearest a misspelt word, or ''."""
    import difflib      # only on a usage error: not on every run's start-up

    near = difflib.get_close_matches(word, list(candidates), n=1, cutoff=0.75)
    return f" (did you mean {near[0]}?)" if near else ""


def parse(parser: argparse.ArgumentParser, argv: list[str]) -> argparse.Namespace:
    """parse_args, with a suggestion for a misspelt command or option and the
    subcommand's own --help named (argparse names only the top level)."""
    command = next((a for a in argv if not a.startswith("-")), None)
    subcommands = getattr(parser, "subcommands", {})
    if command is not None and command not in subcommands and (hint := _closest(command, subcommands)):
        parser.error(f"unknown command {command!r}{hint}")
    args, extras = parser.parse_known_args(argv)
    if "--debug" in extras:
        # the top-level flag after the command (spigap analyze x.sr --debug), where a user adds it
        # when an error says "run again with --debug": the same flag, not an unknown option
        extras = [e for e in extras if e != "--debug"]
        args.debug = True
    if extras:
        sub = subcommands.get(args.command, parser)
        options = {o for a in sub._actions for o in a.option_strings}
        option = next((e for e in extras if e.startswith("-") and e not in ("-", "--")), None)
        if option is not None:
            name = option.split("=", 1)[0]
            sub.error(f"unrecognized option {name}{_closest(name, options)}")
        sub.error(f"unrecognized arguments: {' '.join(extras)}")
    return args


def main(argv=None) -> int:
    """Run one command: the process's own command line (``argv`` None: the console script,
    ``python -m spigap``), which tunes the process for it (cli/runtime.after_imports), or
    ``argv`` from a caller's Python, whose process is its own: its allocator and garbage
    collector stay as they are (gc.freeze there would keep every object then alive, the
    cyclic garbage of earlier work too, for the rest of that process)."""
    own_process = argv is None
    if argv is None:
        argv = sys.argv[1:]
    parser = build_parser(argv)
    try:
        args = parse(parser, argv)
    except SystemExit as e:         # --help, --version, a usage error (already printed)
        return e.code if isinstance(e.code, int) else 2
    if own_process:
        runtime.after_imports()
    from spigap import infile, outfile, stopping
    from spigap.cli import guard
    from spigap.errors import printable

    try:
        # control characters escaped, write errors one line; SIGTERM/SIGHUP unwind like Ctrl-C;
        # every input noted, so that no output replaces one (infile.py, outfile.py)
        with outfile.std_streams(), stopping.stop_on_signals(), runtime.one_line_warnings(), \
                infile.command_inputs():
            guard.check(args)           # no output is one of the inputs: before any work
            return int(args.func(args) or 0)
    except SpigapError as e:
        if args.debug:
            raise
        _say(f"spigap: error: {printable(str(e))}")
        return 2
    except stopping.Stopped as e:
        _say(f"spigap: stopped by {e.name}")
        return 128 + e.signum
    except KeyboardInterrupt:
        _say("spigap: interrupted")
        return 130
    except BrokenPipeError:              # spigap ... | head: the reader has all it wants
        outfile.quiet_broken_pipe()
        return 0
    except Exception as e:  # a bug: say so in one line, keep the traceback for --debug
        if args.debug:
            raise
        _say(f"spigap: internal error: {type(e).__name__}: {printable(str(e))} "
             "(run again with --debug for the traceback and please report it)")
        return 3


def _say(line: str) -> None:
    """The one line of an error on standard error (which may itself be unwritable)."""
    try:
        print(line, file=sys.stderr, flush=True)
    except (OSError, ValueError):
        pass
