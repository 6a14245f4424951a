"""Starting Ray the same way everywhere: quiet, local by default, bounded in time.

`init_ray()` is the only place the workbook calls `ray.init`. On a laptop it starts a private
local Ray instance; with RAY_ADDRESS set (or `address=` given) it joins that cluster instead,
after checking that the address answers, so a wrong address fails in seconds with a message
instead of hanging.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import threading

import ray


class RayStartError(RuntimeError):
    """Ray could not be started or reached; the message says what to do."""


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
