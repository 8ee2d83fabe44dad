"""Options several commands share: the service's address and the tokens each kind of command needs."""

from typing import Annotated

import typer

Server = Annotated[str, typer.Option(envvar="DRAFTBENCH_SERVER", help="The service's base URL")]
HostToken = Annotated[str, typer.Option(
    envvar="DRAFTBENCH_TOKEN", help="A host's token, which registers this host's workers (`draftbench token create --scope worker`)")]
SubmitToken = Annotated[str, typer.Option(
    envvar="DRAFTBENCH_TOKEN", help="The service's token with the submit scope (`draftbench token create --scope submit`)")]
