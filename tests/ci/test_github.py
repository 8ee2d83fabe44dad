"""The GitHub client against the GitHub-like loopback server: one comment per pull request, refusals in words."""

import pytest

from app.ci.github import GitHub, GitHubError
from tests.ci.github_server import TOKEN, GitHubState

MARKER = "<!-- draftbench -->"


def _client(gh: GitHubState, token: str = TOKEN) -> GitHub:
    return GitHub(token=token, repo="octo/vllm", api_url=gh.url)


def test_a_second_push_edits_the_comment_found_on_a_later_page(gh: GitHubState) -> None:
    for n in range(5):  # other people's comments: with 2 a page, ours lands on page 3
        gh.add(12, f"looks good {n}")
    with _client(gh) as client:
        first = client.upsert_comment(12, f"**draftbench: 1 regression**\n{MARKER}", marker=MARKER)
        second = client.upsert_comment(12, f"**draftbench: no regression**\n{MARKER}", marker=MARKER)
    assert (first.action, second.action, first.comment_id) == ("created", "updated", second.comment_id)
    ours = [c for c in gh.comments[12] if MARKER in c["body"]]
    assert len(ours) == 1 and ours[0]["body"].startswith("**draftbench: no regression**")
    assert [m for m, _ in gh.calls].count("POST") == 1 and ("PATCH", f"/repos/octo/vllm/issues/comments/{first.comment_id}") in gh.calls
    assert [m for m, _ in gh.calls].count("GET") == 2 * 3  # every page, both times


@pytest.mark.parametrize(("status", "headers", "message", "said"), [
    (403, {}, "Resource not accessible by integration", "pull-requests: write"),
    (404, {}, "Not Found", "check --repo and --pr"),
    (422, {}, "Validation Failed: body is too long", "(422: Validation Failed: body is too long)"),
    (403, {"x-ratelimit-remaining": "0", "x-ratelimit-reset": "9999999999"}, "API rate limit exceeded", "rate limit"),
    (429, {"retry-after": "60"}, "secondary rate limit", "retry after 60 s"),
])
def test_refusals_name_what_was_tried_and_why(gh: GitHubState, status: int, headers: dict, message: str, said: str) -> None:
    gh.refuse["POST"] = (status, headers, message)
    with _client(gh) as client, pytest.raises(GitHubError) as caught:
        client.upsert_comment(7, f"x\n{MARKER}", marker=MARKER)
    assert caught.value.status == status
    assert str(caught.value).startswith("GitHub") and "commenting on #7 in octo/vllm" in str(caught.value)
    assert said in str(caught.value)


def test_a_rate_limit_that_lifts_at_once_is_waited_out(gh: GitHubState) -> None:
    gh.refuse["GET"], gh.refusals_left = (429, {"retry-after": "0"}, "secondary rate limit"), 1
    with _client(gh) as client:
        assert client.upsert_comment(7, f"x\n{MARKER}", marker=MARKER).action == "created"
    assert [m for m, _ in gh.calls] == ["GET", "GET", "POST"]


def test_a_wrong_token_is_named(gh: GitHubState) -> None:
    with _client(gh, token="nope") as client, pytest.raises(GitHubError, match=r"\(401: Bad credentials\).*write access"):
        client.upsert_comment(7, "x", marker=MARKER)
