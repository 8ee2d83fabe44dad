"""A row's id as a request gives it (a path, a query filter, a body's list): at most what every database stores.

Ids are ``Integer`` primary keys (``app.models``): 32 bits on PostgreSQL, 64 on SQLite. An id past 2**31 - 1 found no
row on SQLite (404, or an empty list) and made PostgreSQL refuse the statement (a 422 naming no field), so the two
answered the same request differently. Every id a request names is this type instead, so both answer one 422 naming
the parameter and the bound it broke, before any query runs. No row has id 0 or below (both databases count from 1).
``tests/schemas/test_ids.py`` ties ``MAX_ID`` to the id columns.
"""

from typing import Annotated

from pydantic import Field

MAX_ID = 2**31 - 1

Id = Annotated[int, Field(ge=1, le=MAX_ID)]
