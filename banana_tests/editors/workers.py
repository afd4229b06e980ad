"""`generate --workers N`: the chains spread over N forked worker processes, one writer.

Each worker is forked from the command once its editor is built (one model per process, shared
copy-on-write, no second import of torch), takes the next chain not yet taken, and sends each
finished step (its record and PNG bytes) down its own pipe; the parent records them in the order
they come, as `generate` records its own. A worker writes no file, so a worker killed at any
moment leaves nothing behind. Workers run one torch thread each (the bytes at one thread are the
set's bytes at any N), so N is at most the cores this process may use.

A chain that fails stops the whole command: the other workers are ended (SIGTERM) and the failure
is one line naming the seed image, run and step. Ctrl-C reaches the workers with the command
(one process group); SIGTERM to the command ends them too. A worker whose parent is gone stops
after its step.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import sys
from collections.abc import Callable, Sequence
from multiprocessing.connection import Connection, wait
from typing import TYPE_CHECKING, Any

from banana_tests.editors.base import Editor
from banana_tests.editors.chains import Chain, ChainFailed, Made, Stopped, steps

if TYPE_CHECKING:
    from multiprocessing.sharedctypes import Synchronized

    from banana_tests.editors.chains import Job

INTERRUPTED = 130


def run_parallel(
    job: Job, editor: Editor, chains: Sequence[Chain], workers: int, take: Callable[[Made | Stopped], None]
) -> None:
    """Make `chains` in `workers` processes, passing each finished step to `take` in this one."""
    context = multiprocessing.get_context("fork")
    taken: Synchronized[int] = context.Value("i", 0)  # type: ignore[assignment]
    procs: list[multiprocessing.process.BaseProcess] = []
    pipes: dict[Connection, tuple[int, list[Any]]] = {}  # reader -> worker index, [chain or "done", step]
    try:
        for index in range(min(workers, len(chains))):
            reader, writer = context.Pipe(duplex=False)
            proc = context.Process(target=_work, args=(job, editor, chains, taken, writer, os.getpid()))
            proc.daemon = True
            proc.start()
            writer.close()  # the worker holds the only writer: its end is the reader's EOF
            procs.append(proc)
            pipes[reader] = (index, [None, 0])
        while pipes:
            for ready in wait(list(pipes)):
                assert isinstance(ready, Connection)
                reader = ready
                index, doing = pipes[reader]
                try:
                    kind, payload = reader.recv()
                except EOFError:
                    del pipes[reader]
                    if doing[0] != "done":  # ended without saying so: a chain it took may be lost
                        procs[index].join()
                        chain: Chain | None = doing[0]
                        where = (
                            f"worker {index + 1}, before its first chain"
                            if chain is None
                            else chain.where(min(doing[1], job.steps))
                        )
                        raise ChainFailed(
                            f"{where}: its worker process ended"
                            f" ({_ending(procs[index].exitcode)}); finished steps are kept"
                        ) from None
                    continue
                if kind == "chain":
                    doing[:] = [chains[payload], chains[payload].start + 1]
                elif kind == "event":
                    take(payload)
                    doing[1] += 1
                elif kind == "done":
                    doing[0] = "done"
                elif kind == "failed":
                    raise ChainFailed(payload)
    finally:
        for ending in procs:
            if ending.is_alive():
                ending.terminate()
        for ending in procs:
            ending.join()
        for reader in pipes:
            reader.close()


def _ending(code: int | None) -> str:
    if code is not None and code < 0:
        name = signal.Signals(-code).name
        return f"killed by {name}" + (": out of memory?" if name == "SIGKILL" else "")
    return f"exit code {code}"


def _work(
    job: Job, editor: Editor, chains: Sequence[Chain], taken: Synchronized[int], conn: Connection, parent: int
) -> None:
    """A worker's life: chains until none is left, each step sent as it is finished; never returns."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # it writes nothing: SIGTERM may end it anywhere
    signal.signal(signal.SIGINT, signal.default_int_handler)
    code = 0
    try:
        while os.getppid() == parent:
            with taken.get_lock():
                index = taken.value
                taken.value += 1
            if index >= len(chains):
                break
            conn.send(("chain", index))
            for event in steps(job, editor, chains[index]):
                conn.send(("event", event))
                if os.getppid() != parent:
                    break
        conn.send(("done", None))
    except ChainFailed as exc:
        conn.send(("failed", str(exc)))
        code = 1
    except KeyboardInterrupt:
        code = INTERRUPTED
    except BaseException as exc:  # a broken pipe to a parent that is gone, a pickling error
        print(f"banana-tests generate worker: {type(exc).__name__}: {exc}", file=sys.stderr)
        code = 1
    finally:
        os._exit(code)  # never back into the parent's code (a test runner, atexit handlers)
