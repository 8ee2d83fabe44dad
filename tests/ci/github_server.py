"""A GitHub-like server on loopback: the calls ``draftbench ci`` makes, with GitHub's refusals.

A real HTTP server (FastAPI under uvicorn in a thread), so the client's headers, pagination (``Link``) and
error handling run as they would against api.github.com. Two kinds of token, as GitHub has them: a user's
(``USER_TOKEN``: ``GET /user`` names its account) and a GitHub App's installation token such as Actions'
``GITHUB_TOKEN`` (``TOKEN``: ``GET /user`` answers 403 "Resource not accessible by integration", and only
GraphQL's ``viewer`` names its bot account). Every comment records who wrote it, and, as on GitHub, a token
with write access may edit anyone's comment. ``refuse`` makes the next calls of one route (``list``,
``create``, ``edit``, ``user``, ``graphql``) answer a status with headers and GitHub's ``{"message": ...}``;
``next_origin`` sends the ``Link`` header's next page to another server, and ``endless`` always has one.
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

TOKEN = "ghs_test"  # an installation token, as Actions' GITHUB_TOKEN is
BOT = "github-actions[bot]"
USER_TOKEN = "ghp_test"  # a user's personal access token
USER = "octo-dev"
ACCOUNTS = {TOKEN: (BOT, "Bot"), USER_TOKEN: (USER, "User")}  # token -> (login, type)


@dataclass
class GitHubState:
    url: str = ""
    per_page_cap: int = 2  # small pages, so the client must follow Link headers
    comments: dict[int, list[dict]] = field(default_factory=dict)  # issue number -> its comments
    calls: list[tuple[str, str]] = field(default_factory=list)  # (method, path) in order
    authorizations: list[str] = field(default_factory=list)  # the Authorization header of every call
    refuse: dict[str, tuple[int, dict[str, str], str]] = field(default_factory=dict)  # route -> answer
    refusals_left: int | None = None  # how many refusals before answering again (None: every call)
    next_origin: str | None = None  # where the Link header's next page points (None: this server)
    endless: bool = False  # every page of comments has a next page
    next_id: int = 1000

    def add(self, number: int, body: str, author: str = "someone", kind: str = "User") -> dict:
        self.next_id += 1
        made = {"id": self.next_id, "body": body, "user": {"login": author, "type": kind},
                "html_url": f"{self.url}/pull/{number}#issuecomment-{self.next_id}"}
        self.comments.setdefault(number, []).append(made)
        return made


def _app(state: GitHubState) -> FastAPI:
    app = FastAPI()

    @app.middleware("http")
    async def check(request: Request, call_next):
        state.calls.append((request.method, request.url.path))
        state.authorizations.append(request.headers.get("authorization", ""))
        if request.headers.get("authorization", "").removeprefix("Bearer ") not in ACCOUNTS:
            return JSONResponse({"message": "Bad credentials"}, status_code=401)
        return await call_next(request)

    def refused(route: str) -> JSONResponse | None:
        if route not in state.refuse or state.refusals_left == 0:
            return None
        status, headers, message = state.refuse[route]
        if state.refusals_left is not None:
            state.refusals_left -= 1
        return JSONResponse({"message": message}, status_code=status, headers=headers)

    def account(request: Request) -> tuple[str, str]:
        return ACCOUNTS[request.headers["authorization"].removeprefix("Bearer ")]

    @app.get("/user")
    def user(request: Request) -> JSONResponse:
        login, kind = account(request)
        if kind == "Bot":
            return JSONResponse({"message": "Resource not accessible by integration"}, status_code=403)
        return refused("user") or JSONResponse({"login": login, "type": kind})

    @app.post("/graphql")
    async def graphql(request: Request) -> JSONResponse:
        if "viewer" not in (await request.json()).get("query", ""):
            return JSONResponse({"errors": [{"message": "this server answers only viewer { login }"}]})
        return refused("graphql") or JSONResponse({"data": {"viewer": {"login": account(request)[0]}}})

    @app.get("/repos/{owner}/{repo}/issues/{number}/comments")
    def list_comments(owner: str, repo: str, number: int, per_page: int = 30, page: int = 1) -> JSONResponse:
        if answer := refused("list"):
            return answer
        size = min(per_page, state.per_page_cap)
        every = state.comments.get(number, [])
        shown = every[(page - 1) * size: page * size]
        headers = {}
        if page * size < len(every) or state.endless:
            origin = state.next_origin or state.url
            headers["link"] = f'<{origin}/repos/{owner}/{repo}/issues/{number}/comments?per_page={per_page}&page={page + 1}>; rel="next"'
        return JSONResponse(shown, headers=headers)

    @app.post("/repos/{owner}/{repo}/issues/{number}/comments", status_code=201)
    async def create(owner: str, repo: str, number: int, request: Request) -> JSONResponse:
        if answer := refused("create"):
            return answer
        return JSONResponse(state.add(number, (await request.json())["body"], *account(request)), status_code=201)

    @app.patch("/repos/{owner}/{repo}/issues/comments/{comment_id}")
    async def edit(owner: str, repo: str, comment_id: int, request: Request) -> JSONResponse:
        if answer := refused("edit"):
            return answer
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
