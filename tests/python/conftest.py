"""Fixtures of the Python end-to-end suite: the real agent-harness server release binary, the
real claude, codex and gemini CLIs, and the scripted fake Messages, Responses and Gemini APIs, all on loopback, driven only through the
generated Python client in gen/python (agentharness.v1)."""

from __future__ import annotations

import contextlib
import hashlib
import os
import pathlib
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

import grpc
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
# The generated package is used from the tree (tests/gen/run.sh checks that it also installs
# as a distribution), so the tests always exercise the committed stubs.
sys.path.insert(0, str(ROOT / "gen" / "python"))

from agentharness.v1 import session_service_pb2 as pb  # noqa: E402
from agentharness.v1 import session_service_pb2_grpc as pb_grpc  # noqa: E402



def _pg_store_args(data_dir):
    """`--store-url` of the server whose data dir is `data_dir` when the suite
    runs on PostgreSQL (tests/run-all.sh sets AGENT_HARNESS_TEST_PG_URL): a
    schema of its own in the shared database, named after the data dir, so a
    restarted server finds its log again."""
    base = os.environ.get("AGENT_HARNESS_TEST_PG_URL")
    if not base:
        return []
    schema = "t_" + hashlib.sha1(str(data_dir).encode()).hexdigest()[:16]
    return ["--store-url", f"{base}?options=-c%20search_path%3D{schema}"]

def _bin(env_var: str, name: str) -> str:
    return os.environ.get(env_var) or str(ROOT / "target" / "release" / name)


def _child_env(home: str, base_url: str) -> dict[str, str]:
    """This process's environment without anything that could point the CLI at the real API
    or make it think it runs inside Claude Code, plus the fake API's settings."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not (
            k.startswith(("ANTHROPIC_", "CLAUDE_CODE_", "AGENT_HARNESS_", "CODEX_", "OPENAI_", "GEMINI_", "GOOGLE_"))
            or k in ("CLAUDECODE", "HOME")
        )
    }
    env.update(
        HOME=home,
        ANTHROPIC_BASE_URL=base_url,
        ANTHROPIC_API_KEY="test",
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
        # The key variable the fake's Codex provider names (any value is accepted).
        FAKE_API_KEY="test",
    )
    return env


def _free_port() -> int:
    # The server gets the port as --listen; the short window in which another process could
    # take it is acceptable on a test machine.
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _tail(path: pathlib.Path, n: int = 60) -> str:
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return ""
    return "\n".join(lines[-n:])


class Harness:
    """A running server: the generated stub, the CLI's working directory, the logs."""

    def __init__(self, addr: str, stub: pb_grpc.SessionServiceStub, work_dir: str, logs: list[pathlib.Path]):
        self.addr = addr
        self.stub = stub
        self.work_dir = work_dir
        self.logs = logs
        # The server's --idle-timeout in seconds when a fixture set a short one.
        self.idle_timeout_s: float | None = None


class FakeApi:
    """The running fake Messages API every server's CLI talks to. It writes each request it
    gets to dump_dir (FAKE_MESSAGES_API_DUMP_DIR), so a test can read what the CLI sent.
    codex_home is the CODEX_HOME it wrote (--codex-home): its config.toml points Codex at the
    Responses API the same fake serves. gemini_env is the environment it printed for Gemini
    CLI (--gemini-home: a HOME whose settings point Gemini at the fake's Gemini API), as
    KEY=VALUE words for `env`."""

    def __init__(self, base_url: str, log: pathlib.Path, dump_dir: pathlib.Path, codex_home: pathlib.Path, gemini_env: str):
        self.base_url = base_url
        self.log = log
        self.dump_dir = dump_dir
        self.codex_home = codex_home
        self.gemini_env = gemini_env


@pytest.fixture(scope="session")
def fake_api():
    with tempfile.TemporaryDirectory(prefix="agent-harness-py-e2e-fake-") as tmp:
        log = pathlib.Path(tmp) / "fake-api.log"
        dump_dir = pathlib.Path(tmp) / "requests"
        dump_dir.mkdir()
        codex_home = pathlib.Path(tmp) / "codex-home"
        # The fake API exits when its stdin closes, so it dies with this process whatever
        # happens.
        with open(log, "wb") as flog:
            fake = subprocess.Popen(
                [_bin("FAKE_MESSAGES_API_BIN", "fake-messages-api"), "--port", "0", "--exit-on-stdin-eof",
                 "--codex-home", str(codex_home), "--gemini-home", str(pathlib.Path(tmp) / "gemini-home")],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=flog,
                env={**os.environ, "FAKE_MESSAGES_API_DUMP_DIR": str(dump_dir)},
            )
        try:
            line = fake.stdout.readline().decode().strip()
            assert line.startswith("listening "), f"fake-messages-api said {line!r}"
            gemini = fake.stdout.readline().decode().strip()
            assert gemini.startswith("gemini-env "), f"fake-messages-api's second line {gemini!r}"
            yield FakeApi(line.removeprefix("listening "), log, dump_dir, codex_home, gemini.removeprefix("gemini-env "))
        finally:
            fake.stdin.close()
            fake.wait(timeout=10)


@contextlib.contextmanager
def _serve(fake: FakeApi, prefix: str, *extra: str, credentials: grpc.ChannelCredentials | None = None):
    """Runs the server binary (home, CLI working directory, data dir and log in a temp dir,
    plus extra flags) until the block ends, then shuts it down with SIGTERM. The stub's
    channel is plaintext, or secure with `credentials` (TLS, and a token if composed in)."""
    claude_bin = os.environ.get("CLAUDE_BIN")
    if not claude_bin:
        pytest.fail("CLAUDE_BIN is not set: source .tools/env.sh (tests/setup.sh writes it)")
    # A missing codex fails the suite: every client must see Codex sessions.
    codex_bin = os.environ.get("CODEX_BIN")
    if not codex_bin:
        pytest.fail("CODEX_BIN is not set: source .tools/env.sh (tests/setup.sh writes it)")
    # And a missing gemini: every client must see ACP sessions (the agent "gemini").
    gemini_bin = os.environ.get("GEMINI_BIN")
    if not gemini_bin:
        pytest.fail("GEMINI_BIN is not set: source .tools/env.sh (tests/setup.sh writes it)")
    with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
        tmp_path = pathlib.Path(tmp)
        home = tmp_path / "home"
        work = tmp_path / "work"
        home.mkdir()
        work.mkdir()
        server_log = tmp_path / "server.log"
        server = None
        channel = None
        try:
            addr = f"127.0.0.1:{_free_port()}"
            with open(server_log, "wb") as slog:
                server = subprocess.Popen(
                    [
                        _bin("AGENT_HARNESS_BIN", "agent-harness"),
                        "serve",
                        "--listen", addr,
                        "--data-dir", str(tmp_path / "data"),
                        "--adapter", "interactive",
                        "--claude-bin", claude_bin,
                        "--codex-bin", codex_bin,
                        "--codex-home", str(fake.codex_home),
                        "--acp-agent", f"gemini=env {fake.gemini_env} {gemini_bin} --acp",
                        *_pg_store_args(tmp_path / "data"),
                        *extra,
                    ],
                    env=_child_env(str(home), fake.base_url),
                    # A Start without cwd runs the CLI in the server's working directory.
                    cwd=str(work),
                    stdout=slog,
                    stderr=subprocess.STDOUT,
                )
            channel = grpc.secure_channel(addr, credentials) if credentials else grpc.insecure_channel(addr)
            stub = pb_grpc.SessionServiceStub(channel)
            deadline = time.monotonic() + 30
            while True:
                try:
                    stub.ListSessions(pb.ListSessionsRequest(), timeout=1)
                    break
                except grpc.RpcError as e:
                    if server.poll() is not None:
                        pytest.fail(f"agent-harness exited {server.returncode} before serving:\n{_tail(server_log)}")
                    if time.monotonic() > deadline:
                        pytest.fail(f"agent-harness not serving after 30 s ({e.code()}):\n{_tail(server_log)}")
                    time.sleep(0.1)
            yield Harness(addr, stub, str(work), [server_log, fake.log])
        finally:
            if channel is not None:
                channel.close()
            if server is not None:
                # SIGTERM is the server's graceful shutdown; it must end within seconds (and
                # before the temp dir with the CLI's home goes away).
                server.send_signal(signal.SIGTERM)
                try:
                    server.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    server.kill()
                    server.wait()
                    pytest.fail("agent-harness did not exit 15 s after SIGTERM")


@pytest.fixture(scope="session")
def harness(fake_api):
    """The server most tests share, with default flags."""
    with _serve(fake_api, "agent-harness-py-e2e-") as h:
        yield h


# The --idle-timeout of idle_harness, in seconds: short, so a test can wait it out.
IDLE_TIMEOUT_S = 2


@pytest.fixture
def idle_harness(fake_api):
    """A server of its own for one test, with a short --idle-timeout (h.idle_timeout_s)."""
    with _serve(fake_api, "agent-harness-py-e2e-idle-", "--idle-timeout", f"{IDLE_TIMEOUT_S}s") as h:
        h.idle_timeout_s = IDLE_TIMEOUT_S
        yield h


@pytest.fixture
def skip_harness(fake_api):
    """A server of its own for one test with --permissions skip: the CLI runs every tool
    unasked (it writes files without a permission prompt)."""
    with _serve(fake_api, "agent-harness-py-e2e-skip-", "--permissions", "skip") as h:
        yield h


class TlsHarness:
    """A server serving TLS with a token (tls_harness): its Harness (whose stub sends the
    token over TLS), the PEM certificate it serves, and the token file and what
    `agent-harness token` printed."""

    def __init__(self, harness: Harness, cert_pem: bytes, token_file: pathlib.Path, token_stdout: str):
        self.harness = harness
        self.cert_pem = cert_pem
        self.token_file = token_file
        self.token_stdout = token_stdout

    @property
    def token(self) -> str:
        return self.token_file.read_text().strip()


def _self_signed(directory: pathlib.Path) -> tuple[pathlib.Path, pathlib.Path]:
    """A fresh self-signed P-256 certificate for localhost and 127.0.0.1 (one day), made with
    the openssl CLI: (cert.pem, key.pem)."""
    cert, key = directory / "cert.pem", directory / "key.pem"
    openssl = shutil.which("openssl") or "/usr/bin/openssl"
    subprocess.run(
        [
            openssl, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
            "-nodes", "-days", "1", "-subj", "/CN=localhost",
            "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1",
            "-keyout", str(key), "-out", str(cert),
        ],
        check=True, capture_output=True, timeout=60,
    )
    return cert, key


@pytest.fixture(scope="module")
def tls_harness(fake_api, tmp_path_factory):
    """A server of its own started with --tls-cert/--tls-key (a certificate generated here)
    and --auth-token-file (written by `agent-harness token --out`); its stub connects over TLS
    trusting that certificate and sends the token (`authorization: Bearer`)."""
    tmp = tmp_path_factory.mktemp("tls")
    cert, key = _self_signed(tmp)
    token_file = tmp / "harness.token"
    out = subprocess.run(
        [_bin("AGENT_HARNESS_BIN", "agent-harness"), "token", "--out", str(token_file)],
        check=True, capture_output=True, text=True, timeout=30,
    )
    cert_pem = cert.read_bytes()
    creds = grpc.composite_channel_credentials(
        grpc.ssl_channel_credentials(root_certificates=cert_pem),
        grpc.access_token_call_credentials(token_file.read_text().strip()),
    )
    with _serve(
        fake_api, "agent-harness-py-e2e-tls-",
        "--tls-cert", str(cert), "--tls-key", str(key), "--auth-token-file", str(token_file),
        credentials=creds,
    ) as h:
        yield TlsHarness(h, cert_pem, token_file, out.stdout)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """On a failure, attach the tails of the server and fake API logs to the report."""
    outcome = yield
    report = outcome.get_result()
    if not report.failed or not hasattr(item, "funcargs"):
        return
    for name in ("harness", "idle_harness", "skip_harness", "tls_harness"):
        h = item.funcargs.get(name)
        h = getattr(h, "harness", h)  # tls_harness wraps a Harness
        if isinstance(h, Harness):
            for path in h.logs:
                report.sections.append((f"{name} {path.name} (tail)", _tail(path)))
