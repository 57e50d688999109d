"""Transport security and the launch policy through the generated Python client: TLS with a
certificate generated at test time, the bearer token written by `agent-harness token`, and
the refusal of StartConfig env/args a client may not set."""

from __future__ import annotations

import re
import stat

import grpc
import pytest

from agentharness.v1 import events_pb2
from agentharness.v1 import session_service_pb2 as pb
from agentharness.v1 import session_service_pb2_grpc as pb_grpc
from test_session import IDLE, content_text, is_kind, new_id, start, streams, subscribe, wait_status  # noqa: F401


def _stub(channel: grpc.Channel) -> pb_grpc.SessionServiceStub:
    return pb_grpc.SessionServiceStub(channel)


def test_token_file(tls_harness):
    """`agent-harness token --out FILE` wrote 256 random bits as hex, readable by its owner
    only, and printed how to pass it to serve and to clients."""
    t = tls_harness
    mode = stat.S_IMODE(t.token_file.stat().st_mode)
    assert mode == 0o600, f"token file mode {oct(mode)}, want 0o600"
    assert re.fullmatch(r"[0-9a-f]{64}", t.token), f"token file holds {t.token_file.read_text()!r}"
    assert f"--auth-token-file {t.token_file}" in t.token_stdout, t.token_stdout
    assert "authorization: Bearer" in t.token_stdout, t.token_stdout


def test_tls_requires_the_token(tls_harness):
    """Over TLS trusting the generated certificate, a call without the token, or with another
    one, is UNAUTHENTICATED (unary and streaming); plaintext to the TLS port, and TLS not
    trusting the certificate, reach nothing."""
    t = tls_harness
    addr = t.harness.addr
    tls_only = grpc.ssl_channel_credentials(root_certificates=t.cert_pem)
    with grpc.secure_channel(addr, tls_only) as ch:
        stub = _stub(ch)
        with pytest.raises(grpc.RpcError) as e:
            stub.ListSessions(pb.ListSessionsRequest(), timeout=10)
        assert e.value.code() == grpc.StatusCode.UNAUTHENTICATED, e.value
        with pytest.raises(grpc.RpcError) as e:
            stub.Start(
                pb.StartRequest(session_id=new_id("tls-anon"), config=events_pb2.StartConfig(prompt="TEXT nope")),
                timeout=10,
            )
        assert e.value.code() == grpc.StatusCode.UNAUTHENTICATED, e.value
        with pytest.raises(grpc.RpcError) as e:
            next(iter(stub.Subscribe(pb.SubscribeRequest(session_id=new_id("tls-anon")), timeout=10)))
        assert e.value.code() == grpc.StatusCode.UNAUTHENTICATED, e.value

    wrong = grpc.composite_channel_credentials(
        grpc.ssl_channel_credentials(root_certificates=t.cert_pem),
        grpc.access_token_call_credentials("0" * 64),
    )
    with grpc.secure_channel(addr, wrong) as ch:
        with pytest.raises(grpc.RpcError) as e:
            _stub(ch).ListSessions(pb.ListSessionsRequest(), timeout=10)
        assert e.value.code() == grpc.StatusCode.UNAUTHENTICATED, e.value

    # Plaintext gRPC to the TLS port: no connection, so no answer at all.
    with grpc.insecure_channel(addr) as ch:
        with pytest.raises(grpc.RpcError) as e:
            _stub(ch).ListSessions(pb.ListSessionsRequest(), timeout=5)
        assert e.value.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED), e.value

    # TLS trusting only the default roots rejects the self-signed certificate: the channels
    # above really talk TLS to the certificate generated for this test.
    with grpc.secure_channel(addr, grpc.ssl_channel_credentials()) as ch:
        with pytest.raises(grpc.RpcError) as e:
            _stub(ch).ListSessions(pb.ListSessionsRequest(), timeout=5)
        assert e.value.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED), e.value


def test_tls_with_token_runs_a_turn(tls_harness, streams):
    """Over TLS with the token: Start a session and follow its turn through Subscribe."""
    h = tls_harness.harness
    sid = new_id("tls")
    assert h.stub.ListSessions(pb.ListSessionsRequest(), timeout=10) is not None
    s = subscribe(h, streams, sid, 0)
    st = start(h, sid, "TEXT python over tls")
    ready, _ = s.wait_event(is_kind("run_ready"), "run_ready")
    assert ready.run_id == st.run_id
    c, i = s.wait_event(is_kind("content"), "content")
    assert content_text(c) == "python over tls"
    end, _ = s.wait_event(is_kind("turn_end"), "turn_end", start=i)
    assert not end.turn_end.is_error, end.turn_end
    wait_status(h, sid, IDLE)
    listed = h.stub.ListSessions(pb.ListSessionsRequest(), timeout=10)
    assert sid in [x.session_id for x in listed.sessions]


@pytest.mark.parametrize(
    "name, config, field",
    [
        pytest.param(name, config, field, id=name)
        for name, config, field in [
            ("env", dict(env={"ANTHROPIC_BASE_URL": "http://127.0.0.1:9"}), "config.env.ANTHROPIC_BASE_URL"),
            ("args", dict(args=["--dangerously-skip-permissions"]), "config.args[0]"),
            ("args-later", dict(args=["--max-turns", "3", "--permission-mode", "bypassPermissions"]), "config.args[2]"),
            ("env-node", dict(env={"NODE_OPTIONS": "--require /tmp/x.js"}), "config.env.NODE_OPTIONS"),
        ]
    ],
)
def test_start_config_policy_refuses(harness, name, config, field):
    """Without --allow-env/--allow-arg, env a client may not set and args outside the safe
    set are INVALID_ARGUMENT naming the field, and no session comes into being."""
    sid = new_id(f"policy-{name}")
    with pytest.raises(grpc.RpcError) as e:
        harness.stub.Start(
            pb.StartRequest(
                session_id=sid,
                config=events_pb2.StartConfig(prompt="TEXT nope", cwd=harness.work_dir, **config),
            ),
            timeout=30,
        )
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT, e.value
    assert field in e.value.details(), e.value.details()
    with pytest.raises(grpc.RpcError) as e:
        harness.stub.GetSession(pb.GetSessionRequest(session_id=sid), timeout=10)
    assert e.value.code() == grpc.StatusCode.NOT_FOUND, e.value


def test_start_config_policy_accepts_safe_args(harness, streams):
    """A flag of the default safe set passes through to the CLI's run."""
    sid = new_id("policy-ok")
    s = subscribe(harness, streams, sid, 0)
    harness.stub.Start(
        pb.StartRequest(
            session_id=sid,
            config=events_pb2.StartConfig(prompt="TEXT allowed args", cwd=harness.work_dir, args=["--max-turns", "3"]),
        ),
        timeout=30,
    )
    rs, _ = s.wait_event(is_kind("run_start"), "run_start")
    assert list(rs.run_start.config.args) == ["--max-turns", "3"]
    c, i = s.wait_event(is_kind("content"), "content")
    assert content_text(c) == "allowed args"
    s.wait_event(is_kind("turn_end"), "turn_end", start=i)
