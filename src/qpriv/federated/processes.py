"""Real processes on this machine: a SuperLink, one SuperNode per site, ``flwr run``.

:func:`federate` is what ``qpriv federate`` runs: it checks the sites' files, plans the round
(:func:`~qpriv.federated.protocol.plan_federation`), starts ``flower-superlink --insecure`` and
one ``flower-supernode --insecure`` per site on loopback with free ports (Flower's Deployment
Engine: no Ray), each SuperNode given its site's CSV through ``--node-config``, submits the
app with ``flwr run`` against a SuperLink connection written to a temporary ``FLWR_HOME``,
waits for the ServerApp's outcome under a deadline, and stops every process it started (also
on an error or Ctrl-C). Across real machines the same app runs unchanged: each site starts
its own SuperNode against the SuperLink's address (with TLS), see the federated docs page.

Flower's own processes are driven as the Flower docs drive them, by their command lines;
nothing here re-implements a part of Flower.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from qpriv.errors import InvalidInputError
from qpriv.federated.protocol import plan_federation
from qpriv.federated.results import ERROR_FILE
from qpriv.federated.site import SiteData, load_site, training_rows
from qpriv.forecasting.csv_input import series_frequency
from qpriv.forecasting.seasonality import resolve_period
from qpriv.runs.directory import check_out_dir
from qpriv.runs.layout import RESULT_FILE

__all__ = ["DEADLINE_S", "DP_LINEAR_APP", "STAGE_TIMEOUT_S", "Federation", "check_sites",
           "federate", "free_port", "run_federation"]

DEADLINE_S = 300.0
"""The whole run's time limit (start-up, the round, evaluation), seconds."""
STAGE_TIMEOUT_S = 20.0
"""How long the server waits for the sites at each SecAgg+ stage: a site silent for longer
counts as dropped."""
APP_TOML = """[build-system]
requires = ["hatchling"]
build-backend = "hatchling.build"

[project]
name = "qpriv-federated"
version = "1.0.0"
dependencies = []

[tool.hatch.build.targets.wheel]
packages = ["."]

[tool.flwr.app]
publisher = "qpriv"

[tool.flwr.app.components]
serverapp = "{components[0]}"
clientapp = "{components[1]}"

[tool.flwr.app.config]
staging = {staging}
plan = {plan}
stage_timeout = {stage_timeout}
seed = {seed}
"""
DP_LINEAR_APP = ("qpriv.federated.app:server_app", "qpriv.federated.site:client_app")
"""Federated dp-linear's ServerApp and ClientApp."""


def _bin(name: str) -> str:
    """A Flower command next to this Python (the environment qpriv runs in)."""
    here = Path(sys.executable).parent / name
    return str(here) if here.exists() else name


def free_port() -> int:
    """A TCP port on loopback that nothing listens on now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def check_sites(sites: Sequence[str | Path], *, seq_len: int,
                horizon: int) -> list[SiteData]:
    """Each site's data, loaded where it lies; refused (one line) unless there are at least 2
    sites with the same columns and frequency. Nothing leaves a site here."""
    if len(sites) < 2:
        raise InvalidInputError(f"{len(sites)} site(s) given: a federation needs at least 2; "
                                "pass --site FILE.csv once per site")
    datas = [load_site(site, seq_len=seq_len, horizon=horizon)
             for site in sites]
    first = datas[0]
    for site, data in zip(sites, datas, strict=True):
        if data.channels != first.channels:
            raise InvalidInputError(
                f"site {site} has columns {', '.join(data.channels)}, not "
                f"{', '.join(first.channels)} as {sites[0]}: give every site the same columns")
        freq, base = series_frequency(data.dates), series_frequency(first.dates)
        if freq != base:
            raise InvalidInputError(f"site {site} is sampled at frequency {freq!r}, not "
                                    f"{base!r} as {sites[0]}: resample it first")
    return datas


@dataclass
class Federation:
    """The processes of one local federation and their folder; :meth:`stop` ends them all."""

    home: Path
    processes: list[subprocess.Popen]

    def start(self, args: list[str], *, log: str) -> subprocess.Popen:
        with open(self.home / log, "wb") as out:
            proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT,
                                    env=_environment(self.home), start_new_session=True)
        self.processes.append(proc)
        return proc

    def stop(self) -> None:
        """SIGTERM each process group started here, then SIGKILL what is left after 5 s; the
        helpers Flower starts in sessions of their own (the SuperLink's ServerApp) are found
        as descendants first and ended with them."""
        helpers = _descendants([proc.pid for proc in self.processes])
        for proc in self.processes:
            _signal(proc, signal.SIGTERM)
        for pid in helpers:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGTERM)
        end = time.monotonic() + 5
        for proc in self.processes:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=max(0.1, end - time.monotonic()))
            _signal(proc, signal.SIGKILL)  # its children (serverapp, clientapps) too
            proc.wait()
        for pid in helpers:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def _descendants(roots: list[int]) -> list[int]:
    """Every living descendant of the processes ``roots``, from ``/proc`` (Linux; elsewhere
    none are found and the process groups alone are ended)."""
    parents: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            fields = stat.read_text().rsplit(")", 1)[1].split()
            parents.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, todo = [], list(roots)
    while todo:
        children = parents.get(todo.pop(), [])
        found += children
        todo += children
    return found


def _environment(home: Path) -> dict[str, str]:
    """The processes' environment: the temporary FLWR_HOME, and this Python's scripts first
    on PATH (the SuperLink and SuperNodes start Flower's own helpers by name)."""
    scripts = str(Path(sys.executable).parent)
    return {**os.environ, "FLWR_HOME": str(home / "flwr"),
            "PATH": os.pathsep.join([scripts, os.environ.get("PATH", "")])}


def _signal(proc: subprocess.Popen, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, sig)


def federate(sites: Sequence[str | Path], *, out_dir: str | Path | None, unit: str = "record",
             eps: float = 1.0, delta: float = 1e-6, seq_len: int = 336, horizon: int = 24,
             threshold: int | None = None, colluders: int = 0, scaler: str = "private",
             deadline_s: float = DEADLINE_S, stage_timeout_s: float = STAGE_TIMEOUT_S,
             noise: bool = True, seeds: Sequence[int] | None = None,
             on_started: object = None, clip: float | None = None,
             feature_clip: float | None = None, target_clip: float | None = None,
             personal: bool = False) -> dict:
    """Fit federated dp-linear over ``sites`` (one CSV each) through real Flower processes on
    this machine and write its run folder to ``out_dir`` (None: nothing written); return the
    result. ``threshold`` (default: every site) is how many sites must survive; ``noise`` and
    ``seeds`` (one per site) are for tests only; the clips default to dp-linear's.
    ``personal``: one kernel per site (:mod:`qpriv.federated.personal`), site i in slot i.
    ``on_started`` (tests) is called with the :class:`Federation` once the round is submitted.

    Raises:
        InvalidInputError: fewer than 2 sites, sites that differ in columns or frequency, a
            used ``out_dir``, fewer survivors than the threshold, or the deadline passed;
            nothing is written then.
    """
    out = check_out_dir(out_dir, resume=False, marks=(RESULT_FILE,))
    datas = check_sites(sites, seq_len=seq_len, horizon=horizon)
    biggest = max(training_rows(d) for d in datas)
    plan = plan_federation(
        seq_len=seq_len, horizon=horizon, period=resolve_period(datas[0].dates, None),
        unit=unit, eps=eps, delta=delta, sites=len(sites),
        threshold=len(sites) if threshold is None else threshold, colluders=colluders,
        channels=datas[0].channels, freq=series_frequency(datas[0].dates) or "uneven",
        max_rows=1 << (biggest - 1).bit_length(), scaler=scaler, noise=noise, clip=clip,
        feature_clip=feature_clip, target_clip=target_clip, personal=personal)
    return run_federation(sites, plan=plan, out=out, seeds=seeds, deadline_s=deadline_s,
                          stage_timeout_s=stage_timeout_s, on_started=on_started)


def run_federation(sites: Sequence[str | Path], *, plan: Any, out: Path | None,
                   seeds: Sequence[int] | None, deadline_s: float, stage_timeout_s: float,
                   on_started: object, components: tuple[str, str] = DP_LINEAR_APP,
                   server_seed: int | None = None) -> dict:
    """Run the app ``components`` (ServerApp, ClientApp) with ``plan`` (its ``to_config()``
    in the run config) over ``sites`` in a temporary folder, stop every process, move the
    run folder to ``out`` (None: nothing written) and return its result.

    Raises:
        InvalidInputError: the ServerApp's one error line, or the deadline passed; nothing
            is written then.
    """
    with tempfile.TemporaryDirectory(prefix="qpriv-federate-") as tmp:
        fed = Federation(home=Path(tmp), processes=[])
        # a SIGTERM ends the run as Ctrl-C does, through the finally that stops the processes
        main = threading.current_thread() is threading.main_thread()
        previous = signal.signal(signal.SIGTERM, _interrupt) if main else None
        try:
            staging = _run(fed, plan, sites, seeds=seeds, deadline_s=deadline_s,
                           stage_timeout_s=stage_timeout_s, on_started=on_started,
                           components=components, server_seed=server_seed)
        finally:
            fed.stop()
            if main:
                signal.signal(signal.SIGTERM, previous)
        if (staging / ERROR_FILE).exists():
            raise InvalidInputError((staging / ERROR_FILE).read_text().strip())
        result = json.loads((staging / RESULT_FILE).read_text())
        if out is not None:
            out.mkdir(parents=True, exist_ok=True)
            for path in staging.iterdir():
                shutil.move(str(path), out / path.name)
    return result


def _run(fed: Federation, plan: Any, sites: Sequence[str | Path], *,
         seeds: Sequence[int] | None, deadline_s: float, stage_timeout_s: float,
         on_started: object, components: tuple[str, str], server_seed: int | None) -> Path:
    """Start the processes, submit the app, wait for its outcome; the staging folder."""
    home = fed.home
    staging = home / "staging"
    staging.mkdir()
    app = home / "app"
    app.mkdir()
    (app / "pyproject.toml").write_text(APP_TOML.format(
        staging=json.dumps(str(staging)), plan=json.dumps(json.dumps(plan.to_config())),
        stage_timeout=float(stage_timeout_s), components=components,
        seed=json.dumps("" if server_seed is None else str(int(server_seed)))))
    (home / "flwr").mkdir()
    port = free_port()  # the SuperLink's one HTTP port: Control, Fleet and ServerAppIo APIs
    (home / "flwr" / "config.toml").write_text(
        f'[superlink]\ndefault = "local"\n\n[superlink.local]\n'
        f'address = "127.0.0.1:{port}"\ninsecure = true\n')
    deadline = time.monotonic() + deadline_s
    link = fed.start([_bin("flower-superlink"), "--insecure", "--disable-runtime-dependency-"
                      "installation", "--host", "127.0.0.1", "--port", str(port)],
                     log="superlink.log")
    for index, site in enumerate(sites):
        config = f"csv={json.dumps(str(Path(site).resolve()))} slot={index}"
        if seeds is not None:
            config += f" seed={int(seeds[index])}"
        fed.start([_bin("flower-supernode"), "--insecure", "--superlink",
                   f"127.0.0.1:{port}", "--port", str(free_port()), "--node-config", config],
                  log=f"supernode-{index}.log")
    submitted = _submit(fed, app, deadline)
    if not submitted:
        raise InvalidInputError(f"flwr run could not submit the app to the local SuperLink: "
                                f"{_tail(home / 'flwr-run.log')}")
    if callable(on_started):
        on_started(fed)
    while time.monotonic() < deadline:
        if (staging / RESULT_FILE).exists() or (staging / ERROR_FILE).exists():
            return staging
        if link.poll() is not None:
            raise InvalidInputError(f"the SuperLink stopped: {_tail(home / 'superlink.log')}")
        time.sleep(0.2)
    raise InvalidInputError(f"the federated round did not finish within {deadline_s:g} s; "
                            "nothing was written (raise the deadline, or check the sites)")


def _submit(fed: Federation, app: Path, deadline: float) -> bool:
    """``flwr run`` until the SuperLink accepts the app (it may still be starting)."""
    env = _environment(fed.home)
    while time.monotonic() < deadline:
        with open(fed.home / "flwr-run.log", "wb") as log:
            try:
                done = subprocess.run([_bin("flwr"), "run", str(app), "local"], stdout=log,
                                      stderr=subprocess.STDOUT, env=env, timeout=60,
                                      check=False)
            except subprocess.TimeoutExpired:
                continue
        if done.returncode == 0:
            return True
        time.sleep(0.5)
    return False


def _tail(path: Path) -> str:
    """The last non-empty line of a log, for a one-line error."""
    lines = [line for line in path.read_text(errors="replace").splitlines() if line.strip()] \
        if path.exists() else []
    return lines[-1].strip() if lines else "(no output)"
