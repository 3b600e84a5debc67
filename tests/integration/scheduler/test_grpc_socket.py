"""Where the gRPC API listens: a stale unix socket is replaced, a live one never taken over, an
unsafe directory refused; over TCP the bound port is reported, and TLS works with `tessera explain`."""

from __future__ import annotations

import argparse
import socket
import threading
from pathlib import Path

import grpc
import pytest

from apis.errors import ConfigError
from apiserver.pki import ensure_serving_cert
from cli import explain
from proto.scheduler.v1 import scheduler_pb2 as pb
from proto.scheduler.v1 import scheduler_pb2_grpc
from scheduler.core import Scheduler
from scheduler.service import GRPCSettings, TLSSettings
from scheduler.service.grpc_server import GRPCServer
from scheduler.service.inspector import Inspector
from scheduler.service.queue import SchedulingQueue

pytestmark = pytest.mark.integration


def inspector() -> Inspector:
    scheduler = Scheduler()
    return Inspector(
        lock=threading.RLock(),
        cache=scheduler.cache,
        frameworks=scheduler.frameworks,
        queue=SchedulingQueue(interest=lambda plugins, event: True),
        lookup=lambda namespace, name: None,
        fetch=lambda namespace, name: None,
        is_leader=lambda: False,
    )


def list_pending(target: str) -> pb.ListPendingResponse:
    with grpc.insecure_channel(target) as channel:
        return scheduler_pb2_grpc.SchedulerStub(channel).ListPending(pb.ListPendingRequest(), timeout=10)


def test_a_stale_socket_is_replaced_and_a_live_one_is_not_taken_over(tmp_path: Path) -> None:
    path = tmp_path / "run" / "scheduler.sock"
    path.parent.mkdir(mode=0o700)
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(str(path))
    stale.close()  # the file stays behind, as after a crash
    server = GRPCServer(GRPCSettings(address=f"unix://{path}"), inspector())
    server.start()
    try:
        assert oct(path.stat().st_mode & 0o777) == oct(0o660)
        assert list_pending(server.address).leader is False
        with pytest.raises(ConfigError, match="another scheduler is serving"):
            GRPCServer(GRPCSettings(address=f"unix://{path}"), inspector()).start()
    finally:
        server.stop()
    assert not path.exists()


def test_a_directory_others_can_write_is_refused(tmp_path: Path) -> None:
    open_dir = tmp_path / "open"
    open_dir.mkdir()
    open_dir.chmod(0o777)
    with pytest.raises(ConfigError, match="writable by others"):
        GRPCServer(GRPCSettings(address=f"unix://{open_dir}/s.sock"), inspector()).start()


def test_tcp_on_port_zero_reports_the_port() -> None:
    server = GRPCServer(GRPCSettings(address="127.0.0.1:0"), inspector())
    server.start()
    try:
        assert server.port > 0 and server.address == f"127.0.0.1:{server.port}"
        assert list_pending(server.address).pods == []
    finally:
        server.stop()


def test_tls_on_tcp_and_tessera_explain_with_the_ca(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cert = ensure_serving_cert(tmp_path / "pki", "127.0.0.1")
    (tmp_path / "ca.crt").write_bytes(cert.ca_pem)
    tls = TLSSettings(cert.cert_path, cert.key_path)
    server = GRPCServer(GRPCSettings(address="127.0.0.1:0", tls=tls), inspector())
    server.start()
    try:
        credentials = grpc.ssl_channel_credentials(root_certificates=cert.ca_pem)
        with grpc.secure_channel(server.address, credentials) as channel:
            stub = scheduler_pb2_grpc.SchedulerStub(channel)
            assert stub.ListPending(pb.ListPendingRequest(), timeout=10).pods == []
        with pytest.raises(grpc.RpcError):
            list_pending(server.address)  # plain text to a TLS port
        parser = argparse.ArgumentParser()
        explain.add_arguments(parser)
        args = parser.parse_args(["ghost", "--scheduler", server.address, "--tls-ca", str(tmp_path / "ca.crt")])
        assert explain.run(args) == 1  # it answered: the pod does not exist
        assert capsys.readouterr().out.startswith("Pod default/ghost: not found")
    finally:
        server.stop()
