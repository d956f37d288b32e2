"""The long builds' independent pieces run as Ray tasks (`--ray ADDRESS`): on a Ray started for the command on this
machine, or on a cluster joined by its address.

`local` starts Ray for the command's duration with `--ray-workers` worker processes (default: this machine's
CPUs): every service bound to 127.0.0.1, its session files in a temporary folder removed afterwards (not
`~/.ray`, not the odqa home), token authentication with a token held in the processes' environment, never
written to a file. `auto` joins the cluster that `ray start` runs on this machine, `ray://HOST:PORT` one through
Ray Client, `HOST:PORT` one by its head node's address.

A task lost with its worker (the process killed, the machine gone, out of memory) is retried (`RETRIES`); a task
that raises an error of its own is not, since bad input fails again. A failed task does not stop the others:
what they finish is kept for the rerun, and the first failure is raised once every task is done. The caller's
terminal shows one progress bar over the completed tasks; the workers' own output stays in Ray's session logs.

On a cluster every worker runs the same odqa (each task checks the version) with the models installed, and reads
and writes the build's files at the same paths: a shared file system (NFS, CephFS, Lustre, a cloud file share
mounted on every node). Object stores (S3, GCS) are not written to directly: mount them as a file system.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterable, Iterator, Sequence, Sized
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from odqa.core.errors import OdqaError
from odqa.core.optional import require

LOCAL = "local"
AUTO = "auto"
RETRIES = 3  # attempts after the first, for a task whose worker was lost
_ADDRESS = re.compile(r"(ray://)?[A-Za-z0-9.\-\[\]:]+:\d{1,5}")
# Ray errors that mean the worker or its machine was lost, not that the task's own code failed
_LOST = (
    "WorkerCrashedError",
    "NodeDiedError",
    "LocalRayletDiedError",
    "OutOfMemoryError",
    "ObjectLostError",
    "OwnerDiedError",
    "ObjectReconstructionFailedError",
    "TaskCancelledError",
)


RAY_ADDRESSES = (
    "local (a Ray started here, bound to 127.0.0.1), auto (the cluster `ray start` runs here), ray://HOST:PORT or "
    "HOST:PORT (a cluster's head); pip install 'odqa[ray]' (docs/scale.md)"
)


@dataclass(frozen=True)
class RaySettings:
    """`--ray` and `--ray-workers` of the commands that run on Ray."""

    address: str | None = field(
        default=None,
        metadata={"help": "run the build's pieces as Ray tasks: " + RAY_ADDRESSES, "metavar": "ADDRESS"},
    )
    workers: int | None = field(
        default=None,
        metadata={"help": "--ray local: worker processes (default: this machine's CPUs)", "minimum": 1},
    )

    def check(self) -> str:
        """The address, checked in one line before any work."""
        address = (self.address or "").strip()
        if address not in (LOCAL, AUTO) and not _ADDRESS.fullmatch(address):
            raise OdqaError(
                f"--ray must be local, auto, ray://HOST:PORT or HOST:PORT, got {self.address!r}: e.g. --ray local"
            )
        if self.workers is not None and address != LOCAL:
            raise OdqaError(
                f"--ray-workers sizes a Ray started here (--ray local); the cluster at {address} has its own workers"
            )
        return address


@dataclass
class Task:
    """One call `fn(*args)` run on a worker: `fn` a module-level function (workers import it by name). `gpu`: it
    takes a GPU where the cluster has them (else a CPU); `after`: names of tasks that must finish first."""

    name: str
    fn: Callable[..., Any]
    args: tuple = ()
    gpu: bool = False
    after: tuple[str, ...] = ()


def _call(version: str, cwd: str, fn: Callable[..., Any], args: tuple, *_after: Any) -> Any:
    """A task as a worker runs it: from the command's working folder (the paths it was given are relative to it),
    refused where the worker's odqa is another version than the caller's or that folder is out of its reach."""
    here = getattr(sys.modules.get("odqa"), "__version__", "")
    if here != version:
        raise OdqaError(
            f"a Ray worker runs odqa {here or '(unknown)'}, the command odqa {version}: install the same odqa on "
            "every node of the cluster"
        )
    try:
        os.chdir(cwd)
    except OSError as exc:
        raise OdqaError(
            f"a Ray worker cannot reach {cwd} ({exc.strerror}): every node must see the command's files at the same "
            "paths (a shared file system)"
        ) from None
    return fn(*args)


class Cluster:
    """A connected Ray: `run` a set of tasks, `map_ordered` one function over many items."""

    def __init__(self, ray: Any, address: str, retries: int = RETRIES):
        self.ray = ray
        self.address = address
        self.retries = retries
        resources = ray.cluster_resources()
        self.cpus = int(resources.get("CPU", 0))
        self.gpus = int(resources.get("GPU", 0))
        self.version = getattr(sys.modules.get("odqa"), "__version__", "")
        self.cwd = os.getcwd()

    @property
    def slots(self) -> int:
        """Tasks that run at once: one per GPU where the cluster has them, else one per CPU."""
        return max(1, self.gpus or self.cpus)

    def describe(self) -> str:
        where = "a local Ray" if self.address == LOCAL else f"the Ray cluster at {self.address}"
        return f"{where}: {self.cpus} CPUs" + (f", {self.gpus} GPUs" if self.gpus else "")

    def _remote(self, task: Task, retries: int):
        options: dict[str, Any] = {"max_retries": retries, "retry_exceptions": False, "name": task.name}
        if task.gpu and self.gpus:
            options.update(num_gpus=1, num_cpus=1)
        else:
            options.update(num_cpus=1)
        return self.ray.remote(_call).options(**options)

    def run(
        self,
        tasks: Sequence[Task],
        desc: str,
        on_done: Callable[[Task, Any], None] | None = None,
        retries: int | None = None,
    ) -> dict[str, Any]:
        """Run `tasks` (each after those it names), one progress bar over the completed ones; `on_done(task,
        result)` as each finishes. Every task runs to its end; then the first failure is raised (an OdqaError of
        a task as itself, a lost worker as one line naming the task)."""
        from tqdm.auto import tqdm

        retries = self.retries if retries is None else retries
        refs: dict[str, Any] = {}
        pending: dict[Any, Task] = {}
        for task in tasks:
            ref = self._remote(task, retries).remote(
                self.version, self.cwd, task.fn, task.args, *(refs[n] for n in task.after)
            )
            refs[task.name] = ref
            pending[ref] = task
        results: dict[str, Any] = {}
        failures: list[BaseException] = []
        failed_names: set[str] = set()
        with tqdm(total=len(tasks), desc=desc, unit=" task") as bar:
            while pending:
                done, _ = self.ray.wait(list(pending), num_returns=1)
                for ref in done:
                    task = pending.pop(ref)
                    try:
                        result = self.ray.get(ref)
                    except Exception as exc:  # a task's failure is reported when all are done
                        failed_names.add(task.name)
                        if not any(name in failed_names for name in task.after):  # its cause is reported already
                            failure = self._failure(task, exc, retries)
                            failures.append(failure)
                            bar.write(f"odqa: {task.name} failed: {failure}", file=sys.stderr)
                    else:
                        results[task.name] = result
                        if on_done is not None:
                            on_done(task, result)
                    bar.update(1)
        if failures:
            first = failures[0]
            if len(failures) > 1 and isinstance(first, OdqaError):
                first = type(first)(f"{first} ({len(failures) - 1} more tasks failed, listed above)")
            raise first
        return results

    def map_ordered(
        self,
        fn: Callable[..., Any],
        items: Iterable[Any],
        desc: str,
        args: tuple = (),
        gpu: bool = False,
        total: int | None = None,
    ) -> Iterator[Any]:
        """`fn(item, *args)` for every item as tasks, at most twice the cluster's slots in flight, the results
        yielded in the items' order (so a caller writes them as they come, in bounded memory). A failure is
        raised at once. `total`: the items' number, for the progress bar (else their len() where they have one)."""
        from tqdm.auto import tqdm

        if total is None and isinstance(items, Sized):
            total = len(items)

        in_flight = 2 * self.slots
        queue: list[tuple[int, Any]] = []
        finished: dict[int, Any] = {}
        task = Task(desc, fn, gpu=gpu)
        remote = self._remote(task, self.retries)
        submitted = 0
        next_out = 0
        items = iter(items)
        exhausted = False
        with tqdm(total=total, desc=desc, unit=" task") as bar:
            while True:
                while not exhausted and len(queue) < in_flight:
                    try:
                        item = next(items)
                    except StopIteration:
                        exhausted = True
                        break
                    queue.append((submitted, remote.remote(self.version, self.cwd, fn, (item, *args))))
                    submitted += 1
                if not queue:
                    break
                done, _ = self.ray.wait([ref for _, ref in queue], num_returns=1)
                for number, ref in [(n, r) for n, r in queue if r in done]:
                    queue.remove((number, ref))
                    try:
                        finished[number] = self.ray.get(ref)
                    except Exception as exc:
                        for _, other in queue:
                            self.ray.cancel(other)
                        raise self._failure(Task(f"{desc} {number + 1}", fn), exc, self.retries) from None
                    bar.update(1)
                while next_out in finished:
                    yield finished.pop(next_out)
                    next_out += 1

    def _failure(self, task: Task, exc: BaseException, retries: int) -> BaseException:
        cause = getattr(exc, "cause", None)
        if isinstance(cause, OdqaError):
            return cause
        if type(exc).__name__ in _LOST or type(cause).__name__ in _LOST:
            return OdqaError(
                f"{task.name}: its worker was lost {retries + 1} time(s) ({type(exc).__name__}); rerun the "
                "command (finished pieces are kept) and check the cluster's memory and nodes"
            )
        return cause if isinstance(cause, Exception) else exc


def worker_environment() -> dict[str, str]:
    """What every task's process is given: no progress bars of its own (the caller's shows the tasks)."""
    return {"TQDM_DISABLE": "1"}


@contextlib.contextmanager
def ray_cluster(settings: RaySettings, temp_root: str | Path | None = None) -> Iterator[Cluster]:
    """Connect to the Ray `settings` names for the block (`local`: start it, and stop it after)."""
    address = settings.check()
    require("ray", f"--ray {address}")
    if address == LOCAL:
        with _local_ray(settings.workers or os.cpu_count() or 1, temp_root) as cluster:
            yield cluster
        return
    import ray

    try:
        ray.init(
            address=address,
            log_to_driver=False,
            configure_logging=False,
            runtime_env={"env_vars": worker_environment()},
        )
    except (ConnectionError, RuntimeError, ValueError) as exc:
        message = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise OdqaError(
            f"could not join the Ray cluster at {address} ({message}); start it with `ray start --head` or check "
            "the address"
        ) from None
    try:
        yield Cluster(ray, address)
    finally:
        ray.shutdown()


# Ray reads these when it starts: services on the loopback address only (what its single-machine mode does), token
# authentication with the token in the environment (not ~/.ray/auth_token), no usage reports
_LOCAL_ENVIRONMENT = {
    "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
    "RAY_AUTH_MODE": "token",
    "RAY_USAGE_STATS_ENABLED": "0",
}


@contextlib.contextmanager
def _local_ray(workers: int, temp_root: str | Path | None) -> Iterator[Cluster]:
    saved = {name: os.environ.get(name) for name in (*_LOCAL_ENVIRONMENT, "RAY_AUTH_TOKEN")}
    os.environ.update(_LOCAL_ENVIRONMENT)
    os.environ["RAY_AUTH_TOKEN"] = secrets.token_hex(32)
    # short: Ray's sockets live under it, and a socket's path is limited to about a hundred bytes
    temp = Path(tempfile.mkdtemp(prefix="odqa-ray-", dir=temp_root))
    try:
        import ray
        import ray._private.ray_constants as ray_constants

        # read once when ray is imported: a process that imported it before the environment was set binds the
        # machine's address otherwise
        cluster_mode = ray_constants.ENABLE_RAY_CLUSTER
        ray_constants.ENABLE_RAY_CLUSTER = False
        # the workers import this odqa, wherever the command found it (a source checkout is not on their path)
        package_root = str(Path(sys.modules["odqa"].__file__ or ".").resolve().parent.parent)
        python_path = os.pathsep.join(p for p in (package_root, os.environ.get("PYTHONPATH", "")) if p)
        try:
            ray.init(
                address=LOCAL,
                num_cpus=workers,
                include_dashboard=False,
                log_to_driver=False,
                configure_logging=False,
                _temp_dir=str(temp),
                runtime_env={"env_vars": {**worker_environment(), "PYTHONPATH": python_path}},
            )
        except (ConnectionError, RuntimeError, ValueError, OSError) as exc:
            message = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise OdqaError(f"could not start a local Ray ({message}); run `ray stop` and try again") from None
        try:
            yield Cluster(ray, LOCAL)
        finally:
            ray.shutdown()
            ray_constants.ENABLE_RAY_CLUSTER = cluster_mode
    finally:
        shutil.rmtree(temp, ignore_errors=True)
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
