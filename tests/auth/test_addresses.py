"""The address failed authentications count against, from the peer and a trusted proxy's X-Forwarded-For."""

from ipaddress import ip_network

import pytest
from starlette.requests import Request

from app.auth.addresses import client_key

TRUSTED = [ip_network("10.0.0.0/8"), ip_network("fd00::/8")]


def _request(peer: str, *forwarded: str) -> Request:
    headers = [(b"x-forwarded-for", value.encode()) for value in forwarded]
    return Request({"type": "http", "method": "POST", "path": "/", "headers": headers, "client": (peer, 1)})


@pytest.mark.parametrize(
    ("peer", "forwarded", "key"),
    [
        ("192.0.2.1", ["198.51.100.7"], "192.0.2.1"),  # not a proxy of ours: its header is the client's writing
        ("10.0.0.5", [], "10.0.0.5"),
        ("10.0.0.5", ["203.0.113.9, 198.51.100.7"], "198.51.100.7"),
        ("10.0.0.5", ["198.51.100.7, 10.1.2.3"], "198.51.100.7"),  # a second proxy of ours appended itself
        ("10.0.0.5", ["203.0.113.9", "198.51.100.7"], "198.51.100.7"),  # header lines read as one list
        ("10.0.0.5", ["10.9.9.9, 10.1.2.3"], "10.9.9.9"),  # all ours: the request began among them
        ("10.0.0.5", ["198.51.100.7, not-an-address"], "10.0.0.5"),  # garbage is no fresh client
        ("10.0.0.5", [" , ,198.51.100.7 ,"], "198.51.100.7"),
        ("::ffff:10.0.0.5", ["198.51.100.7"], "198.51.100.7"),  # a dual-stack socket's view of an IPv4 proxy
        ("fd00::1", ["2001:db8:1:2:3:4:5:6"], "2001:db8:1:2::/64"),
        ("2001:db8:1:2::9", [], "2001:db8:1:2::/64"),  # one IPv6 subscriber's /64 is one client
        ("testclient", ["198.51.100.7"], "testclient"),
    ],
)
def test_client_key(peer: str, forwarded: list[str], key: str) -> None:
    assert client_key(_request(peer, *forwarded), trusted=TRUSTED) == key


def test_no_trusted_proxy_means_no_forwarded_header_is_read() -> None:
    assert client_key(_request("127.0.0.1", "198.51.100.7"), trusted=[]) == "127.0.0.1"
