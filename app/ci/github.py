"""The few GitHub REST calls a pull-request comment needs: find ours by its marker and author, then create or edit it.

Who "we" are is asked of GitHub (``login``): ``GET /user`` for a user's token; a GitHub App's installation
token (Actions' ``GITHUB_TOKEN`` among them) gets 403 there, and GraphQL's ``viewer`` names its bot account
(``github-actions[bot]``, ``<app-slug>[bot]``). ``GET /repos/{owner}/{repo}/issues/{n}/comments`` (page by
page, at most ``MAX_PAGES``, only on the API's own origin), then ``PATCH
/repos/{owner}/{repo}/issues/comments/{id}`` of the first comment of that account holding the marker, or ``POST
/repos/{owner}/{repo}/issues/{n}/comments``. A pull request is an issue to this API. Every refusal is one
``GitHubError`` sentence saying what was tried.
"""

import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TypeVar

import httpx

API_URL = "https://api.github.com"
# A rate limit that lifts within this many seconds is waited out once; a longer one fails the call.
MAX_WAIT_S = 10.0
_PER_PAGE = 100
# Pages of comments read at most (5,000 comments): a server whose pages never end cannot keep the job forever.
MAX_PAGES = 50
_VIEWER = {"query": "query { viewer { login } }"}
_Json = TypeVar("_Json", dict, list)


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
        self._login: str | None = None
        # No redirects followed: a 3xx is a refusal, so the token never travels to where one points.
        self._http = httpx.Client(base_url=self.api_url, timeout=timeout_s, follow_redirects=False, headers={
            "Authorization": f"Bearer {token}", "Accept": "application/vnd.github+json",
            "X-GitHub-Api-Version": "2022-11-28", "User-Agent": "draftbench",
        })

    def __enter__(self) -> "GitHub":
        return self

    def __exit__(self, *_: object) -> None:
        self._http.close()

    def upsert_comment(self, number: int, body: str, *, marker: str, author: str | None = None) -> Posted:
        """Edit the pull request's first comment by ``author`` (default: the token's account, ``login``) holding
        ``marker``, or create one: one comment per pull request. Another account's comment is never edited,
        whatever it holds."""
        author = (author or self.login()).lower()
        ours = next((c for c in self._comments(number)
                     if _author(c) == author and marker in (c.get("body") or "")), None)
        if ours is None:
            made = self._json(self._send("POST", f"/repos/{self.repo}/issues/{number}/comments", f"commenting on #{number}",
                                         json={"body": body}), dict, f"commenting on #{number}")
            return Posted("created", made["id"], made.get("html_url", ""))
        what = f"editing comment {ours['id']} on #{number}"
        edited = self._json(self._send("PATCH", f"/repos/{self.repo}/issues/comments/{ours['id']}", what,
                                       json={"body": body}), dict, what)
        return Posted("updated", edited["id"], edited.get("html_url", ""))

    def login(self) -> str:
        """The login of the account the token acts as, asked once: ``GET /user``, else GraphQL's ``viewer``."""
        if self._login is None:
            what = "asking GitHub which account the token acts as"
            user = self._request("GET", "/user", what)
            wait = _rate_limit_wait(user)
            if user.status_code >= 300 and (wait is not None or user.status_code not in (403, 404)):
                raise _error(user, what, wait, self.repo)
            asked = [user]
            if user.status_code >= 300:  # 403: an installation token, whose account only GraphQL names
                asked.append(self._request("POST", _graphql_url(self.api_url), what, json=_VIEWER))
            login = _named(asked[-1])
            if not login:
                tried = "; ".join(f"{name}: {_refusal(answer)}"
                                  for name, answer in zip(("GET /user", "GraphQL viewer"), asked, strict=False))
                raise GitHubError(f"GitHub would not say which account the token acts as ({tried}), so no comment of ours "
                                  "can be told from another's; pass --comment-author LOGIN (the comments' author, as "
                                  "github-actions[bot])", asked[-1].status_code)
            self._login = login
        return self._login

    def _comments(self, number: int) -> Iterator[dict]:
        """The issue's comments, page by page (``Link: <...>; rel="next"``): at most ``MAX_PAGES``, and only
        pages on the API's own origin (scheme, host, port), which alone gets the token."""
        what = f"listing the comments of #{number}"
        url = f"{self.api_url}/repos/{self.repo}/issues/{number}/comments?per_page={_PER_PAGE}"
        for _ in range(MAX_PAGES):
            response = self._send("GET", url, what)
            yield from self._json(response, list, what)
            following = response.links.get("next", {}).get("url")
            if not following:
                return
            try:
                url = str(httpx.URL(self.api_url).join(following))
                elsewhere = _origin(url) != _origin(self.api_url)
            except httpx.InvalidURL:
                raise GitHubError(f"GitHub's next page of the comments of #{number} is not a URL: not followed") from None
            if elsewhere:
                raise GitHubError(f"GitHub's next page of the comments of #{number} is on {_shown(url)}, not on the API at "
                                  f"{_shown(self.api_url)}: not followed, so the token goes nowhere else")
        raise GitHubError(f"GitHub stopped listing the comments of #{number} after {MAX_PAGES} pages "
                          f"({MAX_PAGES * _PER_PAGE:,} comments) with more to come: not followed further")

    def _send(self, method: str, url: str, what: str, **kwargs: object) -> httpx.Response:
        """The answer of a call that succeeded; GitHubError for anything else (a redirect included)."""
        response = self._request(method, url, what, **kwargs)
        if response.status_code >= 300:
            raise _error(response, what, _rate_limit_wait(response), self.repo)
        return response

    def _request(self, method: str, url: str, what: str, **kwargs: object) -> httpx.Response:
        """The answer, whatever its status; a rate limit that lifts within ``MAX_WAIT_S`` is waited out once."""
        for attempt in range(2):
            try:
                response = self._http.request(method, url, **kwargs)  # type: ignore[arg-type]
            except httpx.TransportError as exc:
                raise GitHubError(f"cannot reach GitHub at {self.api_url} while {what} ({type(exc).__name__}: {exc})") from exc
            wait = _rate_limit_wait(response)
            if attempt == 1 or wait is None or wait > MAX_WAIT_S:
                return response
            time.sleep(wait)
        raise AssertionError("unreachable")

    def _json(self, response: httpx.Response, kind: type[_Json], what: str) -> _Json:
        try:
            answer = response.json()
        except ValueError:
            answer = None
        if not isinstance(answer, kind):
            raise GitHubError(f"GitHub answered {what} in {self.repo} with something other than a JSON "
                              f"{'object' if kind is dict else 'list'} ({response.status_code})", response.status_code)
        return answer


def _named(answer: httpx.Response) -> str | None:
    """The login in an answer of ``GET /user`` or of GraphQL's ``viewer``; None when it holds none."""
    if answer.status_code >= 300:
        return None
    try:
        found = answer.json()
        login = found["data"]["viewer"]["login"] if "data" in found else found["login"]
    except (ValueError, KeyError, TypeError):
        return None
    return login if isinstance(login, str) and login else None


def _author(comment: dict) -> str:
    """The comment's author's login, lower case (GitHub logins ignore case); '' for a deleted account."""
    return str((comment.get("user") or {}).get("login") or "").lower()


def _graphql_url(api_url: str) -> str:
    """api.github.com/graphql; GitHub Enterprise Server's REST API is at /api/v3 and its GraphQL at /api/graphql."""
    return api_url.removesuffix("/v3") + "/graphql" if api_url.endswith("/api/v3") else api_url + "/graphql"


def _origin(url: str) -> tuple[str, str, int | None]:
    parsed = httpx.URL(url)
    return parsed.scheme, parsed.host, parsed.port or {"http": 80, "https": 443}.get(parsed.scheme)


def _shown(url: str) -> str:
    """A URL's origin alone: no userinfo, path or query to leak."""
    parsed = httpx.URL(url)
    return f"{parsed.scheme}://{parsed.host}" + (f":{parsed.port}" if parsed.port else "")


def _refusal(response: httpx.Response) -> str:
    """``403: Resource not accessible by integration``: the status and GitHub's message."""
    try:
        message = str(response.json().get("message", ""))
    except (ValueError, AttributeError):
        message = " ".join(response.text.split())[:200]
    return f"{response.status_code}: {message or 'no message'}"


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
    status = response.status_code
    said = f"GitHub refused {what} in {repo} ({_refusal(response)})"
    if wait is not None:
        said = f"GitHub's rate limit stopped {what} in {repo} ({status}); retry after {wait:.0f} s"
    elif status in (401, 403):
        said += "; the token needs write access to the pull request's issues (permissions: pull-requests: write)"
    elif status == 404:
        said += "; check --repo and --pr, and that the token can see the repository"
    elif status < 400:
        said += "; GitHub's answer was a redirect, which is not followed: check --repo and --github-api"
    return GitHubError(said, status)
