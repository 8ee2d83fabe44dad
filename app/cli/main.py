"""The ``draftbench`` command: its commands are gathered here; failures print one line (``--debug``: the traceback)."""

import sys
from typing import Annotated

import typer

from app.cli import bisect, builds, ci, compare, noise, rederive, service, sweeps, tokens, worker
from app.cli.errors import CliError

cli = typer.Typer(
    help="draftbench: benchmark speculative decoding in vLLM across backends, CUDA-graph modes, GPUs and builds.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
_debug = False


@cli.callback()
def _root(debug: Annotated[bool, typer.Option("--debug", help="Show the full traceback of a failure")] = False) -> None:
    global _debug
    _debug = debug


for module in (service, worker, sweeps, rederive, builds, ci, compare, noise, bisect):
    module.register(cli)
cli.add_typer(tokens.token_cli, name="token")


def main() -> None:
    try:
        cli()
    except CliError as exc:
        if _debug:
            raise
        # One line, whatever the message holds (a driver's or patch's words run over several).
        print(f"draftbench: {' '.join(str(exc).split())}", file=sys.stderr)
        sys.exit(exc.code)
    except KeyboardInterrupt:
        sys.exit(130)
