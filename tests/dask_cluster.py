"""A real Dask cluster on 127.0.0.1 for the tests: one `dask scheduler` and `dask worker` processes of this
environment, started and stopped here (no nanny: a worker killed stays dead, as a lost machine would)."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

DASK = Path(sys.executable).with_name("dask")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class LocalCluster:
    """`with LocalCluster(workers=2) as cluster:` ... `cluster.address`, `cluster.kill_worker(0)`."""

    def __init__(self, workers: int = 2, *, logs: Path, config: dict[str, str] | None = None) -> None:
        self.logs = logs
        self.logs.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.address = f"tcp://127.0.0.1:{self.port}"
        # dask's own settings as environment variables (DASK_SCHEDULER__ALLOWED_FAILURES=1, ...)
        self.env = {**os.environ, **(config or {}), "PYTHONUNBUFFERED": "1"}
        self.scheduler: subprocess.Popen | None = None
        self.workers: list[subprocess.Popen] = []
        self.wanted = workers

    def __enter__(self) -> LocalCluster:
        self.start_scheduler()
        for _ in range(self.wanted):
            self.add_worker()
        self.wait_for_workers(self.wanted)
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _start(self, name: str, *args: str) -> subprocess.Popen:
        log = open(self.logs / f"{name}.log", "ab")  # noqa: SIM115 (closed with the process)
        process = subprocess.Popen([str(DASK), *args], stdout=log, stderr=subprocess.STDOUT, env=self.env,
                                   start_new_session=True)
        log.close()
        return process

    def start_scheduler(self) -> None:
        self.scheduler = self._start("scheduler", "scheduler", "--host", "127.0.0.1", "--port", str(self.port),
                                     "--no-dashboard")
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                if self.scheduler.poll() is not None:
                    raise RuntimeError("dask scheduler ended: " + self.log("scheduler")[-2000:]) from None
                time.sleep(0.2)
        raise RuntimeError("dask scheduler did not listen within 60 s")

    def add_worker(self, threads: int = 1) -> subprocess.Popen:
        number = len(self.workers)
        worker = self._start(f"worker-{number}", "worker", self.address, "--nthreads", str(threads),
                             "--no-nanny", "--no-dashboard", "--name", f"worker-{number}",
                             "--local-directory", str(self.logs / f"worker-{number}"))
        self.workers.append(worker)
        return worker

    def address_of(self, number: int, timeout: float = 30) -> str:
        """The address worker `number` listens at, from its log."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = worker_addresses(self.log(f"worker-{number}"))
            if found:
                return found[-1]
            time.sleep(0.2)
        raise RuntimeError(f"worker-{number} never said where it listens")

    def alive(self) -> list[int]:
        return [n for n, worker in enumerate(self.workers) if worker.poll() is None]

    def wait_for_workers(self, count: int, timeout: float = 90) -> None:
        from distributed import Client

        with Client(self.address, timeout=30, set_as_default=False) as client:
            client.wait_for_workers(count, timeout=timeout)

    def kill_worker(self, number: int) -> None:
        """SIGKILL, as a machine lost: no goodbye to the scheduler."""
        os.killpg(self.workers[number].pid, signal.SIGKILL)
        self.workers[number].wait()

    def stop_scheduler(self) -> None:
        if self.scheduler is not None and self.scheduler.poll() is None:
            os.killpg(self.scheduler.pid, signal.SIGKILL)
            self.scheduler.wait()

    def stop(self) -> None:
        for worker in self.workers:
            if worker.poll() is None:
                os.killpg(worker.pid, signal.SIGTERM)
        for worker in self.workers:
            try:
                worker.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(worker.pid, signal.SIGKILL)
                worker.wait()
        if self.scheduler is not None and self.scheduler.poll() is None:
            os.killpg(self.scheduler.pid, signal.SIGTERM)
            try:
                self.scheduler.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.stop_scheduler()

    def log(self, name: str) -> str:
        path = self.logs / f"{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""


def worker_addresses(log_text: str) -> list[str]:
    return re.findall(r"Start worker at:\s+(\S+)", log_text)
