"""Helpers shared by the web tests: a seeded results database and a real server process."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from bandwall.measure.bench import Store

CHROMIUM = "/usr/bin/chromium"
#: Flags Debian's chromium needs on this machine (root, no GPU, no network).
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
]


def seed_db(path: Path) -> int:
    """A results database with one finished collectives run of two sizes."""
    with Store(path) as store:
        rid = store.start_run("collectives", 2, "gloo", {"hostname": "t"}, {"torch": "x"}, {})
        for size in (1 << 20, 4 << 20):
            store.add_result(
                rid,
                {
                    "op": "all_reduce",
                    "size_bytes": size,
                    "count": size // 4,
                    "dtype": "float32",
                    "inplace": 0,
                    "iters": 3,
                    "time_p10_s": 0.01,
                    "time_median_s": 0.011,
                    "time_p90_s": 0.012,
                    "time_p99_s": 0.013,
                    "time_min_s": 0.01,
                    "algbw_GBps": size / 0.011 / 1e9,
                    "busbw_GBps": size / 0.011 / 1e9,
                    "wrong": 0,
                },
            )
        store.finish_run(rid, "complete")
        return rid


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def running_server(*args: str, token: str | None = None) -> Iterator[str]:
    """`bandwall serve ARGS` on a free loopback port; yields its base URL, stops it after."""
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "bandwall", "serve", "--port", str(port), *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        deadline = time.monotonic() + 30
        while True:
            try:
                req = urllib.request.Request(base + "/api/presets", headers=headers)
                urllib.request.urlopen(req, timeout=1).close()
                break
            except (OSError, urllib.error.URLError):
                if time.monotonic() > deadline or server.poll() is not None:
                    raise RuntimeError("bandwall serve did not start") from None
                time.sleep(0.1)
        yield base
    finally:
        server.terminate()
        server.wait(timeout=10)
