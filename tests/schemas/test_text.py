"""Every text field of the input schemas is tied to the column that stores it, and a worker's report is
cut to fit, never refused."""

import importlib
import pkgutil
from collections.abc import Iterator
from typing import Annotated, Any, get_args, get_origin

from annotated_types import MaxLen
from pydantic import BaseModel, StringConstraints

import app.schemas
from app.schemas.base import Input
from app.schemas.cell import JobOutcome
from app.schemas.text import StoredIn, clean, cut

Text = tuple[str, StoredIn | None, int | None]  # (where, its column, its max_length)


def _input_models() -> list[type[Input]]:
    for module in pkgutil.iter_modules(app.schemas.__path__):
        importlib.import_module(f"app.schemas.{module.name}")
    found, stack = [], list(Input.__subclasses__())
    while stack:
        model = stack.pop()
        stack.extend(model.__subclasses__())
        if model.__module__.startswith("app.schemas."):
            found.append(model)
    return found


def _texts(where: str, annotation: Any, metadata: tuple = ()) -> Iterator[Text]:
    """Each ``str`` inside a field's type (lists, optionals, mapping keys and values), with its constraints.

    Free-form mappings (``dict[str, Any]``: engine arguments, a speculative config) are checked whole, by
    ``unstorable`` and their allow-lists, and left out.
    """
    if get_origin(annotation) is dict and get_args(annotation)[1] is Any:
        return
    if get_origin(annotation) is Annotated:
        base, *more = get_args(annotation)
        yield from _texts(where, base, (*metadata, *more))
    elif annotation is str:
        stored = next((m for m in metadata if isinstance(m, StoredIn)), None)
        lengths = [m.max_length for m in metadata if isinstance(m, StringConstraints | MaxLen)]
        yield where, stored, lengths[0] if lengths else None
    else:
        for inner in get_args(annotation):
            yield from _texts(where, inner)


def _fields(model: type[BaseModel]) -> Iterator[Text]:
    for name, field in model.model_fields.items():
        yield from _texts(f"{model.__name__}.{name}", field.annotation, tuple(field.metadata))


def _reachable(model: type[BaseModel]) -> set[type[BaseModel]]:
    """``model`` and every model its fields hold."""
    seen, stack = set(), [model]
    while stack:
        current = stack.pop()
        if current in seen:
            continue
        seen.add(current)
        for field in current.model_fields.values():
            stack.extend(_models_in(field.annotation))
    return seen


def _models_in(annotation: Any) -> Iterator[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        yield annotation
    for inner in get_args(annotation):
        yield from _models_in(inner)


def test_every_text_field_of_the_input_schemas_is_tied_to_its_column() -> None:
    texts = [text for model in _input_models() for text in _fields(model)]
    untied = [where for where, stored, _ in texts if stored is None]
    assert untied == [], "text fields without the column that stores them (app.schemas.text)"
    drifted = [(where, limit, stored.length) for where, stored, limit in texts
               if stored.length is not None and limit != stored.length]
    assert drifted == [], "text fields whose max_length is not their column's length"
    unbounded = [where for where, stored, limit in texts if stored.length is None and limit is None and not stored.cut]
    assert unbounded == [], "a user's text kept in a JSON or Text column needs a limit of its own"
    tied = {where: str(stored.column) for where, stored, _ in texts}
    assert tied["Versions.vllm"] == "Result.vllm_version" and tied["Versions.gpu_name"] == "Result.gpu_name"
    assert tied["CellResult.output_fingerprint"] == "Result.output_fingerprint"
    assert tied["RegisterRequest.host"] == "Worker.host" and tied["SweepSpec.name"] == "Sweep.name"
    assert len(tied) > 40


def test_a_workers_report_cuts_its_text_instead_of_refusing_it() -> None:
    texts = [text for model in _reachable(JobOutcome) for text in _fields(model)]
    assert [where for where, stored, _ in texts if not stored.cut] == []
    assert len(texts) == 22  # MeasuredRequest.category (cell schema 7); Energy.gpus and Energy.reason (cell schema 8)


def test_text_cut_to_its_limit_says_how_much_was_left_out() -> None:
    assert cut("v" * 100, 64) == "v" * 49 + "…[cut 51 chars]"
    assert len(cut("x" * 10**6, 4000)) == 4000 and cut("x" * 10**6, 4000).endswith("…[cut 996019 chars]")
    assert cut("short", 64) == "short" and cut("V1-with-a-long-tail", 16) == "V…[cut 18 chars]"
    assert cut("abcdefgh", 4) == "abcd"  # no room for the mark


def test_clean_drops_nul_and_replaces_lone_surrogates_everywhere() -> None:
    assert clean("a\x00b\udc80") == "ab\ufffd"
    assert clean({"k\x00": ["x\x00", 1, None, {"deep": "\ud800"}]}) == {"k": ["x", 1, None, {"deep": "\ufffd"}]}
