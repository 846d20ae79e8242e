"""nnrt serve's parts in-process: the model repository and its nnrt.toml, the
request checks, and the dynamic batcher (asyncio) on a real session.  (No
gRPC stub is imported here: the gRPC tests' tritonclient stubs define the
same protobuf names.)"""
from __future__ import annotations

import asyncio
import os
import time

import numpy as np
import onnx
import pytest

pytest.importorskip("nnrt_serve")
from nnrt_core import ScheduleConfig, Session  # noqa: E402
from nnrt_core.errors import ConfigError  # noqa: E402
from nnrt_serve.batcher import ModelRunner  # noqa: E402
from nnrt_serve.errors import BadRequest, DeadlineExceeded, ModelNotFound, Unavailable  # noqa: E402
from nnrt_serve.handlers import Handlers, InferInput, InferRequest  # noqa: E402
from nnrt_serve.repository import ModelRepository  # noqa: E402
from nnrt_serve.settings import ServingSettings, split_cores  # noqa: E402

from serve_support import mlp_model  # noqa: E402

RS = np.random.RandomState(3)


def write_model(folder, toml: str | None = None, name: str = "model.onnx"):
    folder.mkdir(parents=True, exist_ok=True)
    onnx.save(mlp_model(), str(folder / name))
    if toml is not None:
        (folder.parent if folder.name.isdigit() else folder).joinpath("nnrt.toml").write_text(toml)
    return folder / name


def feeds(n: int) -> dict[str, np.ndarray]:
    return {"x": RS.randn(n, 8).astype(np.float32), "offset": RS.randint(0, 3, (n, 1)).astype(np.int64)}


# ------------------------------------------------------------------------------ repository
def test_repository_reads_versions_and_nnrt_toml(tmp_path):
    write_model(tmp_path / "a" / "1")
    write_model(tmp_path / "a" / "10", 'backends = ["numpy"]\nmax_batch_size = 4\ninstances = 3\n')
    write_model(tmp_path / "b")
    repo = ModelRepository(tmp_path)
    a = repo.get("a")
    assert a.version == "10" and a.path == tmp_path / "a" / "10" / "model.onnx"
    assert a.config.backends == ("numpy",) and a.settings.max_batch_size == 4 and a.settings.instances == 3
    assert a.settings.max_queue_size == 64 * 3
    assert repo.get("b").version == "1" and repo.get("b").settings == ServingSettings(max_queue_size=64)
    assert not repo.ready
    repo.load_all()
    assert repo.ready and a.batching and a.session.config.backends == ("numpy",)


def test_repository_refuses_what_it_cannot_serve(tmp_path):
    write_model(tmp_path / "ok")
    write_model(tmp_path / "unknown_key", "max_batch = 4\n")
    write_model(tmp_path / "two_files")
    write_model(tmp_path / "two_files", name="other.onnx")
    (tmp_path / "empty").mkdir()
    write_model(tmp_path / "bad name")
    outside = tmp_path.parent / f"{tmp_path.name}-outside"
    write_model(outside)
    os.symlink(outside, tmp_path / "linked")
    repo = ModelRepository(tmp_path)
    assert list(repo.models) == ["ok"]
    assert "max_batch" in repo.problems["unknown_key"] and "max_batch_size" in repo.problems["unknown_key"]
    assert "exactly one model file" in repo.problems["two_files"]
    assert "exactly one model file" in repo.problems["empty"]
    assert "not a valid model name" in repo.problems["bad name"]
    assert "outside the repository" in repo.problems["linked"]
    with pytest.raises(ModelNotFound, match="exactly one model file"):
        repo.get("two_files")
    for name in ("../ok", "ok/../ok", "/etc/passwd", "nope"):
        with pytest.raises(ModelNotFound):
            repo.get(name)
    with pytest.raises(ModelNotFound, match="no version '2'"):
        repo.get("ok", "2")


def test_batching_on_a_model_without_a_free_batch_dimension_fails_with_the_reason(tmp_path, light_dir):
    (tmp_path / "sq").mkdir()
    (tmp_path / "sq" / "model.onnx").write_bytes((light_dir / "light_squeezenet.onnx").read_bytes())
    (tmp_path / "sq" / "nnrt.toml").write_text('backends = ["onnxruntime"]\nmax_batch_size = 4\n')
    repo = ModelRepository(tmp_path)
    repo.load_all()
    m = repo.get("sq")
    assert m.state == "FAILED" and "no free leading (batch) dimension" in m.reason and "data_0" in m.reason
    with pytest.raises(Unavailable, match="not ready"):
        repo.get_ready("sq")
    assert not repo.ready


def test_a_compiled_session_file_is_served(tmp_path):
    src = write_model(tmp_path / "src")
    (tmp_path / "repo" / "c").mkdir(parents=True)
    Session(src, ScheduleConfig(backends=["numpy"])).save(tmp_path / "repo" / "c" / "model.nnrt")
    repo = ModelRepository(tmp_path / "repo")
    repo.load_all()
    assert repo.get("c").ready and repo.get("c").path.suffix == ".nnrt"


def test_settings_are_checked():
    with pytest.raises(ConfigError, match="instances"):
        ServingSettings(instances=0)
    with pytest.raises(ConfigError, match="max_batch_size"):
        ServingSettings(max_batch_size=2.5)
    with pytest.raises(ConfigError, match="max_queue_delay_ms"):
        ServingSettings(max_queue_delay_ms=-1)
    with pytest.raises(ConfigError, match="fair_share must be true or false"):
        ServingSettings(fair_share=1)
    assert ServingSettings().fair_share and not ServingSettings(fair_share=False).fair_share


def test_instances_split_the_cores_unless_num_threads_is_set(tmp_path):
    write_model(tmp_path / "two", 'backends = ["numpy"]\ninstances = 2\n')
    write_model(tmp_path / "fixed", 'backends = ["numpy"]\ninstances = 2\nnum_threads = 3\n')
    write_model(tmp_path / "one", 'backends = ["numpy"]\n')
    repo = ModelRepository(tmp_path)
    assert repo.get("two").config.num_threads == max(1, (os.cpu_count() or 1) // 2)
    assert repo.get("fixed").config.num_threads == 3
    assert repo.get("one").config.num_threads == 0  # one instance: the backends' own policy
    assert split_cores(ScheduleConfig(), ServingSettings(instances=4), cores=16).num_threads == 4
    assert split_cores(ScheduleConfig(), ServingSettings(instances=3), cores=2).num_threads == 1
    repo.load_all()
    assert repo.get("two").session.config.num_threads == repo.get("two").config.num_threads


# ------------------------------------------------------------------------- batcher
@pytest.fixture(scope="module")
def mlp_session(tmp_path_factory):
    path = write_model(tmp_path_factory.mktemp("mlp") / "m")
    return Session(path, ScheduleConfig(backends=["numpy"]))


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 60))


def test_concurrent_requests_stack_into_fewer_executions(mlp_session):
    async def main():
        runner = ModelRunner("m", mlp_session, ServingSettings(max_batch_size=16, max_queue_delay_ms=50), True)
        inputs = [feeds(n) for n in (1, 3, 2, 1, 4, 1)]
        outs = await asyncio.gather(*(runner.infer(f, None) for f in inputs))
        await runner.close()
        return runner.executions, inputs, outs
    executions, inputs, outs = run(main())
    assert executions < len(inputs)
    for f, o in zip(inputs, outs):
        want = mlp_session.run(f)
        np.testing.assert_allclose(o["y"], want["y"], rtol=1e-6, atol=1e-6)
        np.testing.assert_array_equal(o["idx"], want["idx"])


@pytest.mark.parametrize("fair_share", [False, True])
def test_one_batch_forms_at_a_time_and_a_full_one_goes_at_once(mlp_session, fair_share):
    """Two idle instances do not split requests arriving one by one into two partial batches that each
    wait the whole delay: without ``fair_share`` one worker forms one batch of them; with it (the default)
    each arrival is its share of the rows in the server and runs at once.  A full batch runs without
    waiting."""
    async def main():
        settings = ServingSettings(max_batch_size=8, max_queue_delay_ms=3000, instances=2, fair_share=fair_share)
        runner = ModelRunner("m", mlp_session, settings, True)
        t0 = time.perf_counter()
        tasks = []
        for _ in range(8):
            tasks.append(asyncio.ensure_future(runner.infer(feeds(1), None)))
            await asyncio.sleep(0.01)  # arriving one by one, while a worker is forming the batch
        outs = await asyncio.gather(*tasks)
        trickled = runner.executions, time.perf_counter() - t0
        t0 = time.perf_counter()
        await asyncio.gather(*(runner.infer(feeds(1), None) for _ in range(16)))  # two full batches at once
        burst = runner.executions - trickled[0], time.perf_counter() - t0
        await runner.close()
        return trickled, burst, outs
    (trickled, trickled_s), (burst, burst_s), outs = run(main())
    assert trickled == (8 if fair_share else 1) and trickled_s < 2.0  # never two halves waiting 3 s
    assert burst == 2 and burst_s < 2.0
    assert all(o["y"].shape == (1, 4) for o in outs)


def test_without_batching_each_request_runs_alone(mlp_session):
    async def main():
        runner = ModelRunner("m", mlp_session, ServingSettings(instances=2), False)
        await asyncio.gather(*(runner.infer(feeds(2), None) for _ in range(5)))
        await runner.close()
        return runner.executions
    assert run(main()) == 5


def test_a_batch_over_max_batch_size_and_rows_that_disagree(mlp_session):
    async def main():
        runner = ModelRunner("m", mlp_session, ServingSettings(max_batch_size=4), True)
        try:
            with pytest.raises(BadRequest, match="5 rows is over max_batch_size=4"):
                await runner.infer(feeds(5), None)
            with pytest.raises(BadRequest, match="batch"):
                await runner.infer({"x": feeds(2)["x"], "offset": feeds(3)["offset"]}, None)
        finally:
            await runner.close()
    run(main())


def test_full_queue_deadline_and_a_client_gone_before_its_turn(mlp_session):
    async def main():
        runner = ModelRunner("m", mlp_session, ServingSettings(max_queue_size=2), False)
        tasks = [asyncio.ensure_future(runner.infer(feeds(1), None)) for _ in range(5)]
        results = await asyncio.gather(*tasks, return_exceptions=True)
        full = [r for r in results if isinstance(r, Unavailable)]
        with pytest.raises(DeadlineExceeded, match="deadline"):
            await runner.infer(feeds(1), time.perf_counter() - 1)
        before = runner.executions
        gone = asyncio.ensure_future(runner.infer(feeds(1), None))
        await asyncio.sleep(0)  # queued; the worker has not taken it yet
        gone.cancel()
        await asyncio.sleep(0.2)
        after = runner.executions
        await runner.close()
        return full, results, before, after
    full, results, before, after = run(main())
    assert full and all("queue is full" in str(e) for e in full)
    assert sum(isinstance(r, dict) for r in results) >= 2
    assert after == before  # the cancelled request never ran


def test_handlers_check_requests_against_the_model(tmp_path):
    write_model(tmp_path / "m", 'backends = ["numpy"]\nmax_batch_size = 8\n')

    async def main():
        h = Handlers(ModelRepository(tmp_path))
        await h.load()
        f = feeds(2)
        good = [InferInput("x", "FP32", (2, 8), f["x"]), InferInput("offset", "INT64", (2, 1), f["offset"])]
        res = await h.infer(InferRequest("m", None, good, id="r", outputs=[{"name": "idx"}]), "test")
        errors = []
        for bad in ([good[0]], [*good, good[0]], [InferInput("x", "FP16", (2, 8), f["x"].astype(np.float16)), good[1]]):
            try:
                await h.infer(InferRequest("m", None, bad), "test")
            except BadRequest as e:
                errors.append(str(e))
        try:
            await h.infer(InferRequest("m", None, good, outputs=[{"name": "nope"}]), "test")
        except BadRequest as e:
            errors.append(str(e))
        text = h.metrics.text().decode()
        await h.close()
        return res, errors, text
    res, errors, text = run(main())
    assert res.id == "r" and [o[0] for o in res.outputs] == ["idx"]
    assert "missing input(s) ['offset']" in errors[0]
    assert "'x' is given twice" in errors[1]
    assert "'x': datatype FP16 but model 'm' expects FP32" in errors[2]
    assert "unknown output 'nope'" in errors[3] and "['y', 'idx']" in errors[3]
    assert 'nnrt_serve_request_failures_total{model="m",protocol="test",status="400"} 4.0' in text
