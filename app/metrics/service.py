"""Prometheus metrics of one service process: queue and worker gauges read from SQL at scrape time,
claim latency and completion counters kept in memory.

Each app owns its ``CollectorRegistry`` (never the global one), so several apps in one process
(tests) do not clash. The gauges come from the database, so every replica of the service reports
the same queue. The histogram and the counters are kept in memory: they start at 0 when the service
starts. The processes of one ``draftbench serve --processes N`` share them through
prometheus_client's multiprocess mode (``PROMETHEUS_MULTIPROC_DIR``, set by ``serve``), since a
scrape reaches whichever process accepts it; replicas on several hosts count apart, so sum them in
PromQL (``sum(rate(draftbench_cells_completed_total[5m]))``).
"""

import logging
import os
from collections.abc import Iterator
from datetime import timedelta
from typing import Annotated

from fastapi import Depends, Request
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest, multiprocess
from prometheus_client.core import GaugeMetricFamily, Metric
from sqlalchemy import func, select
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session, sessionmaker

from app.alerts import service as alerts
from app.enums import JobState
from app.models import Job, Worker, utcnow
from app.workers import liveness

log = logging.getLogger("draftbench.metrics")

# Workers not heard from for this long drop out of the per-worker series (each restart registers
# a new worker row; without a window the series would grow forever).
WORKER_WINDOW = timedelta(hours=24)
CLAIM_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class Metrics:
    """The registry of one app and the instruments its routes update."""

    def __init__(self, *, sessions: sessionmaker[Session], lease_seconds: float) -> None:
        self.registry = CollectorRegistry()
        self.claim_seconds = Histogram(
            "draftbench_claim_seconds",
            "Time to answer a worker's claim",
            ["outcome"],
            buckets=CLAIM_BUCKETS,
            registry=self.registry,
        )
        self.cells_completed = Counter(
            "draftbench_cells_completed",
            "Cells reported finished by workers, by final state (this process)",
            ["state", "gpu_kind"],
            registry=self.registry,
        )
        self.crashes = Counter(
            "draftbench_crashes",
            "Crashed or timed-out cells, by crash kind (this process)",
            ["kind", "gpu_kind"],
            registry=self.registry,
        )
        self.heartbeats = Counter(
            "draftbench_worker_heartbeats", "Heartbeats received from workers (this process)", registry=self.registry
        )
        self.sql = SqlCollector(sessions=sessions, lease_seconds=lease_seconds)
        self.registry.register(self.sql)

    def completed(self, job: Job) -> None:
        """Count a job that just reached its final state through a worker's report."""
        self.cells_completed.labels(state=job.state.value, gpu_kind=job.gpu_kind).inc()
        if job.crash is not None:
            self.crashes.labels(kind=job.crash.kind.value, gpu_kind=job.gpu_kind).inc()

    def exposition(self) -> bytes:
        """The text format; with several processes, their histograms and counters summed from the shared files."""
        shared = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
        if not shared:
            return generate_latest(self.registry)
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry, path=shared)
        registry.register(self.sql)
        return generate_latest(registry)


class SqlCollector:
    """Gauges computed from the database at each scrape: queue depth and worker liveness.

    A database error does not fail the scrape: ``draftbench_database_up`` turns 0 and the
    in-memory series are still served.
    """

    def __init__(self, *, sessions: sessionmaker[Session], lease_seconds: float) -> None:
        self.sessions = sessions
        self.lease_seconds = lease_seconds

    def collect(self) -> Iterator[Metric]:
        up = GaugeMetricFamily("draftbench_database_up", "1 when the scrape could read the database")
        try:
            with self.sessions() as session:
                families = [*self._jobs(session), *self._workers(session), self._alerts(session)]
        except SQLAlchemyError:
            log.exception("metrics: cannot read the database")
            up.add_metric([], 0)
            yield up
            return
        up.add_metric([], 1)
        yield up
        yield from families

    def _jobs(self, session: Session) -> list[Metric]:
        rows = session.execute(select(Job.state, Job.gpu_kind, func.count()).group_by(Job.state, Job.gpu_kind)).all()
        counts = {(state, kind): n for state, kind, n in rows}
        jobs = GaugeMetricFamily("draftbench_jobs", "Jobs by state and GPU kind (queue depth: state=queued)", labels=["state", "gpu_kind"])
        # Every state of every GPU kind seen, zeros included, so series do not vanish when a queue drains.
        for kind in sorted({kind for _, kind in counts}):
            for state in JobState:
                jobs.add_metric([state.value, kind], counts.get((state, kind), 0))
        return [jobs]

    def _alerts(self, session: Session) -> Metric:
        open_alerts = GaugeMetricFamily("draftbench_alerts_open", "Open, unacknowledged regressions (GET /api/v1/alerts), by metric",
                                        labels=["metric"])
        for metric, count in alerts.open_counts(session=session).items():
            open_alerts.add_metric([metric], count)
        return open_alerts

    def _workers(self, session: Session) -> list[Metric]:
        now = utcnow()
        workers = session.scalars(select(Worker).where(Worker.last_heartbeat_at >= now - WORKER_WINDOW).order_by(Worker.id))
        alive = GaugeMetricFamily(
            "draftbench_workers_alive", "Live workers (heard from within the lease), by GPU kind", labels=["gpu_kind"]
        )
        gpus = GaugeMetricFamily("draftbench_worker_gpus_alive", "GPUs of the live workers, by GPU kind", labels=["gpu_kind"])
        age = GaugeMetricFamily(
            "draftbench_worker_heartbeat_age_seconds",
            "Seconds since each worker's last heartbeat or claim (workers heard from in the last 24 h)",
            labels=["worker_id", "name", "host"],
        )
        alive_by_kind: dict[str, int] = {}
        gpus_by_kind: dict[str, int] = {}
        for worker in workers:
            seconds = (now - worker.last_heartbeat_at).total_seconds()
            age.add_metric([str(worker.id), worker.name, worker.host], max(seconds, 0.0))
            for kind in worker.gpu_kinds:
                alive_by_kind.setdefault(kind, 0)
                gpus_by_kind.setdefault(kind, 0)
                if liveness.is_alive(worker.last_heartbeat_at, now=now, lease_seconds=self.lease_seconds):
                    alive_by_kind[kind] += 1
                    gpus_by_kind[kind] += worker.gpu_count
        for kind in sorted(alive_by_kind):
            alive.add_metric([kind], alive_by_kind[kind])
            gpus.add_metric([kind], gpus_by_kind[kind])
        return [alive, gpus, age]


def get_metrics(request: Request) -> Metrics:
    return request.app.state.metrics


MetricsDep = Annotated[Metrics, Depends(get_metrics)]
