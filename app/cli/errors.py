"""The CLI's one way to fail: a sentence for the user and a non-zero exit, a traceback only with ``--debug``; and
the one way to keep secrets out of what it prints (``redact``)."""

import re

# The userinfo of a URL: "https://user:secret@host" (up to the last "@" before the path), or a bare
# "user:secret@host" as someone may type it without a scheme.
_USERINFO = re.compile(r"(?<=://)[^\s/?#]*@|(?<![^\s'\"(<\[=])[^\s/?#:@'\"]+:[^\s/?#]*@")


# A secret shorter than this is no token (ours and GitHub's run to 40 characters and more), and replacing it
# wherever it occurs would garble the text: "t" in every word.
MIN_SECRET = 8


def redact(text: str, *secrets: str) -> str:
    """``text`` with the userinfo of every URL in it removed (``https://user:secret@host/`` -> ``https://host/``)
    and every one of ``secrets`` (tokens) of at least ``MIN_SECRET`` characters replaced by ``***``."""
    for secret in secrets:
        if len(secret.strip()) >= MIN_SECRET:
            text = text.replace(secret.strip(), "***")
    return _USERINFO.sub("", text)


class CliError(Exception):
    """Printed as ``draftbench: <message>`` on stderr; the process exits with ``code``. The message is redacted:
    no URL in it shows a password."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(redact(message))
        self.code = code
