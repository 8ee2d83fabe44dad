"""Admission control: a pool's worth of requests inside the app, the rest in line, nothing stuck."""

import asyncio
from concurrent.futures import ThreadPoolExecutor

import httpx

from app import db
from app.api.admission import AdmissionMiddleware
from app.config import Settings
from tests.conftest import AUTH, TOKEN
from tests.factories import register_worker, sweep_body
from tests.live import serve


def test_no_more_than_the_limit_inside_and_the_rest_in_arrival_order() -> None:
    inside, most, entered = 0, 0, []

    async def app(scope, receive, send) -> None:
        nonlocal inside, most
        inside += 1
        most = max(most, inside)
        entered.append(scope["path"])
        await asyncio.sleep(0.01)
        inside -= 1
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    admitted = AdmissionMiddleware(app, limit=2)
    sent: list[dict] = []

    async def send(message: dict) -> None:
        sent.append(message)

    async def receive() -> dict:
        return {"type": "http.request", "body": b""}

    async def arrive_in_order() -> None:
        tasks = []
        for i in range(7):
            tasks.append(asyncio.create_task(admitted({"type": "http", "path": f"/{i}"}, receive, send)))
            await asyncio.sleep(0)  # let it reach the line before the next one arrives
        await asyncio.gather(*tasks)

    asyncio.run(arrive_in_order())
    assert most == 2
    assert entered == [f"/{i}" for i in range(7)]
    assert [m["status"] for m in sent if m["type"] == "http.response.start"] == [200] * 7


def test_many_more_clients_than_connections_are_all_answered(db_url: str, dataset) -> None:
    # Each submission authenticates (a query on one thread) and then writes (on another). Without
    # admission, requests holding a connection while they waited for a thread starved the threads
    # holding a thread while they waited for a connection, until the pool timed out (500s).
    clients, each = 6 * db.POOL_SIZE, 3
    with serve(Settings(database_url=db_url, token=TOKEN)) as url:
        with httpx.Client(base_url=url, timeout=60) as http:
            register_worker(http)

        def submit_some(index: int) -> list[int]:
            with httpx.Client(base_url=url, headers=AUTH, timeout=60) as http:
                return [
                    http.post("/api/v1/sweeps", json=sweep_body(dataset, name=f"c{index}-{n}", repeats=1)).status_code
                    for n in range(each)
                ]

        with ThreadPoolExecutor(clients) as pool:
            statuses = [s for batch in pool.map(submit_some, range(clients)) for s in batch]
        with httpx.Client(base_url=url, timeout=60) as http:
            listed = http.get("/api/v1/sweeps", params={"limit": 500}).json()
    assert statuses == [201] * (clients * each)
    assert len(listed) == clients * each
