"""Domain errors the API turns into HTTP answers (see app.api.main)."""

from collections.abc import Sequence


class InputError(Exception):
    """Bad input that validation of the body's shape could not see (a missing dataset, too many cells).

    Rendered as 422 in FastAPI's own shape so clients parse one format.
    """

    def __init__(self, loc: Sequence[str | int], msg: str, allowed: Sequence[str] | None = None) -> None:
        super().__init__(msg)
        self.loc = ["body", *loc]
        self.msg = msg if not allowed else f"{msg}; allowed values: {', '.join(allowed)}"

    def detail(self) -> list[dict]:
        return [{"loc": self.loc, "msg": self.msg, "type": "value_error"}]


class NotFoundError(Exception):
    def __init__(self, what: str, ident: object) -> None:
        super().__init__(f"{what} {ident} not found")


class MovedError(Exception):
    """What was asked for lives under another name now (a crash group merged into another): 308 to ``path``, the same
    request's path with the new name, so a link written before the move (a pull request's comment) still leads to it."""

    def __init__(self, what: str, old: str, new: str) -> None:
        super().__init__(f"{what} {old} was merged into {new}")
        self.old, self.new = old, new


class ConflictError(Exception):
    """The request contradicts what is stored (a build's recorded facts, a reused Idempotency-Key): 409."""
