"""The CLI fails in one clear line with a non-zero exit; a traceback only with --debug."""

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml

from tests.conftest import TOKEN
from tests.factories import sweep_body
from tests.live import free_port

DRAFTBENCH = Path(sys.executable).with_name("draftbench")


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("DRAFTBENCH_")}
    return subprocess.run([str(DRAFTBENCH), *args], capture_output=True, text=True, timeout=120, env=clean | (env or {}))


def one_line(done: subprocess.CompletedProcess) -> str:
    assert done.returncode != 0, done.stdout
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("draftbench: "), done.stderr
    assert "Traceback" not in done.stderr + done.stdout
    return lines[0]


@pytest.fixture
def sweep_file(tmp_path: Path, dataset: Path) -> Path:
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump(sweep_body(dataset)))
    return path


def test_submit_without_a_token_says_so(sweep_file: Path) -> None:
    line = one_line(run("submit", str(sweep_file), "--server", "http://127.0.0.1:9"))
    assert "no token" in line and "DRAFTBENCH_TOKEN" in line


def test_a_wrong_token_is_named_as_such(server: str, sweep_file: Path) -> None:
    line = one_line(run("submit", str(sweep_file), "--server", server, "--token", "dbk_wrong"))
    assert "refused the token (401" in line


def test_a_service_that_is_down_is_named_with_its_address(sweep_file: Path) -> None:
    address = f"http://127.0.0.1:{free_port()}"
    for args in (("status",), ("status", "3"), ("submit", str(sweep_file), "--token", "t")):
        line = one_line(run(*args, "--server", address))
        assert f"cannot reach the service at {address}" in line


CARRIES = "carries credentials before its host, which would be sent in place of the token"


@pytest.mark.parametrize(("address", "shown", "shown_with_token"), [
    ("http://user:secret@127.0.0.1:9", "cannot reach the service at http://127.0.0.1:9 ", CARRIES),
    ("https://ci:p@ss:secret@127.0.0.1:9/", "cannot reach the service at https://127.0.0.1:9 ", CARRIES),  # an unencoded "@"
    ("user:secret@127.0.0.1:9", "must be an http:// or https:// URL with a host, got '127.0.0.1:9'", None),
])
def test_a_password_in_the_services_address_is_never_printed(sweep_file: Path, address: str, shown: str,
                                                              shown_with_token: str | None) -> None:
    ci = ("ci", "--repo", "o/r", "--pr", "1", "--head", "a", "--base", "b", "--build", "x", "--base-build", "y",
          "--sweep", str(sweep_file), "--token", "t")
    line = one_line(run("status", "--server", address))
    assert shown in line and "secret" not in line and "user" not in line, line
    # A command that sends a token refuses credentials in the address: they would go as Basic auth in its place.
    for args in (("submit", str(sweep_file), "--token", "t"), ci):
        line = one_line(run(*args, "--server", address))
        assert "secret" not in line and "user" not in line, (args, line)
        assert (shown_with_token or shown) in line, (args, line)


@pytest.fixture
def echoing_service() -> Iterator[str]:
    """A service (or a proxy before it) whose refusal repeats the request's Authorization header."""

    class Echo(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.dumps({"detail": f"no such sweep for {self.headers['Authorization']}"}).encode()
            self.send_response(400)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_: object) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Echo)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()


def test_the_token_never_shows_in_an_error_whatever_the_service_says(echoing_service: str, sweep_file: Path) -> None:
    line = one_line(run("submit", str(sweep_file), "--server", echoing_service, "--token", "dbk_secret_of_the_test"))
    assert "refused (400): no such sweep for Bearer ***" in line and "dbk_secret" not in line


def test_a_refused_sweep_prints_the_services_words_naming_the_field(server: str, tmp_path: Path, dataset: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(sweep_body(dataset, backends=["FLASH_ATN"])))
    line = one_line(run("submit", str(path), "--server", server, "--token", TOKEN))
    assert "(422)" in line and "backends.0" in line and "FLASHINFER" in line


def test_debug_shows_the_traceback(sweep_file: Path) -> None:
    done = run("--debug", "status", "--server", f"http://127.0.0.1:{free_port()}")
    assert done.returncode != 0 and "Traceback" in done.stderr and "CliError" in done.stderr


def test_a_migration_failure_is_one_line(tmp_path: Path) -> None:
    line = one_line(run("migrate", "--database-url", f"sqlite:///{tmp_path}/missing/folder/x.db"))
    assert "could not migrate" in line


@pytest.mark.parametrize(("args", "says"), [
    (("sweeps",), "No such command 'sweeps'. See 'draftbench --help'."),
    (("submit", "--nope"), "No such option: --nope (Possible options: --token). See 'draftbench submit --help'."),
    (("submit",), "Missing argument 'sweep_file'. See 'draftbench submit --help'."),
    (("worker", "--gpus"), "Option '--gpus' requires an argument."),
])
def test_a_mistyped_command_is_one_line_that_names_the_mistake_and_where_help_is(args: tuple[str, ...], says: str) -> None:
    done = run(*args)
    assert done.returncode == 2 and says in one_line(done) and not done.stdout


def test_help_still_prints_and_exits_zero() -> None:
    done = run("status", "--help")
    assert done.returncode == 0 and "Usage: draftbench status" in done.stdout and not done.stderr
