"""Runs example.py (the Python example of docs/clients.md) against the test server."""

import os
import pathlib
import subprocess
import sys
import uuid

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_readme_example(harness):
    env = dict(os.environ, PYTHONPATH=str(ROOT / "gen" / "python"))
    out = subprocess.run(
        [sys.executable, str(ROOT / "tests" / "python" / "example.py"), harness.addr,
         f"py-example-{uuid.uuid4().hex[:8]}", "TEXT hello from the Python example"],
        env=env, capture_output=True, text=True, timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "hello from the Python example"


def test_readme_example_prints_a_6mb_answer_whole(harness):
    """The answer's event is streamed cut down (over 1 MiB); the example fetches it whole."""
    env = dict(os.environ, PYTHONPATH=str(ROOT / "gen" / "python"))
    out = subprocess.run(
        [sys.executable, str(ROOT / "tests" / "python" / "example.py"), harness.addr,
         f"py-example-big-{uuid.uuid4().hex[:8]}", "BIG 6000000"],
        env=env, capture_output=True, text=True, timeout=180,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    answer = out.stdout.rstrip("\n")
    assert len(answer) == 6_000_000
    assert answer.startswith("big 0 big 1 big 2 ")
