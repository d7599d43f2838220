"""The thread a mock GPU executes its queues on, so that it runs asynchronously to the host as
hardware does.

A doorbell only records the store and asks the GPU's thread for a pass (`kick`), then returns:
kernels and copies execute while the host goes on, and signals, `done()` and the read pointers
change only when the work has finished. A host that waits runs the pass it is waiting for itself
when the thread has not started it (`run_kicked_here`, from `MockOS.run_gpus_here`), which spares
two hand-offs of the GIL; so a thread that ran or saw a pass lately is not woken by each kick but
polls for them, and takes a kick no waiting host has run within a millisecond. After a while
without kicks it sleeps until the next one wakes it.

The thread takes the mock kernel's lock for each step of execution (one pass over the queues, or
one slice of a long dispatch) and releases it in between, so that ioctls of the host are served
meanwhile; after a long slice, host threads inside the mock kernel (`MockOS.host_entries`) take
the lock before the next slice, or they would rarely win it. While some queue is blocked (a wait
on memory the host may write, a dispatch still running) it polls, backing off from a fraction of
a millisecond to a few milliseconds; otherwise it waits for the next doorbell as above, and it
ends once its GPU has no queues left (the next doorbell starts a new one). After each pass that
changed something it wakes the host threads waiting for the GPU (`MockOS.wake_waiters`), so a
waiter blocks instead of polling and sees a completion at once.

The thread never receives Ctrl-C (Python runs signal handlers on the main thread only), and a
Ctrl-C that reaches a host running a pass is held back until the pass ends (the host holds the
mock kernel's lock, `MockOS.busy_here`), so an interrupted host wait never leaves a
half-executed packet behind.

Deterministic mode: with HCQ_MOCK_SYNC=1 in the environment when a mock machine is built (or
`sync=True` given to its GPUs), no thread is started: a doorbell executes the queues before it
returns and host waits run them, as the first mock did. Everything is then ordered and
reproducible, which helps when debugging; races between host and GPU cannot show.
"""
from __future__ import annotations

import os
import signal
import threading
import time
from typing import Callable, Sized

#: environment variable selecting the deterministic (synchronous) mode for new mock machines
SYNC_ENV = "HCQ_MOCK_SYNC"
_POLL_MIN_S = 0.0002
_POLL_MAX_S = 0.004
# After a pass that held the lock longer than this (a slice of a long dispatch), host threads
# inside the mock kernel go first, for at most _HOST_TURN_MAX_S: long enough for a woken waiter to
# be scheduled on a loaded machine, short enough that an entry miscounted by a Ctrl-C costs little.
_LONG_HOLD_S = 0.002
_HOST_TURN_MAX_S = 0.005
# After a pass that made progress the thread polls for kicks this long, this often, instead of
# being woken by each (a waiting host runs most passes itself); then it sleeps until woken.
_LINGER_S = 0.05
_KICK_POLL_S = 0.002
# A kick the thread sees while it polls is left this long to a host that waits (and runs the
# pass itself) before the thread runs it.
_HOST_FIRST_S = 0.001


def sync_from_env() -> bool:
    """Whether HCQ_MOCK_SYNC asks for the deterministic mode ("1", "true", "yes")."""
    return os.environ.get(SYNC_ENV, "").strip().lower() in ("1", "true", "yes", "on")


class EngineThread:
    """Runs `step` on its own thread whenever kicked, and repeatedly while `step` says a queue is
    blocked. `step` is called with `lock` held and returns (progress made, some queue blocked or
    still running a dispatch, some queue exists); a pass must leave every queue empty, blocked
    or running.

    `kick` may run on the main thread inside a doorbell store, where a Ctrl-C can strike between
    any two statements: it only sets a flag and releases a lock used as a binary semaphore (a C
    call each), so an interrupt there never leaves a lock held."""

    def __init__(self, name: str, lock: "threading.RLock",
                 step: Callable[[], tuple[bool, bool, bool]],
                 on_progress: Callable[[], None] | None = None,
                 host_entries: Sized = ()) -> None:
        self.name, self._lock, self._step = name, lock, step
        self._on_progress = on_progress
        self._host_entries = host_entries
        self._wake = threading.Lock()
        self._wake.acquire()  # held: no kick pending; released: a kick is pending
        self._start_lock = threading.Lock()
        self._kicked = False
        self._asleep = False  # the thread waits to be woken (else it polls for kicks)
        self._kicked_at = 0.0  # perf_counter of the last kick
        self._thread: threading.Thread | None = None
        self._stopped = False
        self.steps = 0

    def kick(self) -> None:
        """Asks the thread for a pass (starting it if needed): a doorbell was rung or state
        changed. A thread that ran a pass lately polls for kicks (`_idle_wait`) and is not woken:
        waking it on every doorbell made it compete for the GIL with the host, which usually
        runs the pass itself when it waits (`run_kicked_here`)."""
        self._kicked_at = time.perf_counter()
        self._kicked = True
        if self._asleep:
            self._wake_thread()
            return
        t = self._thread
        if t is None or not t.is_alive():
            self._start()

    def run_kicked_here(self) -> bool:
        """Runs the pass a kick asked for on the calling thread, which holds `lock`: a host
        waiting for this GPU does the work itself instead of handing the GIL to the GPU's thread
        and back. Does nothing unless a kick is pending (a doorbell the thread has not acted on),
        so a long dispatch keeps running on the GPU's thread, slice by slice. Returns whether
        the pass made progress."""
        if not self._kicked or self._stopped:
            return False
        self._kicked = False
        self._wake.acquire(False)  # the thread, if asleep, stays so: this pass is the kick's
        progress, blocked, _alive = self._step()
        self.steps += 1
        if blocked:
            self._wake_thread()  # it polls the blocked queue (or runs the dispatch) from here
        if progress and self._on_progress is not None:
            self._on_progress()
        return progress

    def _wake_thread(self) -> None:
        try:
            self._wake.release()
        except RuntimeError:
            pass  # already woken
        t = self._thread
        if t is None or not t.is_alive():
            self._start()

    def _start(self) -> None:
        with self._start_lock:
            t = self._thread
            if (t is None or not t.is_alive()) and not self._stopped:
                t = self._thread = threading.Thread(target=self._loop, name=self.name,
                                                    daemon=True)
                t.start()

    def retire(self) -> None:
        """The process that owned this GPU's queues closed it: a thread asleep waiting for a
        kick is woken so that its next pass sees no live queue and the thread ends (a later
        kick starts a new one), and so is one polling for kicks, which would go to sleep
        without another pass."""
        t = self._thread
        if t is not None and t.is_alive():
            try:
                self._wake.release()
            except RuntimeError:
                pass  # already woken

    def stop(self) -> None:
        """Ends the thread (the machine is being dropped); later kicks do nothing."""
        self._stopped = True
        self._kicked = True
        self._wake_thread()
        t = self._thread
        if t is not None and t is not threading.current_thread():
            t.join(timeout=5.0)

    def _let_host_in(self) -> None:
        """Waits (briefly) while host threads are inside the mock kernel. Without this, a thread
        running a long dispatch slice after slice takes the lock back the moment it lets go,
        before a woken host waiter is scheduled, and a host wait or ioctl could starve for
        seconds. Short passes skip it: the launch+wait latency of the mocks is not touched."""
        deadline = time.perf_counter() + _HOST_TURN_MAX_S
        while self._host_entries and time.perf_counter() < deadline:
            time.sleep(_POLL_MIN_S / 4)

    def _loop(self) -> None:
        if hasattr(signal, "pthread_sigmask"):
            # Process-directed signals (Ctrl-C) then go to a host thread, never to the GPU's.
            signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
        poll = _POLL_MIN_S
        active_until = time.perf_counter() + _LINGER_S
        while not self._stopped:
            self._kicked = False
            self._wake.acquire(False)  # this pass sees every doorbell rung so far
            with self._lock:
                held_since = time.perf_counter()
                progress, blocked, alive = self._step()
                self.steps += 1
            if self._host_entries and time.perf_counter() - held_since > _LONG_HOLD_S:
                self._let_host_in()
            if progress and self._on_progress is not None:
                self._on_progress()  # host waiters see the completion now, not at their next poll
            # A pass runs every queue until it is empty or blocked, so after one that made
            # progress another is needed at once only if a queue is still blocked (the progress
            # may release it) or a doorbell was rung meanwhile.
            if self._kicked or (progress and blocked):
                poll = _POLL_MIN_S
                continue
            if blocked:
                self._wake.acquire(True, poll)
                poll = min(poll * 2, _POLL_MAX_S)
                continue
            if not alive:
                with self._start_lock:  # a kick after this sees no thread and starts one
                    if not self._kicked:
                        self._thread = None
                        return
                continue
            if progress:
                active_until = time.perf_counter() + _LINGER_S
            self._idle_wait(active_until)
        self._thread = None

    def _idle_wait(self, active_until: float) -> None:
        """Waits for the next kick: until `active_until` by polling the kick flag (a kick does
        not wake the thread then), afterwards asleep until a kick wakes it. Returns early when
        woken (a blocked queue to poll, `stop`)."""
        while True:
            now = time.perf_counter()
            if self._kicked and now - self._kicked_at >= _HOST_FIRST_S:
                return  # no host waiter ran the pass: the thread does
            # (kicks whose passes the host ran keep the thread polling too)
            active_until = max(active_until, self._kicked_at + _LINGER_S)
            if now >= active_until:
                # Set before the last look at the flag, which kick sets before it looks at this:
                # either this sees the kick or the kick sees the thread asleep and wakes it.
                self._asleep = True
                try:
                    if not self._kicked:
                        self._wake.acquire()
                finally:
                    self._asleep = False
                return
            timeout = min(_KICK_POLL_S, active_until - now)
            if self._kicked:
                timeout = min(timeout, self._kicked_at + _HOST_FIRST_S - now)
            if self._wake.acquire(True, max(timeout, 0.0)):
                return
