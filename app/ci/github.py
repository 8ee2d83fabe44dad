"""The few GitHub REST calls a pull-request comment needs: find ours by its marker, then create or edit it.

``GET /repos/{owner}/{repo}/issues/{n}/comments`` (every page), then ``PATCH
/repos/{owner}/{repo}/issues/comments/{id}`` or ``POST /repos/{owner}/{repo}/issues/{n}/comments``. A
pull request is an issue to this API. Every refusal is one ``GitHubError`` sentence saying what was tried.
"""

import time
from dataclasses import dataclass

import httpx

API_URL = "https://api.github.com"
# A rate limit that lifts within this many seconds is waited out once; a longer one fails the call.
MAX_WAIT_S = 10.0
_PER_PAGE = 100


class GitHubError(Exception):
    """GitHub could not be reached or refused a call; ``status`` is its HTTP status (None: no answer)."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class Posted:
    action: str  # "created" or "updated"
    comment_id: int
    url: str


class GitHub:
    def __init__(self, *, token: str, repo: str, api_url: str = API_URL, timeout_s: float = 30.0) -> None:
        self.repo = repo
        self.api_url = api_url.rstrip("/")
        self._http = httpx.Client(base_url=self.api_url, timeout=timeout_s, headers={
            "Authorization": f"Bearer {token}", "Accept": "application/vnd.github+json",
            "X-GitHub-Api-Version": "2022-11-28", "User-Agent": "draftbench",
        })

    def __enter__(self) -> "GitHub":
        return self

    def __exit__(self, *_: object) -> None:
        self._http.close()

    def upsert_comment(self, number: int, body: str, *, marker: str) -> Posted:
        """Edit the pull request's first comment holding ``marker``, or create one: one comment per pull request."""
        ours = next((c for c in self._comments(number) if marker in (c.get("body") or "")), None)
        if ours is None:
            made = self._send("POST", f"/repos/{self.repo}/issues/{number}/comments", f"commenting on #{number}",
                              json={"body": body}).json()
            return Posted("created", made["id"], made.get("html_url", ""))
        edited = self._send("PATCH", f"/repos/{self.repo}/issues/comments/{ours['id']}",
                            f"editing comment {ours['id']} on #{number}", json={"body": body}).json()
        return Posted("updated", edited["id"], edited.get("html_url", ""))

    def _comments(self, number: int) -> list[dict]:
        """Every comment of the issue, following the ``Link: <...>; rel="next"`` pages."""
        found: list[dict] = []
        url: str | None = f"/repos/{self.repo}/issues/{number}/comments?per_page={_PER_PAGE}"
        while url:
            response = self._send("GET", url, f"listing the comments of #{number}")
            found += response.json()
            url = response.links.get("next", {}).get("url")
        return found

    def _send(self, method: str, url: str, what: str, **kwargs: object) -> httpx.Response:
        for attempt in range(2):
            try:
                response = self._http.request(method, url, **kwargs)  # type: ignore[arg-type]
            except httpx.TransportError as exc:
                raise GitHubError(f"cannot reach GitHub at {self.api_url} while {what} ({type(exc).__name__}: {exc})") from exc
            if response.status_code < 400:
                return response
            wait = _rate_limit_wait(response)
            if wait is not None and wait <= MAX_WAIT_S and attempt == 0:
                time.sleep(wait)
                continue
            raise _error(response, what, wait, self.repo)
        raise AssertionError("unreachable")


def _rate_limit_wait(response: httpx.Response) -> float | None:
    """Seconds until GitHub's rate limit lifts, when the answer is one (429, or 403 with no requests left)."""
    limited = response.status_code == 429 or (
        response.status_code == 403 and (response.headers.get("x-ratelimit-remaining") == "0" or "retry-after" in response.headers))
    if not limited:
        return None
    try:
        if "retry-after" in response.headers:
            return max(0.0, float(response.headers["retry-after"]))
        return max(0.0, float(response.headers["x-ratelimit-reset"]) - time.time())
    except (KeyError, ValueError):
        return 60.0


def _error(response: httpx.Response, what: str, wait: float | None, repo: str) -> GitHubError:
    try:
        message = str(response.json().get("message", ""))
    except ValueError:
        message = response.text[:200]
    status = response.status_code
    said = f"GitHub refused {what} in {repo} ({status}: {message or 'no message'})"
    if wait is not None:
        said = f"GitHub's rate limit stopped {what} in {repo} ({status}); retry after {wait:.0f} s"
    elif status in (401, 403):
        said += "; the token needs write access to the pull request's issues (permissions: pull-requests: write)"
    elif status == 404:
        said += "; check --repo and --pr, and that the token can see the repository"
    return GitHubError(said, status)
