"""The client address that failed authentications count against: X-Forwarded-For only from trusted proxies."""

from collections.abc import Sequence
from ipaddress import IPv4Address, IPv4Network, IPv6Address, IPv6Network, ip_address, ip_network

from starlette.requests import Request

Networks = Sequence[IPv4Network | IPv6Network]
# One IPv6 subscriber gets a /64 (RFC 6177): its addresses share one bucket, or each would be a fresh one.
IPV6_BUCKET_PREFIX = 64


def client_key(request: Request, *, trusted: Networks) -> str:
    """The address (an IPv6 client's /64) that this request's failed authentications count against.

    The peer's own address, unless the peer is a trusted proxy: then the right-most X-Forwarded-For
    entry that is not a trusted proxy. Each proxy appends the address it heard from, so whatever
    stands left of that entry is the client's own writing and is never read. When every entry is a
    trusted proxy the left-most stands; an entry that is not an address (a proxy passing garbage
    on) is not taken for a fresh client: the peer stands.
    """
    peer = request.client.host if request.client else "unknown"
    if not _within(_parse(peer), trusted):
        return _bucket(peer)
    hops = [hop.strip() for value in request.headers.getlist("x-forwarded-for") for hop in value.split(",")]
    hops = [hop for hop in hops if hop]
    for hop in reversed(hops):
        address = _parse(hop)
        if address is None:
            return _bucket(peer)
        if not _within(address, trusted):
            return _bucket(hop)
    return _bucket(hops[0] if hops else peer)


def _parse(text: str) -> IPv4Address | IPv6Address | None:
    try:
        address = ip_address(text)
    except ValueError:
        return None
    # A dual-stack socket shows IPv4 peers as ::ffff:a.b.c.d: they are the IPv4 address.
    return address.ipv4_mapped or address if isinstance(address, IPv6Address) else address


def _within(address: IPv4Address | IPv6Address | None, trusted: Networks) -> bool:
    return address is not None and any(address in network for network in trusted)


def _bucket(text: str) -> str:
    address = _parse(text)
    if address is None:
        return text
    if isinstance(address, IPv6Address):
        return str(ip_network(f"{address}/{IPV6_BUCKET_PREFIX}", strict=False))
    return str(address)
