"""kube.serving over real sockets on 127.0.0.1: metrics, health, routes, errors, limits, lifecycle."""

from __future__ import annotations

import http.client
import json
import logging
import socket
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, Counter

from apis.errors import ConfigError
from kube import serving

Answer = tuple[int, str, bytes]


@pytest.fixture
def make_server() -> Iterator[Callable[..., serving.Server]]:
    """Started servers on 127.0.0.1:0 (keyword arguments as `serving.Server`'s), stopped after the test."""
    started: list[serving.Server] = []

    def make(**kwargs: Any) -> serving.Server:
        kwargs.setdefault("registry", CollectorRegistry())
        server = serving.Server("test HTTP", host="127.0.0.1", port=0, **kwargs)
        server.start()
        started.append(server)
        return server

    yield make
    for server in started:
        server.stop()


def request(
    server: serving.Server, method: str, target: str, body: bytes | None = None, headers: dict[str, str] | None = None
) -> Answer:
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)
    try:
        connection.request(method, target, body=body, headers=headers or {})
        response = connection.getresponse()
        return response.status, response.getheader("Content-Type") or "", response.read()
    finally:
        connection.close()


def echo(request: serving.Request) -> serving.Response:
    doc = {"params": dict(request.params), "query": dict(request.query), "body": request.body.decode()}
    return serving.Response.json(doc)


# --- /metrics ------------------------------------------------------------------------------------------
def test_metrics_serve_the_registry_given(make_server: Callable[..., serving.Server]) -> None:
    registry = CollectorRegistry()
    Counter("tessera_test_things", "things", registry=registry).inc(3)
    server = make_server(registry=registry)
    status, content_type, body = request(server, "GET", "/metrics")
    assert status == 200 and content_type.startswith("text/plain; version=0.0.4")
    assert "tessera_test_things_total 3.0" in body.decode()


def test_metrics_speak_openmetrics_to_a_scraper_that_asks(make_server: Callable[..., serving.Server]) -> None:
    server = make_server()
    accept = {"Accept": "application/openmetrics-text; version=1.0.0"}
    status, content_type, body = request(server, "GET", "/metrics", headers=accept)
    assert status == 200 and content_type.startswith("application/openmetrics-text")
    assert body.endswith(b"# EOF\n")


# --- health ----------------------------------------------------------------------------------------------
def test_health_is_ok_when_every_check_passes(make_server: Callable[..., serving.Server]) -> None:
    server = make_server(liveness={"loop": lambda: ""}, readiness={"sync": lambda: ""})
    for path in ("/healthz", "/livez", "/readyz"):
        assert request(server, "GET", path) == (200, serving.TEXT, b"ok\n"), path


def test_a_failed_check_answers_500_with_its_name_and_reason(make_server: Callable[..., serving.Server]) -> None:
    server = make_server(liveness={"loop": lambda: "", "workers": lambda: "2 of 4 died"})
    status, _, body = request(server, "GET", "/livez")
    assert (status, body.decode()) == (500, "[-]workers failed: 2 of 4 died\nlivez check failed\n")
    status, _, body = request(server, "GET", "/healthz?verbose")
    assert (status, body.decode()) == (500, "[+]loop ok\n[-]workers failed: 2 of 4 died\nhealthz check failed\n")


def test_verbose_lists_every_check_like_kube_apiserver(make_server: Callable[..., serving.Server]) -> None:
    server = make_server(liveness={"loop": lambda: ""}, readiness={"informer-sync": lambda: ""})
    status, _, body = request(server, "GET", "/readyz?verbose")
    assert (status, body.decode()) == (200, "[+]loop ok\n[+]informer-sync ok\nreadyz check passed\n")


def test_readiness_fails_alone_and_includes_liveness(make_server: Callable[..., serving.Server]) -> None:
    alive = {"loop": ""}
    server = make_server(liveness={"loop": lambda: alive["loop"]}, readiness={"sync": lambda: "not synced"})
    assert request(server, "GET", "/livez")[0] == 200
    assert request(server, "GET", "/readyz")[2] == b"[-]sync failed: not synced\nreadyz check failed\n"
    alive["loop"] = "crashed"
    assert request(server, "GET", "/readyz")[2].startswith(b"[-]loop failed: crashed\n[-]sync failed")


def test_a_check_that_raises_fails_and_is_logged(
    make_server: Callable[..., serving.Server], caplog: pytest.LogCaptureFixture
) -> None:
    def broken() -> str:
        raise RuntimeError("boom")

    server = make_server(liveness={"broken": broken})
    status, _, body = request(server, "GET", "/healthz")
    assert (status, body) == (500, b"[-]broken failed: RuntimeError: boom\nhealthz check failed\n")
    (record,) = [r for r in caplog.records if r.getMessage() == "Health check raised"]
    assert record.exc_info is not None and record.check == "broken"


# --- routes -----------------------------------------------------------------------------------------------
def test_routes_get_path_parameters_query_and_body(make_server: Callable[..., serving.Server]) -> None:
    server = make_server(routes=[serving.Route("PUT", "/apis/v1/nodes/:nodeName/flags/:flag", echo)])
    status, content_type, body = request(server, "PUT", "/apis/v1/nodes/gpu%2D3/flags/v/?a=1&a=2&verbose", b"4")
    assert (status, content_type) == (200, serving.JSON)
    assert json.loads(body) == {
        "params": {"nodeName": "gpu-3", "flag": "v"},
        "query": {"a": ["1", "2"], "verbose": [""]},
        "body": "4",
    }


def test_an_unknown_path_is_404_listing_what_is_served(make_server: Callable[..., serving.Server]) -> None:
    server = make_server(routes=[serving.Route("GET", "/debug/x", echo)])
    status, _, body = request(server, "GET", "/debug/x/y")
    assert status == 404
    assert body.decode() == "no such path: /debug/x/y; served here: /debug/x, /healthz, /livez, /metrics, /readyz\n"


def test_a_known_path_with_another_method_is_405_naming_the_allowed_ones(
    make_server: Callable[..., serving.Server],
) -> None:
    server = make_server(routes=[serving.Route("PUT", "/f", echo), serving.Route("POST", "/f", echo)])
    status, _, body = request(server, "DELETE", "/f")
    assert (status, body) == (405, b"method DELETE not allowed on /f; use POST, PUT\n")


def test_errors_are_spelled_by_the_component(make_server: Callable[..., serving.Server]) -> None:
    def koordinator(status: int, message: str) -> serving.Response:
        return serving.Response.json({"message": message}, status)

    server = make_server(error=koordinator)
    status, content_type, body = request(server, "GET", "/nope")
    assert (status, content_type) == (404, serving.JSON)
    assert json.loads(body)["message"].startswith("no such path: /nope")
    # Health answers stay kube-apiserver's plain text.
    assert request(server, "GET", "/healthz") == (200, serving.TEXT, b"ok\n")


def test_a_handler_bug_is_logged_answered_500_and_the_server_goes_on(
    make_server: Callable[..., serving.Server], caplog: pytest.LogCaptureFixture
) -> None:
    def buggy(request: serving.Request) -> serving.Response:
        raise KeyError("nodeName")

    server = make_server(routes=[serving.Route("GET", "/bug", buggy)])
    with caplog.at_level(logging.ERROR, logger="kube.serving"):
        assert request(server, "GET", "/bug") == (500, serving.TEXT, b"KeyError: 'nodeName'\n")
    (record,) = [r for r in caplog.records if r.getMessage() == "HTTP handler failed"]
    assert record.exc_info is not None and record.path == "/bug"
    assert request(server, "GET", "/healthz")[0] == 200


def test_a_route_may_not_shadow_another() -> None:
    with pytest.raises(ValueError, match="route GET /metrics given twice"):
        serving.Server(
            "x", host="127.0.0.1", port=0, registry=CollectorRegistry(), routes=[serving.Route("GET", "/metrics", echo)]
        )


def test_routes_lists_the_built_in_ones_and_the_components() -> None:
    route = serving.Route("GET", "/debug/x", echo)
    server = serving.Server("x", host="127.0.0.1", port=0, registry=CollectorRegistry(), routes=[route])
    assert [r.path for r in server.routes] == ["/metrics", "/healthz", "/livez", "/readyz", "/debug/x"]
    assert server.dispatch("GET", "/debug/x?q=1").status == 200  # the same routing, no socket


# --- limits -----------------------------------------------------------------------------------------------
def test_bodies_up_to_the_limit_are_read_larger_ones_are_413(make_server: Callable[..., serving.Server]) -> None:
    server = make_server(routes=[serving.Route("POST", "/b", echo)])
    status, _, body = request(server, "POST", "/b", b"x" * serving.MAX_BODY)
    assert status == 200 and len(json.loads(body)["body"]) == serving.MAX_BODY
    status, _, body = request(server, "POST", "/b", b"x" * (serving.MAX_BODY + 1))
    assert (status, body) == (413, f"request body over {serving.MAX_BODY} bytes\n".encode())


def test_a_bad_content_length_is_400(make_server: Callable[..., serving.Server]) -> None:
    server = make_server(routes=[serving.Route("POST", "/b", echo)])
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
        sock.sendall(b"POST /b HTTP/1.1\r\nHost: x\r\nContent-Length: -3\r\n\r\n")
        assert sock.recv(4096).startswith(b"HTTP/1.1 400 ")


def test_a_silent_client_does_not_block_others(make_server: Callable[..., serving.Server]) -> None:
    server = make_server(routes=[serving.Route("POST", "/b", echo)])
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as silent:
        silent.sendall(b"POST /b HTTP/1.1\r\nContent-Length: 10\r\n\r\n1")  # and never the rest
        assert request(server, "GET", "/healthz") == (200, serving.TEXT, b"ok\n")


# --- lifecycle -------------------------------------------------------------------------------------------
def test_port_0_binds_a_free_port_and_the_address_says_which(make_server: Callable[..., serving.Server]) -> None:
    server = make_server()
    assert server.port != 0 and server.address == f"127.0.0.1:{server.port}"
    server.start()  # already serving: nothing changes
    assert request(server, "GET", "/healthz")[0] == 200


def test_a_taken_port_fails_at_start(make_server: Callable[..., serving.Server]) -> None:
    first = make_server()
    second = serving.Server("second HTTP", host="127.0.0.1", port=first.port, registry=CollectorRegistry())
    with pytest.raises(ConfigError, match=rf"second HTTP: cannot listen on 127\.0\.0\.1:{first.port}: ") as raised:
        second.start()
    assert isinstance(raised.value.__cause__, OSError)
    second.stop()  # never started: nothing to do


def test_stop_closes_the_port_is_idempotent_and_start_serves_again() -> None:
    server = serving.Server("x", host="127.0.0.1", port=0, registry=CollectorRegistry())
    server.start()
    port = server.port
    server.stop()
    server.stop()
    assert not any(t.name == "x" for t in threading.enumerate())
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=5).close()
    server.start()
    try:
        assert request(server, "GET", "/healthz")[0] == 200
    finally:
        server.stop()
