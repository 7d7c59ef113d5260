"""memoryd's worker overrides the arq methods for which arq has no hook (memoryd.runtime.worker).
These tests pin what each override relies on to the arq range pyproject.toml allows: they fail
when an arq release changes it, before a daemon misbehaves."""

from __future__ import annotations

import inspect
import tomllib
from pathlib import Path

from arq.version import VERSION
from arq.worker import Worker
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from memoryd.runtime.worker import MemorydWorker

PYPROJECT = Path(__file__).resolve().parent.parent / "pyproject.toml"
# Every arq method MemorydWorker overrides, with the parameters it is called with.
OVERRIDES = {
    "main": ["self"],
    "_poll_iteration": ["self"],
    "start_jobs": ["self", "job_ids"],
    "run_job": ["self", "job_id", "score"],
    "finish_failed_job": ["self", "job_id", "result_data"],
}


def _arq_range() -> SpecifierSet:
    deps = tomllib.loads(PYPROJECT.read_text())["project"]["dependencies"]
    [spec] = [d for d in deps if d.split(">")[0].split("<")[0].split("=")[0].strip() == "arq"]
    return SpecifierSet(spec.removeprefix("arq"))


def test_the_installed_arq_is_in_the_range_the_overrides_are_pinned_to():
    assert Version(VERSION) in _arq_range(), f"arq {VERSION} is outside pyproject's {_arq_range()}"


def test_every_override_is_listed_and_takes_arqs_parameters():
    overridden = {
        name
        for name, value in vars(MemorydWorker).items()
        if callable(value) and name != "__init__" and hasattr(Worker, name)
    }
    assert overridden == set(OVERRIDES), "a new override needs its reason and its pin here"
    for name, params in OVERRIDES.items():
        assert list(inspect.signature(getattr(Worker, name)).parameters) == params, name
        assert list(inspect.signature(getattr(MemorydWorker, name)).parameters) == params, name


def test_arq_still_calls_what_the_overrides_and_the_hook_rely_on():
    main = inspect.getsource(Worker.main)
    poll = inspect.getsource(Worker._poll_iteration)
    start = inspect.getsource(Worker.start_jobs)
    run_job = inspect.getsource(Worker.run_job)
    failed = inspect.getsource(Worker.finish_failed_job)
    # The poll loop goes through _poll_iteration, which starts jobs through start_jobs.
    assert "await self._poll_iteration()" in main
    assert "await self.start_jobs(job_ids)" in poll
    # start_jobs keeps the running tasks by job id (the override skips ids still running), and
    # runs each through run_job (whose override fails a job arq's decoding trips over).
    assert "self.tasks[job_id] = t" in start
    assert "self.run_job(job_id, int(score))" in start
    # The poll loop re-raises what a job's task raised (why run_job's override catches it).
    assert "t.result()" in poll
    # arq decodes a job with our deserializer before reading its fields, and fails it on error.
    assert "deserialize_job_raw(" in run_job and "except SerializationError" in run_job
    # The give-up paths end in finish_failed_job, which stores the result under its key.
    assert run_job.count("self.finish_failed_job(") >= 2
    assert "result_key_prefix + job_id" in failed
    # after_job_end runs once finish_job has stored the result, with the job's id in its ctx:
    # the doorbell it rings must never wake a client before the result is there.
    assert run_job.index("self.finish_job(") < run_job.index("await self.after_job_end(ctx)")
    assert "'job_id': job_id" in run_job
