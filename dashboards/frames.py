"""Reading values out of pandas frames: what counts as missing, in one place.

A frame holds a missing value as None, NaN, ``pd.NA`` or NaT by its column's dtype and pandas' version (pandas 3
makes the None of a text column NaN). NaN is truthy and ``bool(pd.NA)`` raises, so figures, pages and templates
read a frame's cell through ``known``, never with ``or``, ``if`` or ``bool()`` on the raw value.
"""

from collections.abc import Iterable, Iterator, Sequence
from datetime import datetime
from functools import lru_cache
from typing import Any

import pandas as pd


def known(value: Any) -> Any:
    """``value``, or None where it is missing (None, NaN, ``pd.NA``, NaT)."""
    # pd.isna answers a bool for a scalar (an array for a list, which is never missing).
    return None if value is None or pd.isna(value) is True else value


def known_float(value: object) -> float | None:
    value = known(value)
    return None if value is None else float(value)


def known_time(value: object) -> datetime | None:
    """A plain ``datetime`` (a column of dates holds pandas Timestamps), or None."""
    value = known(value)
    return value.to_pydatetime() if isinstance(value, pd.Timestamp) else value


def columns(frame: pd.DataFrame, names: Iterable[str]) -> list[tuple]:
    """The frame's rows as tuples of the columns ``names``, values as the frame holds them (read them through
    ``known``): what a figure reads of a page's frame. A column at a time: pandas' ``itertuples`` boxes every value of
    every column (a page's frame has about 60): /fallback's 18 figures read theirs in 107 ms of CPU so, 13 this way."""
    return list(zip(*(frame[name].tolist() for name in names), strict=True)) if len(frame) else []


def rows(frame: pd.DataFrame) -> Iterator[tuple]:
    """The frame's rows as tuples of plain values, None where a value is missing."""
    return frame.astype(object).where(frame.notna(), None).itertuples(index=False, name=None)


def records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """The frame's rows as dicts by column, of plain values, None where a value is missing."""
    return [dict(zip(frame.columns, values, strict=True)) for values in rows(frame)]


def table(rows: list[dict[str, Any]], names: Sequence[str]) -> pd.DataFrame:
    """A frame of ``rows`` (dicts by column) with the columns ``names`` whether there are rows or none, so a page's CSV
    keeps its header row when it has nothing to show. Raises ValueError where the rows' keys are not ``names`` in
    order (the first row is checked: the rows are made alike)."""
    if not rows:
        return _empty(tuple(names)).copy()
    if list(rows[0]) != list(names):
        raise ValueError(f"a row's columns {list(rows[0])} are not {list(names)}")
    return pd.DataFrame(rows, columns=list(names))


@lru_cache(maxsize=64)
def _empty(names: tuple[str, ...]) -> pd.DataFrame:
    # Kept and copied: pandas takes a millisecond or two to make a frame of 70 columns, a copy a few microseconds.
    return pd.DataFrame(columns=list(names))
