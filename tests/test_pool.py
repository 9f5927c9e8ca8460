"""The fork pool (ctxtool/run/pool.py): answers in order of submission, errors and deaths come
back to the job they belong to, leaving by an exception ends the workers now."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from ctxtool.errors import CtxtoolError, Failure
from ctxtool.run.pool import RemoteTraceback, WorkerDied, worker_pool

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="the fork pool needs os.fork")


def _square(x: int) -> tuple[int, int]:
    return x * x, os.getpid()


def _fail(kind: str) -> None:
    if kind == "user":
        raise CtxtoolError("bad line", path="f.jsonl", line=3, kind=Failure.INPUT)
    if kind == "unpicklable":
        class Local(Exception):  # a class pickle cannot find
            pass

        raise Local("from a local class")
    raise KeyError(kind)


def _die(_: int) -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def _nap(seconds: float) -> int:
    time.sleep(seconds)
    return os.getpid()


def test_answers_come_in_the_order_submitted_from_every_worker() -> None:
    with worker_pool(2) as ex:
        jobs = [ex.submit(_square, i) for i in range(40)]
        got = [j.result() for j in jobs]
        assert [x for x, _ in got] == [i * i for i in range(40)]
        assert len({pid for _, pid in got}) == 2 and os.getpid() not in {pid for _, pid in got}
        assert [x for x, _ in ex.map(_square, [3, 4])] == [9, 16]


def test_a_worker_exception_is_raised_here_with_its_traceback() -> None:
    with worker_pool(2) as ex:
        user, other, odd, after = (ex.submit(_fail, "user"), ex.submit(_fail, "other"),
                                   ex.submit(_fail, "unpicklable"), ex.submit(_square, 5))
        with pytest.raises(CtxtoolError) as e:
            user.result()
        assert (e.value.path, e.value.line, e.value.kind) == ("f.jsonl", 3, Failure.INPUT)
        with pytest.raises(KeyError) as k:
            other.result()
        assert isinstance(k.value.__cause__, RemoteTraceback) and "_fail" in str(k.value.__cause__)
        with pytest.raises(RuntimeError, match="Local: from a local class"):
            odd.result()
        assert after.result()[0] == 25  # the workers go on


class _Unreadable:
    """Pickles in a worker, cannot be read back here."""

    def __reduce__(self) -> tuple[object, tuple[()]]:
        return (_refuse, ())


def _refuse() -> None:
    raise ValueError("cannot be read here")


def _unreadable(_: int) -> _Unreadable:
    return _Unreadable()


def test_an_answer_that_cannot_be_read_fails_its_job_and_the_worker_goes_on() -> None:
    with worker_pool(1) as ex:
        bad, good = ex.submit(_unreadable, 0), ex.submit(_square, 4)
        with pytest.raises(ValueError, match="cannot be read here"):
            bad.result()
        assert good.result()[0] == 16


def test_a_worker_that_dies_fails_its_own_job_only() -> None:
    with worker_pool(2) as ex:
        dead = ex.submit(_die, 0)
        rest = [ex.submit(_square, i) for i in range(6)]
        with pytest.raises(WorkerDied, match="signal 9"):
            dead.result()
        assert [j.result()[0] for j in rest] == [i * i for i in range(6)]


def test_when_every_worker_died_the_queued_jobs_fail() -> None:
    with worker_pool(1) as ex:
        dead, queued = ex.submit(_die, 0), ex.submit(_square, 2)
        with pytest.raises(WorkerDied):
            queued.result()
        assert dead.done()


def test_a_queued_job_cancels_a_running_one_does_not() -> None:
    with worker_pool(1) as ex:
        running, queued = ex.submit(_nap, 0.2), ex.submit(_square, 3)
        assert queued.cancel() and not running.cancel()
        assert running.result() != os.getpid()
        with pytest.raises(RuntimeError, match="cancelled"):
            queued.result()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_leaving_by_an_exception_kills_the_running_workers_now() -> None:
    pids: list[int] = []
    t = time.monotonic()
    with pytest.raises(KeyError), worker_pool(2) as ex:
        ex.submit(_nap, 60)
        ex.submit(_nap, 60)
        pids = [w.pid for w in ex._workers.values()]
        raise KeyError("stop")
    assert time.monotonic() - t < 10
    assert pids and not any(_alive(p) for p in pids)  # killed and reaped


def test_leaving_normally_runs_every_job_and_reaps_the_workers() -> None:
    with worker_pool(2) as ex:
        jobs = [ex.submit(_nap, 0.05) for _ in range(3)]
        pids = [w.pid for w in ex._workers.values()]
    assert all(j.done() for j in jobs)
    assert not any(_alive(p) for p in pids)


def test_buffered_output_is_written_once_not_again_by_each_worker(tmp_path: Path) -> None:
    script = tmp_path / "s.py"
    script.write_text(textwrap.dedent("""
        import sys
        from ctxtool.run.pool import worker_pool
        def say(x):
            sys.stdout.write(f"job{x};")
            sys.stdout.flush()
        if __name__ == "__main__":
            sys.stdout.write("before;")  # buffered: stdout is a pipe
            with worker_pool(2) as ex:
                for j in [ex.submit(say, i) for i in range(2)]:
                    j.result()
            sys.stdout.write("after")
    """))
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, check=True, timeout=60).stdout
    assert out.count("before;") == 1 and sorted(out.split(";")) == ["after", "before", "job0", "job1"]


def _gone(pid: int) -> bool:
    """Whether the process ``pid`` has exited (a zombie not yet reaped, or reaped)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_after_no_more_jobs_each_worker_exits_once_it_has_answered() -> None:
    with worker_pool(2) as ex:
        jobs = [ex.submit(_square, i) for i in range(5)]
        ex.no_more_jobs()
        with pytest.raises(RuntimeError, match="no_more_jobs"):
            ex.submit(_square, 6)
        got = [j.result() for j in jobs]
        assert [x for x, _ in got] == [0, 1, 4, 9, 16]
        pids = {pid for _, pid in got}
        deadline = time.monotonic() + 60
        while not all(_gone(p) for p in pids) and time.monotonic() < deadline:  # before close: no job pipe left open
            time.sleep(0.01)
        assert all(_gone(p) for p in pids)
