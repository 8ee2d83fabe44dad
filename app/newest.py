"""What "newest first" means, wherever a page or the API lists sweeps, results, crashes, crash groups or bisections
newest first: the latest time the thing happened, and among equal times the one stored last (the higher id).

By time, not by id: an import (``draftbench import``) keeps the times its runs had, so the ids of its rows say when
they were stored, not when they ran or were asked for, and a page that showed the newest by id put last month's runs
above today's while its own "created" column said otherwise. The id breaks ties, so rows of one instant keep one
order on every page and on both databases. One ordering per kind of row, named for what its time means; a list in
another order (the alarm's worst first, a sweep's cells in matrix order, paging by id) says so where it is shown.
"""

from sqlalchemy import ColumnElement, UnaryExpression

from app.models import Bisection, Crash, CrashSignature, Result, Sweep

Ordering = tuple[UnaryExpression, UnaryExpression]


def newest_first(when: ColumnElement, stored: ColumnElement) -> Ordering:
    """``ORDER BY`` terms: the latest ``when`` first, then the highest ``stored`` (an id) among equal times."""
    return when.desc(), stored.desc()


# Submitted; an imported sweep, when its first run started (``app.sweeps.imports``). ``ix_sweeps_created_at``.
SWEEPS = newest_first(Sweep.created_at, Sweep.id)
# When the cell ended (its job's ``finished_at``; an imported result keeps the time it ran).
RESULTS = newest_first(Result.created_at, Result.id)
# When the cell died (likewise).
CRASHES = newest_first(Crash.created_at, Crash.id)
# When its newest crash died: the group's ``last_seen``.
CRASH_GROUPS = newest_first(CrashSignature.last_seen, CrashSignature.id)
# Started (``draftbench bisect``).
BISECTIONS = newest_first(Bisection.created_at, Bisection.id)
