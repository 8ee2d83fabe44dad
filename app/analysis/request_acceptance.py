"""Acceptance by prompt category and over requests, from the counts vLLM reports per request.

Pure functions of a result's requests and of the compact sums stored from them (``Result.request_acceptance``):
nothing here reads the database or the web layer.

The unit is the request, not the token: the tokens of one request share its context and are accepted or rejected
together, so a category's interval resamples requests (a cluster interval), never its tokens alone. What a result
keeps is enough for that at any size: per category the counts and the sums of squares and cross-products of each
request's drafts, draft tokens and accepted tokens (sums of several results pool by adding), and a fixed histogram
of the requests' acceptance rates. A prompt run in several engine starts counts once per start: at temperature 0 the
starts of one build replay the same drafts, so an interval pooled over repeats is narrower than the prompts warrant,
by up to the square root of the starts.
"""

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from app.analysis.acceptance import acceptance_length, cluster_ratio_se
from app.analysis.intervals import Z_95, wilson_interval

# The per-request acceptance histogram's bins: [0, 0.1), [0.1, 0.2), ..., [0.9, 1.0] (1.0 in the last).
RATE_BINS = 10
# The category of a request whose prompt file gives none (ShareGPT); runners/cellkit.py repeats it.
UNCATEGORISED = "uncategorised"


class CountedRequest(Protocol):
    """One request as a result lists it (``app.schemas.cell.MeasuredRequest``): its counters are None where vLLM
    reported none."""

    category: str | None
    num_drafts: int | None
    num_draft_tokens: int | None
    num_accepted_tokens: int | None
    accepted_per_position: list[int] | None


@dataclass
class CategorySums:
    """The requests of one category, summed: ``requests`` (n), drafts ``D = sum d_u``, draft tokens ``T = sum t_u``,
    accepted ``A = sum a_u``, the sums behind the cluster intervals (``sum a^2``, ``sum a t``, ``sum t^2``,
    ``sum a d``, ``sum d^2``) and per position ``A_i``. The counter fields carry vLLM's names, so the sums are
    counters for ``app.analysis.acceptance`` too. Stored as one list of integers in this order (:meth:`to_list`):
    pooling adds lists, and a page that pools thousands of results reads no field names."""

    requests: int = 0
    num_drafts: int = 0
    num_draft_tokens: int = 0
    num_accepted_tokens: int = 0
    accepted_sq: int = 0
    accepted_x_draft_tokens: int = 0
    draft_tokens_sq: int = 0
    accepted_x_drafts: int = 0
    drafts_sq: int = 0
    accepted_per_position: list[int] = field(default_factory=list)

    def to_list(self) -> list[int]:
        return [self.requests, self.num_drafts, self.num_draft_tokens, self.num_accepted_tokens, self.accepted_sq,
                self.accepted_x_draft_tokens, self.draft_tokens_sq, self.accepted_x_drafts, self.drafts_sq,
                *self.accepted_per_position]

    @classmethod
    def from_list(cls, values: Sequence[int]) -> "CategorySums":
        return cls(*values[:SCALARS], accepted_per_position=list(values[SCALARS:]))


# The sums before the per-position counts in a stored list (CategorySums.to_list).
SCALARS = 9


@dataclass
class RequestAcceptance:
    """What a result keeps of its requests' counters: each category's sums (:meth:`CategorySums.to_list`), the
    histogram of per-request acceptance rates ``a_u / t_u`` (``RATE_BINS`` bins over [0, 1]), the requests that
    drafted nothing (no rate) and those that accepted more tokens than they drafted (``over``: a counting bug, in no
    bin). Stored as it is (:meth:`to_json`, :func:`from_json`)."""

    categories: dict[str, list[int]] = field(default_factory=dict)
    rate_bins: list[int] = field(default_factory=lambda: [0] * RATE_BINS)
    no_drafts: int = 0
    over: int = 0

    def sums(self, name: str) -> CategorySums:
        return CategorySums.from_list(self.categories[name])

    @property
    def total(self) -> CategorySums:
        """Every category's sums added up: what the requests count in all."""
        total: list[int] = []
        for values in self.categories.values():
            total = _added(total, values)
        return CategorySums.from_list(total) if total else CategorySums()

    def add(self, more: "RequestAcceptance") -> None:
        """Add ``more``'s sums and bins to these, category by category (a category only one has counts as zero in the
        other); per-position lists of unequal length as zero-padded."""
        for name, values in more.categories.items():
            mine = self.categories.get(name)
            self.categories[name] = list(values) if mine is None else _added(mine, values)
        self.rate_bins = [a + b for a, b in zip(self.rate_bins, more.rate_bins, strict=True)]
        self.no_drafts += more.no_drafts
        self.over += more.over

    def to_json(self) -> dict[str, Any]:
        return {"categories": self.categories, "rate_bins": self.rate_bins, "no_drafts": self.no_drafts, "over": self.over}


@dataclass(frozen=True)
class CategoryAcceptance:
    """One category's acceptance rate ``A / T`` and mean acceptance length ``1 + A / D``, each with its 95 % interval
    (:func:`category_acceptance`), and the requests and draft tokens they come from."""

    category: str
    requests: int
    draft_tokens: int
    accepted: int
    rate: float
    rate_low: float
    rate_high: float
    length: float
    length_low: float
    length_high: float


def summarise(requests: Iterable[CountedRequest]) -> RequestAcceptance | None:
    """The sums a result keeps of ``requests``: None when no request reported its counters (an older cell, a build
    without per-request metrics, a baseline), so a page says "not recorded" rather than showing zeros. A request
    without a category counts as ``UNCATEGORISED``. O(requests x k)."""
    found = RequestAcceptance()
    counted = False
    for request in requests:
        if request.num_drafts is None or request.num_draft_tokens is None or request.num_accepted_tokens is None:
            continue
        counted = True
        drafts, tokens, accepted = request.num_drafts, request.num_draft_tokens, request.num_accepted_tokens
        one = CategorySums(1, drafts, tokens, accepted, accepted * accepted, accepted * tokens, tokens * tokens,
                           accepted * drafts, drafts * drafts, list(request.accepted_per_position or []))
        found.add(RequestAcceptance({request.category or UNCATEGORISED: one.to_list()}, [0] * RATE_BINS))
        if tokens == 0:
            found.no_drafts += 1
        elif accepted > tokens:
            found.over += 1
        else:
            found.rate_bins[min(RATE_BINS - 1, int(accepted / tokens * RATE_BINS))] += 1
    return found if counted else None


def pool(kept: Iterable[RequestAcceptance]) -> RequestAcceptance | None:
    """Several results' sums added up, category by category and bin by bin (a cell's starts, as
    ``app.cells.pooling`` pools their counters); None when none was recorded. The first is added to in place."""
    pooled = None
    for more in kept:
        if pooled is None:
            pooled = more
        else:
            pooled.add(more)
    return pooled


def from_json(stored: Mapping[str, Any] | None) -> RequestAcceptance | None:
    """``Result.request_acceptance`` as stored (:meth:`RequestAcceptance.to_json`); None for a result without it."""
    if not stored:
        return None
    return RequestAcceptance(dict(stored["categories"]), list(stored["rate_bins"]), stored["no_drafts"], stored["over"])


def category_acceptance(name: str, sums: CategorySums) -> CategoryAcceptance | None:
    """Acceptance of one category's requests with 95 % intervals that treat the request as the unit; None when they
    drafted nothing.

    With ``n`` requests, request ``u`` drafting ``d_u`` times, ``t_u`` draft tokens and accepting ``a_u``:

    - acceptance rate ``R = A / T`` (``A = sum a_u``, ``T = sum t_u``); interval ``R +- z se_R`` with the ratio
      estimator's cluster standard error over requests ``se_R^2 = n / (n - 1) sum_u (a_u - R t_u)^2 / T^2``
      (``app.analysis.acceptance.cluster_ratio_se``), widened to hold Wilson's interval for ``A`` successes in ``T``
      trials and clipped to [0, 1]: with few requests, or requests that all accept alike, the cluster term alone
      can be too narrow (0 at ``n = 1``), and Wilson alone treats correlated tokens as independent;
    - mean acceptance length ``L = 1 + A / D``; interval ``L +- z max(se_a, se_L)`` clipped to ``[1, 1 + k]``, with
      ``se_a`` the per-draft error of ``app.analysis.acceptance.derive`` and ``se_L`` the same cluster error of
      ``A / D`` over the requests' ``(a_u, d_u)``.

    ``z = 1.96``. O(k).
    """
    if sums.num_draft_tokens == 0 or sums.num_drafts == 0:
        return None
    rate = sums.num_accepted_tokens / sums.num_draft_tokens
    if rate > 1:
        return None
    wilson_low, wilson_high = wilson_interval(sums.num_accepted_tokens, sums.num_draft_tokens)
    half = Z_95 * cluster_ratio_se(sums.requests, sums.num_accepted_tokens, sums.num_draft_tokens, sums.accepted_sq,
                                   sums.accepted_x_draft_tokens, sums.draft_tokens_sq)
    length, length_low, length_high = acceptance_length(
        sums, cluster_ratio_se(sums.requests, sums.num_accepted_tokens, sums.num_drafts, sums.accepted_sq,
                               sums.accepted_x_drafts, sums.drafts_sq))
    return CategoryAcceptance(
        category=name, requests=sums.requests, draft_tokens=sums.num_draft_tokens, accepted=sums.num_accepted_tokens,
        rate=rate, rate_low=max(0.0, min(wilson_low, rate - half)), rate_high=min(1.0, max(wilson_high, rate + half)),
        length=length, length_low=length_low, length_high=length_high,
    )


def by_category(kept: RequestAcceptance) -> list[CategoryAcceptance]:
    """:func:`category_acceptance` of each category that drafted, by name."""
    return [found for name in sorted(kept.categories) if (found := category_acceptance(name, kept.sums(name)))]


def request_problems(kept: RequestAcceptance, totals) -> list[str]:
    """The rules the requests' counters break against themselves and the result's ``totals`` (spec-decode counters:
    ``num_drafts``, ``num_draft_tokens``, ``num_accepted_tokens``, ``accepted_per_position``), as sentences: no
    request accepts more tokens than it drafted, and the requests add up to the totals, counter by counter and
    position by position (vLLM counts both in the same scheduler step; the cell sums every measured pass). Empty
    when they agree. O(k)."""
    problems = [f"{kept.over} request{'s' if kept.over != 1 else ''} accepted more tokens than drafted"] if kept.over else []
    summed = kept.total
    for what, mine, theirs in (
        ("drafts", summed.num_drafts, totals.num_drafts),
        ("draft tokens", summed.num_draft_tokens, totals.num_draft_tokens),
        ("accepted tokens", summed.num_accepted_tokens, totals.num_accepted_tokens),
    ):
        if mine != theirs:
            problems.append(f"requests count {mine} {what} in all, the run's counters {theirs}")
    positions, theirs = summed.accepted_per_position, list(totals.accepted_per_position or [])
    if positions and theirs and positions != theirs:
        problems.append(f"requests accepted {positions} per position in all, the run's counters {theirs}")
    return problems


def _added(left: Sequence[int], right: Sequence[int]) -> list[int]:
    """Two stored lists of sums added element by element, the shorter zero-padded (per-position counts of unequal k)."""
    if len(left) < len(right):
        left, right = right, left
    return [a + b for a, b in zip(left, [*right, *[0] * (len(left) - len(right))], strict=True)]
