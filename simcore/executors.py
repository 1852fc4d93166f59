"""Where a sweep's independent simulations run: this machine's processes, or a Dask or Ray
cluster.

Every executor runs ``task(item, None)`` for each item and tells ``finished(index, result)``
in the caller's process as each one finishes, so a sweep writes its results as they come. A
task is a pure function of its item (the seeds travel in the configuration), so the results
are the same, bit for bit, whichever executor ran them; tests compare them.

- ``local`` (default): :func:`simcore.parallel.run_tasks` on ``--jobs`` processes, with
  progress inside each simulation.
- ``dask``: a ``distributed`` cluster (``pip install sgdsim[dask]``). ``address`` is its
  scheduler (``tcp://host:8786``); without one a local cluster of ``jobs`` single-threaded
  worker processes is started for the run and stopped after it.
- ``ray``: a Ray cluster (``pip install sgdsim[ray]``). ``address`` as ``ray.init`` takes it
  (``auto``, ``ray://host:10001``); without one a local Ray of ``jobs`` CPUs is started and
  shut down after the run.

On a cluster every worker needs sgdsim (the same version) installed and the traces' contents
travel with the tasks, so no file needs to be shared. Progress there counts whole simulations.
Ctrl-C cancels what has not finished and raises :class:`simcore.parallel.Interrupted` with
what has.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from simcore.errors import ConfigError, SgdsimError
from simcore.parallel import CallerSettings, Interrupted, TaskProgress, current_jobs, run_tasks

__all__ = ["EXECUTORS", "ExecutorError", "run_on"]

T = TypeVar("T")
R = TypeVar("R")

EXECUTORS = ("local", "dask", "ray")
_EXTRA = {"dask": ("distributed", "dask"), "ray": ("ray", "ray")}  # module, extra


class ExecutorError(SgdsimError, RuntimeError):
    """The cluster could not be reached or failed a task for reasons of its own."""


def run_on(
    executor: str,
    task: Callable[[T, TaskProgress | None], R],
    items: Sequence[T],
    *,
    address: str | None = None,
    planned: Sequence[int] | None = None,
    progress: Callable[[int, int], None] | None = None,
    finished: Callable[[int, R], None] | None = None,
) -> list[R]:
    """``[task(item, None) for item in items]`` on ``executor``, results in the items' order.

    ``planned``: each item's size for ``progress(done, total)`` (the sum of the finished
    items' on a cluster). Raises ConfigError for an unknown executor, an address given to
    ``local``, or an executor whose extra is not installed.
    """
    if executor not in EXECUTORS:
        raise ConfigError(f"--executor {executor}: expected one of {', '.join(EXECUTORS)}")
    if executor == "local":
        if address is not None:
            raise ConfigError("--address: only with --executor dask or ray")
        return run_tasks(task, items, planned=planned, progress=progress, finished=finished)
    module, extra = _EXTRA[executor]
    try:
        importlib.import_module(module)
    except ImportError:
        raise ConfigError(
            f"--executor {executor}: {module} is not installed; pip install 'sgdsim[{extra}]'"
        ) from None
    sizes = list(planned) if planned is not None else [1] * len(items)
    counter = _Counter(sizes, progress, finished)
    run = _run_dask if executor == "dask" else _run_ray
    return run(task, items, address, counter)


class _Counter:
    """Results as they come: the caller's ``finished``, and progress in whole items."""

    def __init__(
        self,
        sizes: list[int],
        progress: Callable[[int, int], None] | None,
        finished: Callable[[int, Any], None] | None,
    ) -> None:
        self.sizes = sizes
        self.progress = progress
        self.finished = finished
        self.results: dict[int, Any] = {}

    def done(self, index: int, result: Any) -> None:
        self.results[index] = result
        if self.finished is not None:
            self.finished(index, result)
        if self.progress is not None:
            self.progress(sum(self.sizes[i] for i in self.results), sum(self.sizes))

    def ordered(self, n: int) -> list[Any]:
        return [self.results[i] for i in range(n)]


def _call(task: Callable[[T, TaskProgress | None], R], item: T, settings: CallerSettings) -> R:
    """One task on a cluster's worker, with the caller's numeric error handling and warning
    filters (the CLI turns overflows into errors)."""
    with settings.applied():
        return task(item, None)


def _run_dask(
    task: Callable[[T, TaskProgress | None], R],
    items: Sequence[T],
    address: str | None,
    counter: _Counter,
) -> list[R]:
    from distributed import Client, LocalCluster, as_completed

    settings = CallerSettings.of_caller()
    cluster = None
    try:
        if address is None:
            cluster = LocalCluster(
                n_workers=current_jobs(),
                threads_per_worker=1,  # the simulator holds the GIL: a process per core
                processes=True,
                dashboard_address=None,
            )
            client = Client(cluster)
        else:
            client = Client(address, timeout=30)
    except OSError as err:
        raise ExecutorError(f"--executor dask: cannot reach {address}: {err}") from None
    try:
        futures = {
            client.submit(_call, task, item, settings, pure=False): i
            for i, item in enumerate(items)
        }
        try:
            for future in as_completed(futures):
                counter.done(futures[future], future.result())
        except KeyboardInterrupt:
            client.cancel(list(futures))
            raise Interrupted(dict(counter.results)) from None
    finally:
        client.close()
        if cluster is not None:
            cluster.close()
    return counter.ordered(len(items))


def _run_ray(
    task: Callable[[T, TaskProgress | None], R],
    items: Sequence[T],
    address: str | None,
    counter: _Counter,
) -> list[R]:
    import ray

    settings = CallerSettings.of_caller()
    started_here = not ray.is_initialized()
    if started_here:
        try:
            if address is None:
                ray.init(num_cpus=current_jobs(), include_dashboard=False, log_to_driver=False)
            else:
                ray.init(address=address, log_to_driver=False)
        except (ConnectionError, RuntimeError) as err:
            raise ExecutorError(f"--executor ray: cannot start or reach {address}: {err}") from None
    try:
        remote: Any = ray.remote(num_cpus=1)(_call)
        pending = {remote.remote(task, item, settings): i for i, item in enumerate(items)}
        try:
            while pending:
                ready, _ = ray.wait(list(pending), num_returns=1)
                for ref in ready:
                    counter.done(pending.pop(ref), ray.get(ref))
        except KeyboardInterrupt:
            for ref in pending:
                ray.cancel(ref, force=True)
            raise Interrupted(dict(counter.results)) from None
    finally:
        if started_here:
            ray.shutdown()
    return counter.ordered(len(items))
