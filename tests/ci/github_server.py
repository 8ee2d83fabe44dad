"""A GitHub-like server on loopback: the issue-comment calls ``draftbench ci`` makes, with GitHub's refusals.

A real HTTP server (FastAPI under uvicorn in a thread), so the client's headers, pagination (``Link``) and
error handling run as they would against api.github.com. ``refuse`` makes the next calls of one method
answer a status with headers and GitHub's ``{"message": ...}``.
"""

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from tests.live import free_port

TOKEN = "ghs_test"


@dataclass
class GitHubState:
    url: str = ""
    per_page_cap: int = 2  # small pages, so the client must follow Link headers
    comments: dict[int, list[dict]] = field(default_factory=dict)  # issue number -> its comments
    calls: list[tuple[str, str]] = field(default_factory=list)  # (method, path) in order
    refuse: dict[str, tuple[int, dict[str, str], str]] = field(default_factory=dict)  # method -> answer
    refusals_left: int | None = None  # how many refusals before answering again (None: every call)
    next_id: int = 1000

    def add(self, number: int, body: str) -> dict:
        self.next_id += 1
        made = {"id": self.next_id, "body": body, "html_url": f"{self.url}/pull/{number}#issuecomment-{self.next_id}"}
        self.comments.setdefault(number, []).append(made)
        return made


def _app(state: GitHubState) -> FastAPI:
    app = FastAPI()

    @app.middleware("http")
    async def check(request: Request, call_next):  # noqa: ANN001, ANN202
        state.calls.append((request.method, request.url.path))
        if request.headers.get("authorization") != f"Bearer {TOKEN}":
            return JSONResponse({"message": "Bad credentials"}, status_code=401)
        if request.method in state.refuse and state.refusals_left != 0:
            status, headers, message = state.refuse[request.method]
            if state.refusals_left is not None:
                state.refusals_left -= 1
            return JSONResponse({"message": message}, status_code=status, headers=headers)
        return await call_next(request)

    @app.get("/repos/{owner}/{repo}/issues/{number}/comments")
    def list_comments(owner: str, repo: str, number: int, per_page: int = 30, page: int = 1) -> JSONResponse:
        size = min(per_page, state.per_page_cap)
        every = state.comments.get(number, [])
        shown = every[(page - 1) * size: page * size]
        headers = {}
        if page * size < len(every):
            headers["link"] = f'<{state.url}/repos/{owner}/{repo}/issues/{number}/comments?per_page={per_page}&page={page + 1}>; rel="next"'
        return JSONResponse(shown, headers=headers)

    @app.post("/repos/{owner}/{repo}/issues/{number}/comments", status_code=201)
    async def create(owner: str, repo: str, number: int, request: Request) -> dict:
        return state.add(number, (await request.json())["body"])

    @app.patch("/repos/{owner}/{repo}/issues/comments/{comment_id}")
    async def edit(owner: str, repo: str, comment_id: int, request: Request) -> JSONResponse:
        for comments in state.comments.values():
            for c in comments:
                if c["id"] == comment_id:
                    c["body"] = (await request.json())["body"]
                    return JSONResponse(c)
        return JSONResponse({"message": "Not Found"}, status_code=404)

    return app


@contextmanager
def github() -> Iterator[GitHubState]:
    state = GitHubState()
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(_app(state), host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    state.url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while not server.started:
        if time.monotonic() > deadline:
            raise RuntimeError("the GitHub-like server did not start")
        time.sleep(0.05)
    try:
        yield state
    finally:
        server.should_exit = True
        thread.join(timeout=10)
