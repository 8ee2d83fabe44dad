"""What a crashed cell ran, as far as grouping its crash needs: the key of an asynchronous CUDA fault.

Such a fault's stack shows where it was noticed, not where it happened, so it is grouped by what ran
instead, as a Sentry fingerprint rule would: the method, the backend, the graph mode that ran and
whether the draft ran eagerly. The last three are read from the crash's own log (``app.vllmlog.ran``).
"""

from dataclasses import dataclass

from app.vllmlog.ran import parse_log


@dataclass(frozen=True)
class CellContext:
    method: str | None = None
    backend: str | None = None
    graph_mode: str | None = None
    draft_eager: bool = False

    def key(self) -> list[str]:
        """The fields as they enter a signature."""
        return [self.method or "", self.backend or "", self.graph_mode or "", "draft eager" if self.draft_eager else ""]


def cell_context(*, log: str, method: str | None, backend: str, graph_mode: str) -> CellContext:
    """The requested method, and the backend, graph mode and draft eagerness the log says ran.

    Before vLLM says what it resolved (a log cut early), the requested backend and mode stand in.
    """
    ran = parse_log(log, backend=backend, graph_mode=graph_mode, method=method)
    return CellContext(
        method=method,
        backend=ran.resolved_backend or backend,
        graph_mode=ran.resolved_graph_mode or graph_mode,
        draft_eager=ran.draft_eager,
    )
