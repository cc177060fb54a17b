"""The ``dask`` executor on a real Dask cluster: a LocalCluster with two worker processes
on 127.0.0.1, as ``dask scheduler`` + ``dask worker`` would give on one machine.

What they show: a batch through ``--executor dask://HOST:PORT`` (paths and bytes),
``DASK_SCHEDULER_ADDRESS`` and ``--executor dask`` (a LocalCluster of its own) writes
outputs byte-identical to a local ``-j 1`` run, with the same table and exit status; a
worker killed in the middle of a batch loses no model (the model is run again elsewhere
and the row says so), a model that kills every worker it lands on is a failed row with
nothing written; an unreachable scheduler is one line, exit 2.

Killing is deterministic: a worker plugin (installed in every worker, restarted ones
included) wraps ``passhost.jobs.run_job`` so that the job of one named model
``os._exit``\\ s its worker process on its first attempts, counted with files created
``O_EXCL`` in a directory every process sees.
"""
from __future__ import annotations

import logging
import os
import re

import pytest

dask = pytest.importorskip("dask")
distributed = pytest.importorskip("distributed")

from passhost.cli import ExitCode, main  # noqa: E402
from passhost_dask.executor import DaskExecutor  # noqa: E402

from passhost.errors import UsageError  # noqa: E402

TEXT = """#[version = "0.0.5"]
def @main(%x: Tensor[(2, 3), float32]) {
  %0 = multiply(2f, 3f);
  %1 = add(%x, %0);
  %2 = add(%x, %0);
  multiply(%1, %2)
}
"""
NAMES = [f"m{i}.txt" for i in range(6)]
#: a model that had finished on a worker killed before it reported so is run again, and
#: its row says so (Dask recomputes it): either status is right for the other models
OK = ("ok", "ok (run again: its first Dask worker died)")
PIPELINE = ["-O3"]


def _cluster():
    with dask.config.set({"distributed.scheduler.allowed-failures": 1}):
        return distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                                        dashboard_address=":0", silence_logs=logging.CRITICAL)  # ":0": no port clash


@pytest.fixture(scope="module")
def cluster():
    """Two worker processes on 127.0.0.1, shared by the tests that kill nothing."""
    c = _cluster()
    yield c
    c.close()


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """Six small text models, one with a bad pass input (a failing row), one that is not a model."""
    d = tmp_path_factory.mktemp("models")
    for i, name in enumerate(NAMES):
        (d / name).write_text(TEXT.replace("3f", f"{i + 3}f"))
    (d / "junk.onnx").write_bytes(b"not a model")
    return d


def _inputs(models, junk=False):
    return [str(models / n) for n in NAMES] + ([str(models / "junk.onnx")] if junk else [])


@pytest.fixture(scope="module")
def local(models, tmp_path_factory):
    """The reference: the same batch with the local executor, -j 1."""
    out = tmp_path_factory.mktemp("local")
    code = main(["run", *_inputs(models, junk=True), *PIPELINE, "-o", f"{out}/"])
    return code, out


def _run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _statuses(table):
    """MODEL -> (ops before, ops after, status) of a summary table (seconds differ)."""
    rows = {}
    for line in table.splitlines()[1:-1]:
        cells = line.split()
        rows[cells[0]] = (cells[1], cells[2], " ".join(cells[5:]))
    return rows


def _same_files(a, b, names=NAMES):
    for name in names:
        assert (a / name).read_bytes() == (b / name).read_bytes(), name
    leftovers = sorted(p.name for p in b.iterdir() if p.name not in names)
    assert not leftovers, f"{b} holds {leftovers} beside the outputs"


@pytest.mark.parametrize("transfer", ["auto", "bytes"])
def test_a_running_scheduler_writes_what_a_local_run_writes(cluster, models, local, tmp_path, capsys, transfer):
    code_local, ref = local
    capsys.readouterr()
    code, table, err = _run(capsys, "run", *_inputs(models, junk=True), *PIPELINE, "-o", f"{tmp_path}/",
                            "--executor", f"dask://{cluster.scheduler_address.split('://')[1]}",
                            "--transfer", transfer)
    assert code == code_local == ExitCode.USAGE_ERROR  # the junk file: exit 2 in both
    assert "Traceback" not in err
    assert f"on the Dask scheduler at {cluster.scheduler_address} (from --executor dask://" in err
    assert ("sending paths: every Dask worker sees" if transfer == "auto" else "sending model bytes") in err
    _same_files(ref, tmp_path)
    rows = _statuses(table)
    assert all(rows[n][2] == "ok" for n in NAMES), table
    assert rows["junk.onnx"][2].startswith("FAILED: ") and "junk.onnx" in rows["junk.onnx"][2]
    assert "/passhost-job-" not in table  # bytes mode: the error names the user's path, not the worker's copy
    assert table.splitlines()[-1] == "7 model(s), 6 ok, 1 failed"


def test_dask_scheduler_address_is_used_by_executor_dask(cluster, models, local, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("DASK_SCHEDULER_ADDRESS", cluster.scheduler_address)
    code, table, err = _run(capsys, "run", *_inputs(models), *PIPELINE, "-o", f"{tmp_path}/", "--executor", "dask")
    assert code == 0, err
    assert f"the Dask scheduler at {cluster.scheduler_address} (from DASK_SCHEDULER_ADDRESS)" in err
    _same_files(local[1], tmp_path)


def test_executor_dask_starts_and_stops_a_local_cluster(models, local, tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("DASK_SCHEDULER_ADDRESS", raising=False)
    code, table, err = _run(capsys, "run", *_inputs(models), *PIPELINE, "-o", f"{tmp_path}/",
                            "--executor", "dask", "-j", "2")
    assert code == 0, err
    assert "on a Dask LocalCluster of 2 worker processes at tcp://127.0.0.1:" in err
    assert "sending paths: the LocalCluster's workers" in err
    _same_files(local[1], tmp_path)
    assert table.splitlines()[-1] == "6 model(s), 6 ok, 0 failed"


def _install_killer(client, victim, marks, times, mid_write=False):
    """Every worker (restarted ones too) kills itself on the first ``times`` attempts at
    ``victim``; with ``mid_write``, after starting to write its output as ``ir.save`` does
    (half a temporary file beside it)."""
    from distributed.diagnostics.plugin import WorkerPlugin

    class Killer(WorkerPlugin):  # defined here, so cloudpickle sends it by value
        name = "passhost-test-killer"

        def setup(self, worker):
            import passhost.jobs as batch

            real = getattr(batch.run_job, "real", batch.run_job)

            def run_job(job):
                if os.path.basename(job.input) == victim:
                    for attempt in range(times):
                        try:
                            os.close(os.open(os.path.join(marks, f"attempt-{attempt}"), os.O_CREAT | os.O_EXCL))
                        except FileExistsError:
                            continue
                        if mid_write and job.output:
                            directory, name = os.path.split(job.output)
                            with open(os.path.join(directory, f".{name}.0123456789ab.tmp"), "wb") as f:
                                f.write(b"half a model")
                        os._exit(1)  # the worker process dies in the middle of the batch
                return real(job)

            run_job.real = real
            batch.run_job = run_job

    client.register_plugin(Killer())


@pytest.mark.parametrize("transfer", ["paths", "bytes"])
def test_a_worker_killed_in_the_middle_of_a_batch_loses_no_model(models, local, tmp_path, capsys, transfer):
    marks = tmp_path / "marks"
    marks.mkdir()
    out = tmp_path / "out"
    c = _cluster()
    try:
        with distributed.Client(c, set_as_default=False) as client:
            _install_killer(client, "m2.txt", str(marks), times=1, mid_write=True)
            code, table, err = _run(capsys, "run", *_inputs(models), *PIPELINE, "-o", f"{out}/",
                                    "--executor", f"dask://{c.scheduler_address.split('://')[1]}",
                                    "--transfer", transfer)
    finally:
        c.close()
    assert sorted(p.name for p in marks.iterdir()) == ["attempt-0"]  # it did die, once
    assert code == 0, err
    rows = _statuses(table)
    assert rows["m2.txt"][2] == "ok (run again: its first Dask worker died)", table
    assert all(rows[n][2] in OK for n in NAMES), table
    assert "passhost: warning: m2.txt: run again: its first Dask worker died" in err
    _same_files(local[1], out)  # every model, byte for byte; no temporary (half-written) file left behind


def _install_counter(client, marks):
    """Every job records how many tasks its worker holds besides it (sent, not yet run)."""
    from distributed.diagnostics.plugin import WorkerPlugin

    class Counter(WorkerPlugin):
        name = "passhost-test-counter"

        def setup(self, worker):
            import passhost.jobs as batch

            real = batch.run_job

            def run_job(job):
                held = sum(t.state in ("ready", "executing", "constrained") for t in worker.state.tasks.values())
                with open(os.path.join(marks, f"held-{os.path.basename(job.input)}-{os.getpid()}"), "w") as f:
                    f.write(str(held))
                return real(job)

            batch.run_job = run_job  # around the killer's (installed first)

    client.register_plugin(Counter())


def test_executor_dask_queues_the_jobs_and_a_killed_worker_loses_no_model(models, local, tmp_path, capsys,
                                                                         monkeypatch):
    """The LocalCluster --executor dask starts gets the whole batch at once; its scheduler
    sends each worker one job at a time, so a dying worker takes only the one it runs."""
    monkeypatch.delenv("DASK_SCHEDULER_ADDRESS", raising=False)
    marks, counts, out = tmp_path / "marks", tmp_path / "counts", tmp_path / "out"
    marks.mkdir()
    counts.mkdir()
    enter = DaskExecutor.__enter__

    def enter_and_arm(self):
        enter(self)
        _install_killer(self.client, "m2.txt", str(marks), times=1, mid_write=True)
        _install_counter(self.client, str(counts))
        return self

    monkeypatch.setattr(DaskExecutor, "__enter__", enter_and_arm)
    code, table, err = _run(capsys, "run", *_inputs(models), *PIPELINE, "-o", f"{out}/",
                            "--executor", "dask", "-j", "2")
    assert sorted(p.name for p in marks.iterdir()) == ["attempt-0"]  # it did die, once
    assert code == 0, err
    rows = _statuses(table)
    assert rows["m2.txt"][2] == "ok (run again: its first Dask worker died)", table
    assert all(rows[n][2] in OK for n in NAMES), table
    _same_files(local[1], out)
    held = [int(p.read_text()) for p in counts.iterdir()]
    assert len(held) >= len(NAMES) and max(held) == 1, held  # never a job waiting on a worker


def test_a_model_that_kills_every_worker_is_a_failed_row_and_nothing_is_written(models, local, tmp_path, capsys):
    marks = tmp_path / "marks"
    marks.mkdir()
    out = tmp_path / "out"
    c = _cluster()
    try:
        with distributed.Client(c, set_as_default=False) as client:
            _install_killer(client, "m2.txt", str(marks), times=99)
            code, table, err = _run(capsys, "run", *_inputs(models), *PIPELINE, "-o", f"{out}/",
                                    "--executor", f"dask://{c.scheduler_address.split('://')[1]}")
    finally:
        c.close()
    assert len(list(marks.iterdir())) == 2  # the first attempt and the one retry the cluster allows
    assert code == ExitCode.PASS_FAILED
    rows = _statuses(table)
    assert re.match(r"FAILED: its Dask worker died each time it ran \(last tcp://127\.0\.0\.1:\d+\)", rows["m2.txt"][2])
    assert all(rows[n][2] in OK for n in NAMES if n != "m2.txt"), table
    assert not (out / "m2.txt").exists()
    _same_files(local[1], out, [n for n in NAMES if n != "m2.txt"])


def test_an_unreachable_scheduler_is_one_line_exit_2(models, tmp_path, capsys):
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with dask.config.set({"distributed.comm.timeouts.connect": "1s"}):
        code, _, err = _run(capsys, "run", *_inputs(models), "-o", f"{tmp_path}/out/",
                            "--executor", f"dask://127.0.0.1:{port}")
    assert code == ExitCode.USAGE_ERROR
    assert err.startswith(f"passhost: error: cannot reach the Dask scheduler at tcp://127.0.0.1:{port} "
                          f"(from --executor dask://127.0.0.1:{port}): ") and err.count("\n") == 1, err
    assert "is `dask scheduler` running there?" in err
    assert not os.listdir(tmp_path / "out")


def test_a_scheduler_without_workers_is_one_line_exit_2(models, tmp_path, capsys):
    c = distributed.LocalCluster(n_workers=0, processes=True, host="127.0.0.1", dashboard_address=":0",
                                 silence_logs=logging.CRITICAL)
    try:
        address = c.scheduler_address.split("://")[1]
        with dask.config.set({"distributed.comm.timeouts.connect": "1s"}):
            code, _, err = _run(capsys, "run", *_inputs(models), "-o", f"{tmp_path}/out/",
                                "--executor", f"dask://{address}")
    finally:
        c.close()
    assert code == ExitCode.USAGE_ERROR
    assert err == (f"passhost: error: the Dask scheduler at tcp://{address} has no workers (waited 1s); start some "
                   f"with `dask worker tcp://{address}`\n")


# -- choosing paths or bytes (the probe's answers stubbed) ----------------------------------------
class _Client:
    def __init__(self, answers):
        self.answers = answers

    def run(self, fn, files, marker, token, needs):
        self.needs = needs
        return self.answers


class _Job:
    def __init__(self, path, output, pipeline=""):
        self.input, self.output, self.pipeline = path, output, pipeline
        self.from_format = self.to_format = None


def _executor(transfer, answers):
    ex = DaskExecutor("127.0.0.1:1", transfer=transfer)
    ex.client = _Client(answers)
    return ex


def _answer(unseen=None, error=None, lacks=()):
    import passhost

    return {"passhost": passhost.__version__, "error": error, "unseen": unseen, "lacks": list(lacks)}


def test_auto_sends_bytes_when_a_worker_does_not_see_the_files(tmp_path, capsys):
    (tmp_path / "a.txt").write_text(TEXT)
    ex = _executor("auto", {"tcp://w1:1": _answer(), "tcp://w2:1": _answer(unseen=str(tmp_path / "a.txt"))})
    ex._choose_transfer([_Job(str(tmp_path / "a.txt"), str(tmp_path / "a.out.txt"))])
    assert ex.transfer == "bytes"
    err = capsys.readouterr().err
    assert f"sending model bytes (worker tcp://w2:1 does not see {str(tmp_path / 'a.txt')!r})" in err
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".passhost-dask-probe")]


def test_paths_refuses_workers_that_do_not_see_the_files(tmp_path):
    (tmp_path / "a.txt").write_text(TEXT)
    ex = _executor("paths", {"tcp://w1:1": _answer(unseen=str(tmp_path) + "/")})
    with pytest.raises(UsageError, match="--transfer paths: Dask worker tcp://w1:1 does not see .* use --transfer bytes"):
        ex._choose_transfer([_Job(str(tmp_path / "a.txt"), str(tmp_path / "a.out.txt"))])


def test_a_worker_without_passhost_is_refused_before_any_job(tmp_path):
    (tmp_path / "a.txt").write_text(TEXT)
    ex = _executor("auto", {"tcp://w1:1": _answer(error="ModuleNotFoundError: No module named 'passhost'")})
    with pytest.raises(UsageError, match="Dask worker tcp://w1:1 cannot import passhost .*install passhost"):
        ex._choose_transfer([_Job(str(tmp_path / "a.txt"), None)])


def test_a_worker_without_a_pass_the_pipeline_runs_is_refused_naming_it(tmp_path):
    (tmp_path / "a.txt").write_text(TEXT)
    ex = _executor("auto", {"tcp://w1:1": _answer(), "tcp://w2:1": _answer(lacks=[("passes", "FoldConstant")])})
    with pytest.raises(UsageError) as info:
        ex._choose_transfer([_Job(str(tmp_path / "a.txt"), str(tmp_path / "b.txt"), "InferType,FoldConstant")])
    assert ("passes", "FoldConstant", None) in ex.client.needs and ("formats", "text", "load") in ex.client.needs
    assert str(info.value) == ("Dask worker tcp://w2:1 lacks what the batch needs: pass 'FoldConstant' "
                               "(passhost-fold-constant); install the same plugins on every worker as here")


def test_the_probe_reports_what_a_worker_lacks(tmp_path):
    from passhost_dask import remote

    (tmp_path / "a.txt").write_text(TEXT)
    facts = remote.probe([(str(tmp_path / "a.txt"), len(TEXT)), (str(tmp_path / "gone.txt"), 1)], None, "t",
                         (("passes", "FoldConstant", None), ("passes", "NoSuchPass", None),
                          ("formats", "text", "save"), ("formats", "no-such-format", "load")))
    assert facts["error"] is None and facts["unseen"] == str(tmp_path / "gone.txt")
    assert facts["lacks"] == [("passes", "NoSuchPass"), ("formats", "no-such-format")]


def test_address_and_transfer_are_checked_when_built(monkeypatch):
    monkeypatch.delenv("DASK_SCHEDULER_ADDRESS", raising=False)
    assert DaskExecutor("host:8786").address == "tcp://host:8786"
    assert DaskExecutor("tls://host:8786").address == "tls://host:8786"
    assert DaskExecutor().address is None
    monkeypatch.setenv("DASK_SCHEDULER_ADDRESS", "tcp://elsewhere:8786")
    ex = DaskExecutor()
    assert (ex.address, ex.origin) == ("tcp://elsewhere:8786", "DASK_SCHEDULER_ADDRESS")
    assert DaskExecutor("host:1").address == "tcp://host:1"  # the option wins over the environment
    with pytest.raises(UsageError, match="--transfer 'zip'"):
        DaskExecutor(transfer="zip")
