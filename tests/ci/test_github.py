"""The GitHub client against the GitHub-like loopback server: one comment per pull request, ours alone edited,
the token sent nowhere but the API, refusals in words."""

import pytest

from app.ci.github import MAX_PAGES, GitHub, GitHubError
from tests.ci.github_server import BOT, TOKEN, USER, USER_TOKEN, GitHubState, github

MARKER = "<!-- draftbench -->"


def _client(gh: GitHubState, token: str = TOKEN) -> GitHub:
    return GitHub(token=token, repo="octo/vllm", api_url=gh.url)


def _paths(gh: GitHubState, method: str) -> list[str]:
    return [path for m, path in gh.calls if m == method]


def test_a_second_push_edits_the_comment_found_on_a_later_page(gh: GitHubState) -> None:
    for n in range(5):  # other people's comments: with 2 a page, ours lands on page 3
        gh.add(12, f"looks good {n}")
    with _client(gh) as client:
        first = client.upsert_comment(12, f"**draftbench: 1 regression**\n{MARKER}", marker=MARKER)
        second = client.upsert_comment(12, f"**draftbench: no regression**\n{MARKER}", marker=MARKER)
    assert (first.action, second.action, first.comment_id) == ("created", "updated", second.comment_id)
    ours = [c for c in gh.comments[12] if MARKER in c["body"]]
    assert len(ours) == 1 and ours[0]["body"].startswith("**draftbench: no regression**")
    assert _paths(gh, "POST") == ["/graphql", "/repos/octo/vllm/issues/12/comments"]  # who the token is: asked once
    assert _paths(gh, "PATCH") == [f"/repos/octo/vllm/issues/comments/{first.comment_id}"]
    assert _paths(gh, "GET").count("/repos/octo/vllm/issues/12/comments") == 2 * 3  # every page, both times


@pytest.mark.parametrize(("token", "login", "asked"), [
    (TOKEN, BOT, ["GET /user", "POST /graphql"]),  # an installation token (Actions' GITHUB_TOKEN): /user refuses it
    (USER_TOKEN, USER, ["GET /user"]),  # a user's token
])
def test_another_accounts_comment_holding_the_marker_is_never_edited(
        gh: GitHubState, token: str, login: str, asked: list[str]) -> None:
    theirs = gh.add(12, f"quoting the bot's comment:\n> ...\n> {MARKER}", author="mallory")
    bot_or_user = gh.add(12, f"an old one\n{MARKER}", author=USER if login == BOT else BOT)  # the other account's
    with _client(gh, token) as client:
        first = client.upsert_comment(12, f"ours\n{MARKER}", marker=MARKER)
        second = client.upsert_comment(12, f"ours again\n{MARKER}", marker=MARKER)
    assert (first.action, second.action, second.comment_id) == ("created", "updated", first.comment_id)
    assert theirs["body"].startswith("quoting") and bot_or_user["body"].startswith("an old one")
    [ours] = [c for c in gh.comments[12] if c["user"]["login"] == login]
    assert ours["body"] == f"ours again\n{MARKER}"
    assert [f"{m} {p}" for m, p in gh.calls if p in ("/user", "/graphql")] == asked


def test_an_explicit_comment_author_is_matched_without_asking_github(gh: GitHubState) -> None:
    gh.add(12, f"mine\n{MARKER}", author="mallory")
    own = gh.add(12, f"old\n{MARKER}", author=BOT, kind="Bot")
    with _client(gh) as client:
        posted = client.upsert_comment(12, f"new\n{MARKER}", marker=MARKER, author="GitHub-Actions[bot]")  # logins ignore case
    assert (posted.action, posted.comment_id, own["body"]) == ("updated", own["id"], f"new\n{MARKER}")
    assert not [p for _, p in gh.calls if p in ("/user", "/graphql")]


def test_an_account_github_cannot_name_stops_before_any_comment_is_touched(gh: GitHubState) -> None:
    gh.add(12, f"x\n{MARKER}", author="mallory")
    gh.refuse["graphql"] = (403, {}, "Resource not accessible by integration")
    with _client(gh) as client, pytest.raises(GitHubError) as caught:
        client.upsert_comment(12, f"x\n{MARKER}", marker=MARKER)
    said = str(caught.value)
    assert "which account the token acts as" in said and "--comment-author" in said
    assert "GET /user: 403: Resource not accessible by integration" in said
    assert [m for m, _ in gh.calls] == ["GET", "POST"] and gh.comments[12][0]["body"] == f"x\n{MARKER}"


@pytest.mark.parametrize("elsewhere", ["port", "host", "scheme"])
def test_a_next_page_on_another_origin_is_not_followed_and_never_gets_the_token(gh: GitHubState, elsewhere: str) -> None:
    for n in range(3):
        gh.add(12, f"comment {n}")
    with github() as thief:
        port = gh.url.rsplit(":", 1)[1]
        gh.next_origin = {"port": thief.url, "host": f"http://localhost:{port}", "scheme": f"https://127.0.0.1:{port}"}[elsewhere]
        with _client(gh) as client, pytest.raises(GitHubError) as caught:
            client.upsert_comment(12, f"x\n{MARKER}", marker=MARKER)
    said = str(caught.value)
    assert said.startswith("GitHub's next page of the comments of #12 is on ") and "not followed" in said
    assert gh.next_origin.split("/")[2] in said and "?" not in said  # the origin alone, no query
    assert thief.calls == [] and _paths(gh, "GET").count("/repos/octo/vllm/issues/12/comments") == 1
    assert _paths(gh, "POST") == ["/graphql"]  # nothing posted from a partial list


def test_a_next_page_that_is_no_url_is_said_so(gh: GitHubState) -> None:
    for n in range(3):
        gh.add(12, f"comment {n}")
    gh.next_origin = "http://[::1"
    with _client(gh) as client, pytest.raises(GitHubError, match="next page of the comments of #12 is not a URL: not followed"):
        client.upsert_comment(12, f"x\n{MARKER}", marker=MARKER)


@pytest.mark.timeout(60)
def test_pagination_stops_after_a_bounded_number_of_pages_and_says_so(gh: GitHubState) -> None:
    gh.endless = True  # a server whose every page has a next one
    with _client(gh) as client, pytest.raises(GitHubError) as caught:
        client.upsert_comment(12, f"x\n{MARKER}", marker=MARKER)
    assert f"stopped listing the comments of #12 after {MAX_PAGES} pages" in str(caught.value)
    assert _paths(gh, "GET").count("/repos/octo/vllm/issues/12/comments") == MAX_PAGES and "PATCH" not in dict(gh.calls)


def test_a_redirect_is_a_refusal_and_is_not_followed(gh: GitHubState) -> None:
    with github() as elsewhere:
        gh.refuse["list"] = (301, {"location": f"{elsewhere.url}/repos/octo/renamed/issues/7/comments"}, "Moved Permanently")
        with _client(gh) as client, pytest.raises(GitHubError) as caught:
            client.upsert_comment(7, f"x\n{MARKER}", marker=MARKER)
    assert "(301: Moved Permanently)" in str(caught.value) and "redirect, which is not followed" in str(caught.value)
    assert elsewhere.calls == [] and _paths(gh, "POST") == ["/graphql"]


def test_an_answer_of_another_shape_is_said_so(gh: GitHubState) -> None:
    gh.refuse["list"] = (200, {}, "a proxy's page")  # an object where the comments' list belongs
    refused = "listing the comments of #7 in octo/vllm with something other than a JSON list"
    with _client(gh) as client, pytest.raises(GitHubError, match=refused):
        client.upsert_comment(7, f"x\n{MARKER}", marker=MARKER)


@pytest.mark.parametrize(("status", "headers", "message", "said"), [
    (403, {}, "Resource not accessible by integration", "pull-requests: write"),
    (404, {}, "Not Found", "check --repo and --pr"),
    (422, {}, "Validation Failed: body is too long", "(422: Validation Failed: body is too long)"),
    (403, {"x-ratelimit-remaining": "0", "x-ratelimit-reset": "9999999999"}, "API rate limit exceeded", "rate limit"),
    (429, {"retry-after": "60"}, "secondary rate limit", "retry after 60 s"),
])
def test_refusals_name_what_was_tried_and_why(gh: GitHubState, status: int, headers: dict, message: str, said: str) -> None:
    gh.refuse["create"] = (status, headers, message)
    with _client(gh) as client, pytest.raises(GitHubError) as caught:
        client.upsert_comment(7, f"x\n{MARKER}", marker=MARKER)
    assert caught.value.status == status
    assert str(caught.value).startswith("GitHub") and "commenting on #7 in octo/vllm" in str(caught.value)
    assert said in str(caught.value)


def test_a_rate_limit_that_lifts_at_once_is_waited_out(gh: GitHubState) -> None:
    gh.refuse["list"], gh.refusals_left = (429, {"retry-after": "0"}, "secondary rate limit"), 1
    with _client(gh) as client:
        assert client.upsert_comment(7, f"x\n{MARKER}", marker=MARKER).action == "created"
    listed = "/repos/octo/vllm/issues/7/comments"
    assert gh.calls == [("GET", "/user"), ("POST", "/graphql"), ("GET", listed), ("GET", listed), ("POST", listed)]


def test_a_wrong_token_is_named(gh: GitHubState) -> None:
    with _client(gh, token="nope") as client, pytest.raises(GitHubError, match=r"\(401: Bad credentials\).*write access"):
        client.upsert_comment(7, "x", marker=MARKER)
