"""Times a host reports (when a run ended, when a commit was made): only ones its clock could have shown.

A time past the year 9999 in UTC, or long before anything here ran, is not data: one such stored time
made ``/history`` answer 500, and a commit date of 0001-01-01 in a zone east of UTC could not be stored.
"""

from datetime import UTC, datetime, timedelta
from typing import Annotated

from pydantic import AfterValidator, AwareDatetime

EARLIEST = datetime(2000, 1, 1, tzinfo=UTC)
# How far ahead of the service's clock a host's may be.
CLOCK_SKEW = timedelta(hours=1)


def plausible(when: datetime) -> datetime:
    """``when`` (aware), in UTC, if a clock could have shown it; ValueError saying why not."""
    latest = datetime.now(UTC) + CLOCK_SKEW
    try:
        utc = when.astimezone(UTC)
    except OverflowError:
        utc = None
    if utc is None or not EARLIEST <= utc <= latest:
        raise ValueError(
            f"{f'{utc:%Y-%m-%dT%H:%M:%SZ}' if utc else when.isoformat()} is not a plausible time: "
            f"it must lie between {EARLIEST:%Y-%m-%d} and now "
            f"(+{CLOCK_SKEW.total_seconds() / 3600:g} h for the host's clock)"
        )
    return utc


PlausibleTime = Annotated[AwareDatetime, AfterValidator(plausible)]
