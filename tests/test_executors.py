"""Executors (issue 36): the passhost_register_executors hook, the built-in ``local`` one,
``passhost list`` showing them, and ``passhost run A B -o DIR/ --executor NAME`` keeping the
batch's table, exit statuses and atomic outputs whatever runs the jobs. The Dask executor's
own tests are in plugins/passhost-dask/tests/."""
from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor, as_completed

import pytest

from passhost import hookimpl
from passhost.cli import ExitCode, main
from passhost.cli.batch import Job, LocalExecutor, lost_row, run_job
from passhost.errors import PluginConflict, PluginLoadError, UsageError
from passhost.hookspecs import ExecutorEntry, PassEntry
from passhost.registry import Registry, use_registry
from passhost.transform import module_pass

TEXT = """#[version = "0.0.5"]
def @main(%x: Tensor[(2, 3), float32]) {
  %0 = multiply(2f, 3f);
  add(%x, %0)
}
"""


class Threads:
    """Run the jobs in threads of this process."""

    def __init__(self, address=None, *, workers=None, transfer="auto"):
        self.address, self.workers, self.transfer = address, workers, transfer
        self.description = f"{workers or 2} test threads"
        self.entered = self.exited = 0

    def __enter__(self):
        self.entered += 1
        self.pool = ThreadPoolExecutor(self.workers or 2)
        return self

    def __exit__(self, *exc):
        self.exited += 1
        self.pool.shutdown(cancel_futures=True)

    def submit(self, fn, job):
        return self.pool.submit(fn, job)

    def as_completed(self, handles):
        for future in as_completed(handles):
            yield future, future.result()


class ThreadsPlugin:
    def __init__(self, factory=Threads, name="threads"):
        self.factory, self.name = factory, name

    @hookimpl
    def passhost_register_executors(self):
        yield ExecutorEntry(self.name, self.factory, summary="jobs in threads of this process")


def _inputs(tmp_path, n=3):
    paths = []
    for i in range(n):
        path = tmp_path / f"m{i}.txt"
        path.write_text(TEXT.replace("2f, 3f", f"2f, {i + 3}f"))
        paths.append(str(path))
    return paths


@pytest.fixture
def reg():
    """The installed plugins (FoldConstant & co.) plus the in-process threads executor."""
    registry = Registry()
    registry.register_plugin(ThreadsPlugin(), "threads", distribution="passhost-threads", version="0.2.0")
    with use_registry(registry):
        yield registry


def _run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _one_line(err, *parts):
    assert err.startswith("passhost: error: ") and err.count("\n") == 1, err
    assert "Traceback" not in err
    for part in parts:
        assert part in err, err


# -- the registry and passhost list -----------------------------------------------------------
def test_local_is_built_in_and_listed_first(reg, capsys):
    names = [r.name for r in reg.executor_records()]
    assert names[0] == "local" and names[1:] == sorted(names[1:]) and "threads" in names
    assert reg.executor_record("local").source.requirement.startswith("passhost==")
    code, out, _ = _run(capsys, "list")
    assert code == 0
    rows = {line.split()[0]: line.split() for line in out.splitlines() if line.strip()}
    assert rows["local"][1:5] == ["executor", "-", "-", "-"] and rows["local"][5].startswith("passhost==")
    assert rows["threads"][1] == "executor" and rows["threads"][5] == "passhost-threads==0.2.0"
    code, out, _ = _run(capsys, "list", "--json")
    executors = {e["name"]: e for e in json.loads(out)["executors"]}
    assert executors["threads"] == {"name": "threads", "kind": "executor", "plugin": "threads",
                                    "distribution": "passhost-threads", "version": "0.2.0",
                                    "requirement": "passhost-threads==0.2.0",
                                    "summary": "jobs in threads of this process"}
    assert executors["local"]["distribution"] == "passhost"


def test_a_plugin_cannot_take_the_name_local():
    registry = Registry(load_entrypoints=False)
    assert not registry.register_plugin(ThreadsPlugin(name="local"), "mine")
    assert "built-in process pool" in registry.broken[0].error


def test_two_plugins_with_one_executor_name_are_a_conflict():
    registry = Registry(load_entrypoints=False)
    registry.register_plugin(ThreadsPlugin(), "a", distribution="pack-a", version="1")
    registry.register_plugin(ThreadsPlugin(), "b", distribution="pack-b", version="1")
    with pytest.raises(PluginConflict, match="pack-a.*pack-b"):
        registry.executor_record("threads")


@pytest.mark.parametrize("name", ["Dask", "", "my executor", 3])
def test_executor_entry_names_are_lower_case_words(name):
    with pytest.raises(PluginLoadError, match="lower-case word"):
        ExecutorEntry(name, Threads)


def test_an_uninstalled_first_party_executor_names_its_distribution():
    registry = Registry(load_entrypoints=False)
    with pytest.raises(UsageError) as info:
        registry.executor_record("dask")
    assert str(info.value) == ("executor 'dask' is not installed; it is provided by the distribution "
                               "'passhost-dask' (pip install passhost-dask)")
    with pytest.raises(UsageError, match="unknown executor 'ray'; installed executors: local"):
        registry.executor_record("ray")


# -- passhost run --executor -------------------------------------------------------------------
def test_a_plugin_executor_writes_what_the_local_one_writes(reg, tmp_path, capsys):
    inputs = _inputs(tmp_path)
    code, local_table, _ = _run(capsys, "run", *inputs, "-p", "FoldConstant", "-o", str(tmp_path / "local/"))
    assert code == 0
    code, table, err = _run(capsys, "run", *inputs, "-p", "FoldConstant", "-o", str(tmp_path / "threads/"),
                            "--executor", "threads", "-j", "3")
    assert code == 0, err
    assert "passhost: note: running 3 model(s) on 3 test threads" in err
    assert table.splitlines()[-1] == local_table.splitlines()[-1] == "3 model(s), 3 ok, 0 failed"
    assert [line.split()[0] for line in table.splitlines()[1:-1]] == ["m0.txt", "m1.txt", "m2.txt"]
    for i in range(3):
        assert (tmp_path / "threads" / f"m{i}.txt").read_bytes() == (tmp_path / "local" / f"m{i}.txt").read_bytes()


def test_the_factory_gets_the_address_jobs_and_transfer(reg, tmp_path, capsys):
    seen = []

    def factory(address=None, **options):
        seen.append((address, options))
        return Threads(address, **options)

    reg.register_plugin(ThreadsPlugin(factory, "spy"), "spy")
    code, _, err = _run(capsys, "run", *_inputs(tmp_path, 2), "-p", "FoldConstant", "-o", str(tmp_path / "o/"),
                        "--executor", "spy://host:8786", "--transfer", "bytes")
    assert code == 0, err
    assert seen == [("host:8786", {"workers": None, "transfer": "bytes"})]


class Losing(Threads):
    """Yields the first job's row only, then stops (an executor that loses jobs)."""

    def as_completed(self, handles):
        handles = list(handles)
        yield handles[0], handles[0].result()


class Failing(Threads):
    """Raises after the first row (a lost scheduler, a bug)."""

    def as_completed(self, handles):
        handles = list(handles)
        yield handles[0], handles[0].result()
        raise ConnectionError("lost the scheduler")


@pytest.mark.parametrize("factory, message", [(Losing, "executor 'bad' did not run it"),
                                              (Failing, "executor 'bad' failed: ConnectionError: lost the scheduler")])
def test_a_job_the_executor_loses_is_a_failed_row_and_exit_1(reg, tmp_path, capsys, factory, message):
    reg.register_plugin(ThreadsPlugin(factory, "bad"), "bad")
    code, table, err = _run(capsys, "run", *_inputs(tmp_path), "-p", "FoldConstant", "-o", str(tmp_path / "o/"),
                            "--executor", "bad")
    assert code == ExitCode.PASS_FAILED and "Traceback" not in err
    assert table.splitlines()[-1] == "3 model(s), 1 ok, 2 failed"
    assert sum(message in line for line in table.splitlines()) == 2


def test_a_note_on_a_row_shows_in_the_table_and_as_a_warning(reg, tmp_path, capsys):
    class Noting(Threads):
        def as_completed(self, handles):
            for future, row in super().as_completed(handles):
                row["note"] = "run again: its first worker died"
                yield future, row

    reg.register_plugin(ThreadsPlugin(Noting, "noting"), "noting")
    code, table, err = _run(capsys, "run", *_inputs(tmp_path, 2), "-p", "FoldConstant", "-o",
                            str(tmp_path / "o/"), "--executor", "noting")
    assert code == 0
    assert "ok (run again: its first worker died)" in table.splitlines()[1]
    assert "passhost: warning: m0.txt: run again: its first worker died" in err


def test_an_executor_that_cannot_start_is_one_line_exit_2(reg, tmp_path, capsys):
    class Broken(Threads):
        def __enter__(self):
            raise RuntimeError("no cluster here")

    reg.register_plugin(ThreadsPlugin(Broken, "broken"), "broken", distribution="passhost-broken", version="1")
    code, _, err = _run(capsys, "run", *_inputs(tmp_path, 2), "-p", "FoldConstant", "-o", str(tmp_path / "o/"),
                        "--executor", "broken")
    assert code == ExitCode.USAGE_ERROR
    _one_line(err, "executor 'broken' (passhost-broken==1) could not start: RuntimeError: no cluster here")
    assert not list((tmp_path / "o").iterdir())


class IdentityPlugin:
    @hookimpl
    def passhost_register_passes(self):
        yield PassEntry("Identity", lambda: module_pass(lambda mod, ctx: mod, opt_level=0, name="Identity"))


def test_executor_dask_without_its_plugin_names_the_distribution(tmp_path, capsys):
    registry = Registry(load_entrypoints=False)  # passhost-dask is not installed here
    registry.register_plugin(IdentityPlugin(), "identity")
    with use_registry(registry):
        code, _, err = _run(capsys, "run", *_inputs(tmp_path, 2), "-p", "Identity", "-o", str(tmp_path / "out/"),
                            "--executor", "dask")
    assert code == ExitCode.USAGE_ERROR
    _one_line(err, "executor 'dask' is not installed; it is provided by the distribution 'passhost-dask' "
                   "(pip install passhost-dask)")
    assert not (tmp_path / "out").exists()  # nothing made before the executor was found


@pytest.mark.parametrize("argv, message", [
    (["--executor", "ray"], "unknown executor 'ray'; installed executors: local, "),
    (["--executor", "dask://"], "--executor 'dask://': give NAME or NAME://ADDRESS"),
    (["--executor", "local://host:1"], "the local executor takes no address"),
    (["--transfer", "bytes"], "--transfer bytes: the local executor's processes read and write"),
    (["--transfer", "smoke"], "argument --transfer: invalid choice: 'smoke'"),
    (["-j", "0"], "-j 0: give at least 1 process"),
])
def test_bad_executor_options_are_one_line_exit_2(reg, tmp_path, capsys, argv, message):
    code, _, err = _run(capsys, "run", *_inputs(tmp_path, 2), "-p", "FoldConstant", "-o", str(tmp_path / "o/"),
                        *argv)
    assert code == ExitCode.USAGE_ERROR
    _one_line(err, message)


@pytest.mark.parametrize("argv", [["--executor", "threads"], ["--transfer", "paths"]])
def test_executor_options_need_a_batch(reg, tmp_path, capsys, argv):
    code, _, err = _run(capsys, "run", _inputs(tmp_path, 1)[0], "-p", "FoldConstant", "-o", str(tmp_path / "o.txt"),
                        *argv)
    assert code == ExitCode.USAGE_ERROR
    _one_line(err, "applies to a batch: give several INPUTs, or -o DIR/ for one")
    assert not (tmp_path / "o.txt").exists()


# -- the built-in local executor ---------------------------------------------------------------
def test_local_executor_with_one_worker_runs_in_order_in_this_process(tmp_path):
    jobs = [Job(p, None, "FoldConstant", 2) for p in _inputs(tmp_path)]
    with LocalExecutor() as ex:
        assert ex.description == "this process"
        handles = [ex.submit(run_job, job) for job in jobs]
        done = [(h, row["model"]) for h, row in ex.as_completed(handles)]
    assert done == [(h, j.input) for h, j in zip(handles, jobs)]


def test_lost_row_is_a_failed_row_with_exit_1():
    row = lost_row(Job("a.onnx", "out/a.onnx", "", 2), "its worker died")
    assert row["error"] == "its worker died" and row["exit"] == ExitCode.PASS_FAILED
    assert row["model"] == "a.onnx" and row["output"] == "out/a.onnx" and row["seconds"] is None
