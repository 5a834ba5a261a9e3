"""The app needs no network: every page runs while connections to anything but this machine are refused."""
from __future__ import annotations

import socket

import pytest

from conftest import ROOT, app_test

PAGES = sorted(f"pages/{p.name}" for p in (ROOT / "pages").glob("*.py"))
LOCAL = {"127.0.0.1", "localhost", "::1"}


class NetworkBlocked(OSError):
    pass


@pytest.fixture
def no_network(monkeypatch):
    """Refuse every internet connection; returns the list of addresses something tried to reach."""
    attempts = []
    real_connect, real_connect_ex = socket.socket.connect, socket.socket.connect_ex

    def refuse(sock, address) -> None:
        if sock.family in (socket.AF_INET, socket.AF_INET6) and address[0] not in LOCAL:
            attempts.append(address)
            raise NetworkBlocked(f"an offline test tried to reach {address}")

    def connect(sock, address):
        refuse(sock, address)
        return real_connect(sock, address)

    def connect_ex(sock, address):
        refuse(sock, address)
        return real_connect_ex(sock, address)

    def create_connection(address, *args, **kwargs):
        if address[0] not in LOCAL:
            attempts.append(address)
            raise NetworkBlocked(f"an offline test tried to reach {address}")
        return real_create_connection(address, *args, **kwargs)

    real_create_connection = socket.create_connection
    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.setattr(socket.socket, "connect_ex", connect_ex)
    monkeypatch.setattr(socket, "create_connection", create_connection)
    return attempts


def test_the_guard_refuses_the_internet_and_allows_this_machine(no_network):
    with pytest.raises(NetworkBlocked):
        socket.create_connection(("93.184.216.34", 80), timeout=1)
    with socket.socket() as s, pytest.raises(NetworkBlocked):
        s.connect(("2.2.2.2", 443))
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        with socket.create_connection(server.getsockname(), timeout=1):
            pass
    assert no_network == [("93.184.216.34", 80), ("2.2.2.2", 443)]


@pytest.mark.parametrize("page", PAGES)
def test_every_page_runs_offline(no_network, page):
    at = app_test(page=page, text="The dog bit the man and the man bit the dog", scheme="sinusoidal")
    assert not at.exception, [e.value for e in at.exception]
    assert at.title, f"{page} drew no title"
    assert no_network == [], f"{page} tried to reach {no_network}"
