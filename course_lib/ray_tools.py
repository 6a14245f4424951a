"""Ray, the way the workbook uses it: starting it, reading its errors, asking it about actors.

- `init_ray()` is the only place the workbook calls `ray.init`. On a laptop it starts a private
  local Ray instance; with RAY_ADDRESS set (or `address=` given) it joins that cluster
  instead, after checking that the address answers, so a wrong address fails in seconds with
  a message instead of hanging.
- `get_result(ref)`: `ray.get`, but an error raised in an actor comes back as itself.
- `reason(err)` and `actor_died(err)`: one line saying why a Ray call failed, and which actor
  died behind it.
- `started_here()`, `restart_count()`, `live_actors()`, `is_gone(actor_id)`: what this Ray
  instance is, how often Ray restarted the actor we run in, which actors hold resources now,
  and whether a killed actor's process has exited.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import threading
from contextlib import contextmanager

import ray
from ray.exceptions import RayActorError, RayTaskError

from course_lib.errors import RayStartError, first_line


def init_ray(num_cpus: int | None = None, address: str | None = None, *,
             dashboard: bool = False, timeout_s: float = 90.0, **ray_kwargs):
    """Start a quiet local Ray instance, or join the cluster at `address` / RAY_ADDRESS.

    Returns the Ray context (assign it: `_ = init_ray()` keeps the banner out of outputs).
    Calling it again while Ray runs returns the running instance.
    Quiet means `log_to_driver=False`: a `print()` inside a task or actor does not reach the
    notebook. Pass `log_to_driver=True` (any `ray.init` keyword overrides the defaults) to
    see worker prints, or read them in the dashboard's Logs page.
    """
    address = address or os.environ.get("RAY_ADDRESS") or "local"
    if address != "local":
        _check_reachable(address)
    if ray.is_initialized():
        return ray.get_runtime_context()
    kwargs = dict(address=address, log_to_driver=False, logging_level=logging.ERROR,
                  ignore_reinit_error=True) | ray_kwargs
    if address == "local":
        kwargs.update(num_cpus=num_cpus, include_dashboard=dashboard)
    with _deadline(timeout_s, address):
        for attempt in (1, 2):   # a busy machine can miss Ray's start-up timeout once
            try:
                return ray.init(**kwargs)
            except Exception as err:  # Ray raises bare Exceptions when the raylet or GCS fails
                ray.shutdown()
                if attempt == 2:
                    raise RayStartError(
                        f"Ray failed to start ({err}). Run `ray stop --force` and retry; "
                        "on a busy machine, close other Ray programs first.") from None


def _check_reachable(address: str, timeout_s: float = 5.0) -> None:
    """Fail fast when `address` ('host:port' or 'ray://host:port') does not answer."""
    if address == "auto":
        return
    host_port = address.split("://", 1)[-1]
    host, _, port = host_port.rpartition(":")
    if not host or not port.isdigit():
        raise RayStartError(f"Ray address {address!r} is not of the form host:port "
                            "(for example 127.0.0.1:6379); fix RAY_ADDRESS or pass address=.")
    try:
        socket.create_connection((host, int(port)), timeout=timeout_s).close()
    except OSError as err:
        raise RayStartError(
            f"Cannot reach a Ray cluster at {address} ({err.strerror or err}). Start one with "
            "`ray start --head`, fix RAY_ADDRESS, or unset it to run locally.") from None


class _deadline:
    """Interrupt the main thread (with SIGINT, which also wakes a blocking system call) if the
    block takes longer than `timeout_s`. Off when called from another thread."""

    def __init__(self, timeout_s: float, address: str):
        self.timeout_s, self.address = timeout_s, address
        self.fired = False

    def _fire(self):
        self.fired = True
        signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)

    def __enter__(self):
        self.timer = threading.Timer(self.timeout_s, self._fire)
        self.timer.daemon = True
        self.previous = None
        if threading.current_thread() is threading.main_thread():
            # SIGINT must raise KeyboardInterrupt here, even if an event loop (asyncio,
            # Playwright, ...) has put its own handler in place meanwhile
            if signal.getsignal(signal.SIGINT) is not None:
                self.previous = signal.signal(signal.SIGINT, signal.default_int_handler)
            self.timer.start()
        return self

    def __exit__(self, exc_type, exc, tb):
        self.timer.cancel()
        if self.previous is not None:
            signal.signal(signal.SIGINT, self.previous)
        if self.fired and exc_type is KeyboardInterrupt:
            ray.shutdown()
            raise RayStartError(
                f"Ray did not start within {self.timeout_s:.0f} s (address={self.address}). "
                "Run `ray stop --force`, check free space in /dev/shm and /tmp, and try again; "
                "see the README's troubleshooting section.") from None
        return False


# ---------------------------------------------------------------------------------------------
# Reading Ray's errors
# ---------------------------------------------------------------------------------------------

def get_result(ref: ray.ObjectRef):
    """`ray.get(ref)`, but an error raised in the actor is re-raised as itself (one-line
    message, original type) instead of a RayTaskError carrying the remote traceback."""
    try:
        return ray.get(ref)
    except RayTaskError as err:
        if err.cause is None:
            raise
        raise err.cause from None


@contextmanager
def one_line_errors():
    """An error whose message is the whole story (`errors.OneLineError`), raised in an actor,
    reaches the driver inside one `RayTaskError` per actor it crossed: re-raise it as itself."""
    from course_lib.errors import OneLineError

    try:
        yield
    except RayTaskError as err:
        cause = err
        while isinstance(cause, RayTaskError) and cause.cause is not None:
            cause = cause.cause
        if isinstance(cause, OneLineError):
            raise type(cause)(str(cause)) from None
        raise


def reason(err: BaseException) -> str:
    """One line saying why `err` happened: the original error of a task (`Type: message`),
    the last line of the traceback of an actor whose `__init__` raised, or Ray's own first
    line (for an actor killed or lost with its process)."""
    from course_lib.errors import OneLineError

    if isinstance(err, RayTaskError):
        return reason(err.cause) if err.cause is not None else _last_line(str(err))
    if isinstance(err, RayActorError) and err.actor_init_failed:
        line = _last_line(str(err))        # "...Traceback...\nModule.Error: what went wrong"
        for cls in _one_line_classes(OneLineError):   # such a message says it all
            line = line.split(f"{cls.__name__}: ", 1)[-1]
        return line
    if isinstance(err, RayActorError):     # Ray's line, then its "\tkey: value" details,
        lines = str(err).strip().splitlines() or [type(err).__name__]   # then why, if known
        why = [line.strip() for line in lines[1:] if line.strip() and not line.startswith("\t")]
        return " ".join(lines[:1] + why[-1:])
    if isinstance(err, OneLineError):
        return str(err)
    return first_line(err)


def _one_line_classes(cls: type) -> list[type]:
    return [cls, *(c for sub in cls.__subclasses__() for c in _one_line_classes(sub))]


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else "unknown error"


def actor_died(err: BaseException) -> RayActorError | None:
    """The RayActorError behind `err`: `err` itself (the actor running the task died) or the
    error its task raised (an actor it called died); None for any other error."""
    if isinstance(err, RayTaskError):      # checked first: Ray subclasses it per cause type
        return err.cause if isinstance(err.cause, RayActorError) else None
    return err if isinstance(err, RayActorError) else None


# ---------------------------------------------------------------------------------------------
# Asking Ray about this instance and its actors
# ---------------------------------------------------------------------------------------------

def started_here() -> bool:
    """True when this process started its Ray instance (`init_ray` on a laptop): no autoscaler
    runs, so the resources it has now are all it will ever have."""
    return ray._private.worker.global_worker.node.is_head()


def restart_count() -> int:
    """How often Ray has restarted the actor this runs in (0 outside an actor), from Ray's own
    actor table: the number `was_current_actor_reconstructed` reads (Ray is pinned)."""
    from ray._private.state import actors

    actor_id = ray.get_runtime_context().get_actor_id()
    info = actors(actor_id=actor_id) if actor_id else None
    return int(info["NumRestarts"]) if info else 0


def is_gone(actor_id: str) -> bool:
    """Whether the actor is dead in Ray's table and, if it ran on this machine, has exited."""
    from ray._private.state import actors  # the table keeps a dead actor's pid (Ray is pinned)

    info = actors(actor_id=actor_id)
    if not info or info["State"] != "DEAD":
        return False
    pid, ip = info.get("Pid"), info.get("Address", {}).get("IPAddress")
    if not pid or ip != ray.util.get_node_ip_address():
        return True
    try:
        os.kill(pid, 0)                      # signal 0: only asks whether the process exists
    except ProcessLookupError:
        return True
    except PermissionError:
        return False                         # it exists, and is someone else's
    return False


def reserved_device() -> str:
    """The torch device of the actor this runs in: "cuda" when Ray gave it a GPU, else "cpu",
    even where a GPU is visible (Ray 2.60 no longer hides GPUs from actors that asked for
    none, so `torch.cuda.is_available()` would put a learner on a GPU nobody reserved)."""
    return "cuda" if ray.get_gpu_ids() else "cpu"


def live_actors() -> list[dict]:
    """The actors not dead now, from Ray's actor table (no dashboard needed), each as
    {"class", "name", "state", "cpus", "gpus", "restarts"}; state is "ALIVE", "RESTARTING", ...
    Read from the table's records themselves: `ray._private.state.actors()` leaves out the
    resources an actor holds (Ray is pinned)."""
    from ray._private.state import state
    from ray.core.generated import gcs_pb2

    rows = []
    for raw in state._connect_and_get_accessor().get_actor_table(None, None):
        data = gcs_pb2.ActorTableData.FromString(raw)
        status = gcs_pb2.ActorTableData.ActorState.Name(data.state)
        if status != "DEAD":
            need = dict(data.required_resources)
            rows.append({"class": data.class_name, "name": data.name, "state": status,
                         "cpus": need.get("CPU", 0.0), "gpus": need.get("GPU", 0.0),
                         "restarts": data.num_restarts})
    return rows
