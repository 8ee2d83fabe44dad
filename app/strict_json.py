"""JSON read strictly, wherever it comes from (a request's body, an imported file): UTF-8 only, each key once.

Python's reader guesses UTF-16 and 32 from the bytes, and keeps the last of a key given twice silently
(``{"exit_code": 1, "exit_code": 0}`` read 0). Pure functions, standard library only.
"""

import json
from typing import Any


class KeyTwice(ValueError):
    """A JSON object gives a key twice; the message names it."""


def twice(key: Any) -> str:
    return f"key {key!r} is given twice in one mapping"


def pairs_once(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object's pairs as a dict (``object_pairs_hook``); KeyTwice for a key given twice."""
    data = dict(pairs)
    if len(data) < len(pairs):
        keys = [key for key, _ in pairs]
        raise KeyTwice(twice(next(key for index, key in enumerate(keys) if key in keys[:index])))
    return data


def utf8(raw: bytes) -> str:
    """``raw`` as UTF-8 text; a byte order mark is read past, as Python's own reader does."""
    return raw.decode("utf-8-sig")


def problem(raw: bytes) -> str | None:
    """Why JSON is refused although a JSON reader takes it, or None: it is not UTF-8, or it gives a key twice in one
    object. None too for text that is not JSON at all, which its reader refuses."""
    try:
        json.loads(utf8(raw), object_pairs_hook=pairs_once)
    except KeyTwice as exc:
        return str(exc)
    except UnicodeDecodeError as exc:
        return f"not UTF-8 ({exc})"
    except (ValueError, RecursionError):
        return None
    return None
