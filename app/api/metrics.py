"""``/metrics``: the Prometheus text exposition of this service process."""

from fastapi import APIRouter, Response
from prometheus_client import CONTENT_TYPE_LATEST

from app.api.responses import answers
from app.metrics.service import MetricsDep

router = APIRouter(tags=["metrics"])


@router.get("/metrics", response_class=Response, responses={200: {"content": {"text/plain": {}}}, **answers(422)})
def metrics(metrics: MetricsDep) -> Response:
    """Queue depth by state and GPU kind, workers alive, heartbeat ages, claim latency, cells and crashes."""
    return Response(metrics.exposition(), media_type=CONTENT_TYPE_LATEST)
