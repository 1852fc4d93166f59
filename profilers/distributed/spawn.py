"""Start every rank of a run on this machine, watch them, and collect what they measured.

:func:`run_distributed` starts the ranks (servers, then workers) as processes forked from a
forkserver, lets them rendezvous on ``master_addr`` (loopback by default), and returns a
:class:`RunResult`. A watchdog in the calling process ends the run with
:class:`DistributedRunError` when a rank raises, dies, or reports nothing for ``timeout_s`` (plus a
grace), naming the culprit; every rank is terminated before :func:`run_distributed` returns or
raises, and a rank whose caller disappears ends by itself.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import queue
import signal
import socket
import tempfile
import threading
import time
import traceback
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from profilers.distributed.config import DistributedRunError, RunConfig
from profilers.distributed.launch import RankOutput, combine, run_rank
from profilers.distributed.records import RunResult
from profilers.netns import enter_namespace
from profilers.netns_cluster import EmulatedCluster
from simcore.errors import ConfigError, SgdsimError

__all__ = [
    "ProgressEvent",
    "collect_rank_results",
    "join_gloo_group",
    "rank_process_context",
    "run_distributed",
    "run_rank_processes",
    "stop_processes",
]

_GRACE_S = 10.0  # the parent waits this much longer than a rank's own gloo timeout
_STOP_WAIT_S = 2.0  # how long terminated ranks get to exit before they are killed
_ROOT_CAUSE_WAIT_S = 0.5  # after a rank's error, how long to look for a rank that died first
_LAST_WORDS_S = 0.5  # how long to read a dead rank's last messages
_QUIET_S = 1.0  # a rank silent this long when another fails is named as the likely cause
_CALLER_POLL_S = 1.0  # how often a rank checks that the process that started it is alive
_PROGRESS_INTERVAL_S = 0.2  # a rank reports progress at most this often


@dataclass(frozen=True)
class ProgressEvent:
    """A rank finished step ``step`` (a server: served some worker's step); ``pid``: its process.

    Each rank reports at most every 0.2 s, and always its last step.
    """

    rank: int
    role: str
    step: int
    total: int
    pid: int


# --------------------------------------------------------------------


def run_distributed(
    config: RunConfig,
    progress: Callable[[ProgressEvent], None] | None = None,
    *,
    cluster: EmulatedCluster | None = None,
    cpus: Sequence[Collection[int]] | None = None,
) -> RunResult:
    """Spawn all ranks of ``config`` on this machine, run them, and return what they measured.

    Parameters
    ----------
    config : the run; ``master_port`` 0 picks a free port on ``master_addr``.
    progress : called in this process with a :class:`ProgressEvent` after each rank's step.
    cluster : an emulated cluster (:func:`profilers.netns_cluster.emulated_cluster`) with a node
        per rank: rank r then runs in node r's network namespace and talks over its (possibly
        shaped) link; ``master_addr`` is not used (the ranks meet in a file store).
    cpus : the CPU cores each rank may run on (``sched_setaffinity``), one set per rank; None =
        any. Pinning the servers to cores of their own makes them separate machines as far as
        the workers' computation is concerned.

    Raises
    ------
    DistributedRunError : a rank raised, died, or nothing progressed for ``timeout_s`` + 10 s.
        Every spawned rank is stopped before this returns or raises.
    """
    if cluster is not None and cluster.nodes < config.world_size:
        raise ConfigError(
            f"cluster: {cluster.nodes} nodes for {config.world_size} ranks; need one each"
        )
    rank_cpus = None if cpus is None else [frozenset(c) for c in cpus]
    if rank_cpus is not None:
        available = os.sched_getaffinity(0)
        if len(rank_cpus) != config.world_size or any(
            not c or not c <= available for c in rank_cpus
        ):
            raise ConfigError(
                f"cpus: need one non-empty set of cores per rank ({config.world_size}) among "
                f"{sorted(available)}, got {[sorted(c) for c in rank_cpus]}"
            )
    with contextlib.ExitStack() as stack:
        if cluster is None:
            port = config.master_port or _free_port(config.master_addr)
            host = f"[{config.master_addr}]" if ":" in config.master_addr else config.master_addr
            init_method = f"tcp://{host}:{port}"
        else:
            # Ranks in different namespaces share this machine's files: they meet in a file
            # store instead of a TCP one, whose server would look up every peer's host name
            # (there is none) and warn about it once per rank. gloo still connects over eth0.
            folder = stack.enter_context(tempfile.TemporaryDirectory(prefix="sgdsim-rdzv-"))
            init_method = f"file://{folder}/store"
        return _run_ranks(config, init_method, progress, cluster, rank_cpus)


def _run_ranks(
    config: RunConfig,
    init_method: str,
    progress: Callable[[ProgressEvent], None] | None,
    cluster: EmulatedCluster | None,
    rank_cpus: list[frozenset[int]] | None,
) -> RunResult:
    ctx = rank_process_context()
    messages = ctx.Queue()
    procs = [
        ctx.Process(
            target=_child_main,
            args=(
                config,
                r,
                init_method,
                messages,
                os.getpid(),
                cluster,
                rank_cpus and rank_cpus[r],
            ),
            daemon=True,
        )
        for r in range(config.world_size)
    ]
    try:
        for proc in procs:
            proc.start()
        outputs = _Watchdog(config, procs, messages, progress).collect()
    finally:
        stop_processes(procs)
        messages.close()
        messages.join_thread()
    return combine(config, outputs)


def rank_process_context() -> Any:
    """A forkserver that has imported torch and the runner once, where available, else spawn.

    Every rank then starts as a fork of that clean, single-threaded process in milliseconds
    instead of importing torch again (seconds each on a busy host). Unlike a plain fork of the
    caller, no threads or OpenMP pools are inherited. The forkserver process lives as long as the
    calling process and exits with it.
    """
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["torch", "torch.distributed", "profilers.distributed.spawn"])
    return ctx


def _free_port(addr: str) -> int:
    family = socket.AF_INET6 if ":" in addr else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.bind((addr, 0))
        port: int = sock.getsockname()[1]
    return port


def _child_main(
    config: RunConfig,
    rank: int,
    init_method: str,
    messages: Any,
    caller_pid: int,
    cluster: EmulatedCluster | None,
    cpus: frozenset[int] | None,
) -> None:
    """Entry point of a spawned rank: reports progress, its output or its error on ``messages``."""
    role, index = config.role(rank)
    if cpus:
        os.sched_setaffinity(0, cpus)  # before torch starts threads: they inherit it
    if cluster is not None:
        # First, while this process has one thread: every thread and socket made later
        # (gloo's included) inherits the namespace. The queue to the parent is a pipe.
        try:
            enter_namespace(cluster.namespaces[rank])
        except SgdsimError as err:
            messages.put(("error", rank, f"{role} {index} (rank {rank})", str(err)))
            raise SystemExit(1) from err
        os.environ["GLOO_SOCKET_IFNAME"] = cluster.ifname
    elif config.master_addr in ("127.0.0.1", "localhost", "::1"):
        os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")  # gloo otherwise picks the host's NIC
    _exit_with(caller_pid)
    pid = os.getpid()

    last_report = [-_PROGRESS_INTERVAL_S]

    def report(step: int) -> None:
        # At most one message per interval (and always the last step): a fast model would
        # otherwise flood the parent with thousands a second, taking CPU from the measurement.
        now = time.monotonic()
        if now - last_report[0] >= _PROGRESS_INTERVAL_S or step == config.steps - 1:
            last_report[0] = now
            messages.put(("progress", rank, role, step, pid, now))

    try:
        output = run_rank(config, rank, init_method=init_method, progress=report)
    except BaseException as err:
        # sgdsim's own errors say what happened; anything else needs its type to make sense
        own = isinstance(err, SgdsimError)
        text = str(err) if own else "".join(traceback.format_exception_only(err)).strip()
        messages.put(("error", rank, f"{role} {index} (rank {rank})", text))
        raise SystemExit(1) from err
    messages.put(("result", rank, output))


def _exit_with(caller_pid: int) -> None:
    """End this rank at once if the process that started it goes away (even by SIGKILL).

    The caller stops its ranks when it returns or raises, but a caller that is killed cannot;
    without this its ranks would train on (or wait for gloo's timeout) as orphans.
    """

    def watch() -> None:
        while True:
            time.sleep(_CALLER_POLL_S)
            try:
                os.kill(caller_pid, 0)
            except ProcessLookupError:
                os._exit(3)  # no cleanup to do: nobody is left to read our results

    threading.Thread(target=watch, name="caller watch", daemon=True).start()


class _Watchdog:
    """The parent's side of a run: relays progress, gathers outputs, and fails fast.

    Deaths and silences are checked on every pass, not only when the queue is quiet: in
    Async-SGD the surviving workers keep reporting progress while a dead or hung one does not.
    A rank is silent when it has reported nothing for ``timeout_s`` + a grace.
    """

    def __init__(
        self,
        config: RunConfig,
        procs: list[Any],
        messages: Any,
        progress: Callable[[ProgressEvent], None] | None,
    ) -> None:
        self.config, self.procs, self.messages, self.progress = config, procs, messages, progress
        self.idle_limit_s = config.timeout_s + _GRACE_S
        self.outputs: dict[int, RankOutput] = {}
        self.last_news = dict.fromkeys(range(len(procs)), time.monotonic())

    def collect(self) -> list[RankOutput]:
        """Every rank's output, in rank order; DistributedRunError on any failure."""
        while len(self.outputs) < len(self.procs):
            try:
                message = self.messages.get(timeout=0.2)
            except queue.Empty:
                message = None
            if message is None or message[0] == "progress":
                self._check_alive()
            if message is not None:
                self._handle(message)
        return [self.outputs[r] for r in sorted(self.outputs)]

    def _handle(self, message: tuple[Any, ...]) -> None:
        kind, rank = message[0], message[1]
        if kind == "progress":
            _, _, role, step, pid, sent = message
            # When it was sent, not read: the parent may read a backlog late. CLOCK_MONOTONIC
            # (time.monotonic on Linux) is one clock for all processes of the host.
            self.last_news[rank] = max(self.last_news[rank], sent)
            if self.progress is not None:
                self.progress(ProgressEvent(rank, role, step, self.config.steps, pid))
            return
        self.last_news[rank] = time.monotonic()
        if kind == "result":
            self.outputs[rank] = message[2]
        elif kind == "error":
            time.sleep(_ROOT_CAUSE_WAIT_S)  # a peer's death or hang usually causes it: name it
            # A stopped peer first: the ranks waiting on it die of gloo's timeout meanwhile,
            # and their deaths are its consequence, not the cause.
            stopped = self._stopped_text(exclude=rank)
            died = self._describe(self._dead() - {rank})
            cause = stopped + died if stopped or died else self._quietest(exclude=rank)
            raise DistributedRunError(f"{cause}{message[2]} failed: {message[3]}")

    def _check_alive(self) -> None:
        """Raise if a rank died without its output or has been silent too long."""
        if self._dead():
            # Its last words (an error, or its output) may still be in the pipe: read them for
            # a moment (only a moment: other ranks may keep reporting progress for ever).
            until = time.monotonic() + _LAST_WORDS_S
            while (last := _last_message(self.messages, until - time.monotonic())) is not None:
                if last[0] in ("error", "result"):
                    self._handle(last)
            dead = self._dead()
            if dead:
                cause = self._stopped_text() + self._describe(dead)
                raise DistributedRunError(cause.rstrip("; "))
        now = time.monotonic()
        silent = [r for r, t in self.last_news.items() if self._running(r)]
        silent = [r for r in silent if now - self.last_news[r] > self.idle_limit_s]
        if silent:
            # A rank waiting for a hung peer goes quiet too, sometimes first: name a stopped
            # process (the cause) before the ranks that merely went silent.
            names = ", ".join(self._name(r) for r in silent)
            raise DistributedRunError(
                f"{self._stopped_text()}no progress for {self.idle_limit_s:.0f} s from {names}: "
                "it hangs; raise timeout_s if its steps are legitimately that slow"
            )

    def _running(self, rank: int) -> bool:
        return rank not in self.outputs

    def _dead(self) -> set[int]:
        """Ranks that have exited without delivering their output."""
        return {r for r, p in enumerate(self.procs) if p.exitcode is not None and self._running(r)}

    def _name(self, rank: int) -> str:
        role, index = self.config.role(rank)
        return f"{role} {index} (rank {rank})"

    def _describe(self, ranks: set[int]) -> str:
        parts = []
        for rank in sorted(ranks):
            code = self.procs[rank].exitcode
            how = f"killed by signal {-code}" if code is not None and code < 0 else f"exit {code}"
            parts.append(f"{self._name(rank)} died ({how}) before finishing; ")
        return "".join(parts)

    def _stopped_text(self, exclude: int | None = None) -> str:
        """The running ranks whose process is stopped (SIGSTOP, a debugger), as a cause."""
        now = time.monotonic()
        return "".join(
            f"{self._name(r)} has reported nothing for {now - self.last_news[r]:.1f} s: its "
            "process is stopped; "
            for r, proc in enumerate(self.procs)
            if r != exclude and self._running(r) and _is_stopped(proc.pid)
        )

    def _quietest(self, exclude: int) -> str:
        """A stopped rank, else the running rank silent the longest if it has been silent for a
        while (a hang)."""
        stopped = self._stopped_text(exclude)
        if stopped:
            return stopped
        now = time.monotonic()
        quiet = [
            (now - t, r) for r, t in self.last_news.items() if r != exclude and self._running(r)
        ]
        if not quiet:
            return ""
        silent_s, rank = max(quiet)
        if silent_s < _QUIET_S:
            return ""
        return f"{self._name(rank)} has reported nothing for {silent_s:.1f} s (hung?); "


def _is_stopped(pid: int | None) -> bool:
    """Whether process ``pid`` is stopped (state T or t in /proc; False where there is none)."""
    if pid is None:
        return False
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            state = stat.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state in ("T", "t")


def _last_message(messages: Any, timeout_s: float) -> tuple[Any, ...] | None:
    if timeout_s <= 0:
        return None
    try:
        message: tuple[Any, ...] = messages.get(timeout=timeout_s)
    except queue.Empty:
        return None
    return message


def stop_processes(procs: list[Any]) -> None:
    """Terminate ranks still running, kill those that ignore it (or are stopped); reap all."""
    for proc in procs:
        if proc.is_alive():
            proc.terminate()
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGCONT)  # a stopped (hung) rank must run to die
    deadline = time.monotonic() + _STOP_WAIT_S
    for proc in procs:
        if proc.pid is None:  # never started
            continue
        proc.join(max(deadline - time.monotonic(), 0.0))
        if proc.is_alive():
            proc.kill()  # SIGKILL also ends a stopped (SIGSTOP) process
            proc.join(_STOP_WAIT_S)


def run_rank_processes(
    what: str, target: Callable[..., None], rank_args: Sequence[tuple[Any, ...]], limit_s: float
) -> list[Any]:
    """Start one process per rank, ``target(rank, init_method, *rank_args[rank], results)``,
    and return every rank's result (:func:`collect_rank_results`); the processes are stopped
    whatever happens. ``init_method`` is a file store of a temporary folder."""
    ctx = rank_process_context()
    results = ctx.Queue()
    with tempfile.TemporaryDirectory(prefix="sgdsim-ranks-") as folder:
        init = f"file://{os.path.join(folder, 'store')}"
        procs = [
            ctx.Process(target=target, args=(rank, init, *args, results), daemon=True)
            for rank, args in enumerate(rank_args)
        ]
        try:
            for proc in procs:
                proc.start()
            return collect_rank_results(what, results, procs, len(procs), limit_s)
        finally:
            stop_processes(procs)
            results.close()
            results.join_thread()


def collect_rank_results(
    what: str, results: Any, procs: list[Any], workers: int, limit_s: float
) -> list[Any]:
    """Every rank's ``("times", rank, payload)`` from ``results``, in rank order; a rank's
    ``("error", rank, text)``, a rank that exits without a result, or ``limit_s`` passing
    raises DistributedRunError naming ``what``."""
    deadline = time.monotonic() + limit_s
    per_rank: dict[int, Any] = {}
    while len(per_rank) < workers:
        try:
            kind, rank, payload = results.get(timeout=0.2)
        except queue.Empty:
            dead = [r for r, p in enumerate(procs) if r not in per_rank and not p.is_alive()]
            if dead:
                raise DistributedRunError(
                    f"{what}: rank {dead[0]} exited (code {procs[dead[0]].exitcode}) "
                    "without a result"
                ) from None
            if time.monotonic() > deadline:
                missing = sorted(set(range(workers)) - set(per_rank))
                raise DistributedRunError(
                    f"{what}: rank(s) {missing} did not finish within {limit_s:g} s"
                ) from None
            continue
        if kind == "error":
            raise DistributedRunError(f"{what}: rank {rank}: {payload}")
        per_rank[rank] = payload
    return [per_rank[r] for r in range(workers)]


def join_gloo_group(
    rank: int,
    world: int,
    init: str,
    timeout_s: float,
    cluster: EmulatedCluster | None,
    cpus: set[int] | None = None,
) -> Any:
    """In a fresh rank process: enter the rank's namespace of ``cluster`` (None: loopback),
    pin it to ``cpus`` (None: anywhere), one torch thread, and join the gloo group of ``world``
    ranks at ``init``; returns ``torch.distributed``. Imports torch (after the namespace: a
    namespace belongs to a thread, and torch starts threads)."""
    if cluster is not None:  # first, while this process has one thread
        enter_namespace(cluster.namespaces[rank])
        os.environ["GLOO_SOCKET_IFNAME"] = cluster.ifname
    else:
        os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    if cpus is not None and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, cpus)
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group(
        "gloo", init_method=init, rank=rank, world_size=world, timeout=timedelta(seconds=timeout_s)
    )
    return dist
