"""The ``draftbench`` command: its commands are gathered here; failures print one line (``--debug``: the traceback)."""

import sys
from typing import Annotated

import typer
from typer import _click  # the click typer vendors: its usage errors are what a mistyped command raises

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
        # Not standalone: a usage error comes back here to be printed as one line, not in a box of several.
        code = cli(standalone_mode=False)
    except CliError as exc:
        if _debug:
            raise
        _fail(str(exc), exc.code)
    except _click.exceptions.NoArgsIsHelpError as exc:
        sys.exit(exc.exit_code)  # the help is printed already
    except _click.exceptions.UsageError as exc:
        command = exc.ctx.command_path if exc.ctx else "draftbench"
        _fail(f"{exc.format_message().rstrip('.')}. See '{command} --help'.", exc.exit_code)
    except _click.exceptions.ClickException as exc:
        _fail(exc.format_message(), exc.exit_code)
    except (KeyboardInterrupt, _click.exceptions.Abort):
        sys.exit(130)
    # A command's own typer.Exit(code) comes back as that code.
    sys.exit(code if isinstance(code, int) else 0)


def _fail(message: str, code: int) -> None:
    # One line, whatever the message holds (a driver's or patch's words run over several).
    print(f"draftbench: {' '.join(message.split())}", file=sys.stderr)
    sys.exit(code)
