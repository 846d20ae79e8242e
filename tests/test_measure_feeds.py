"""``ScheduleConfig(measure_feeds=...)`` (nnrt_core/feed_sets.py): measured
selection times the candidate plans on the inputs given (a mapping, a list of
them, an .npz file) instead of synthetic ones; bad feeds are a ConfigError
naming the input; the feeds' digest keys the model cache and the stored
choice.  A plan that is not chosen keeps its warnings to its
``considered_plans`` entry."""
from __future__ import annotations

import logging

import numpy as np
import pytest

import nnrt_core.compiler.measure as measure
from nnrt_core import ScheduleConfig, Session
from nnrt_core.errors import ConfigError
from nnrt_core.feed_sets import MAX_SETS, MeasureFeeds
from test_partitioning import X, chain, reference
from test_schedulers import ELEMENTWISE, fp16_engine, registry, timed_backend

from fakes import make_fake_backend

REAL = {"x": np.full((2, 3), 7.0, np.float32)}


def _needs_real_feed(result):
    """Fails unless the run's input was the real one (all 7): like silero VAD,
    whose plans cannot run on a synthetic sample rate of 0."""
    if not np.all(result["y"] == 7.0):
        raise RuntimeError("this plan runs only on real audio")
    return result


def _engines():
    picky = make_fake_backend("picky", ELEMENTWISE, device_type="cpu", priority=100, output_fault=_needs_real_feed)
    slow = timed_backend("slow", ELEMENTWISE, delay=0.004, device_type="cpu")
    picky.emulated = slow.emulated = False
    return picky, slow


def _config(**kw):
    return ScheduleConfig(backends=["picky", "slow"], backup=None, scheduler="measured", **kw)


def test_the_feeds_given_are_measured_on():
    """On synthetic inputs the fast engine's plan fails (the static order is
    kept, said so); on the real feed it runs, is timed and wins."""
    picky, slow = _engines()
    reg = registry(picky, slow)
    m = chain("Relu")
    synthetic = Session(m, _config(), registry=reg)
    plain = [p for p in synthetic.considered_plans if p["label"] == "picky alone"][0]
    assert plain["estimated_ms"] is None and "only on real audio" in plain["problem"]
    fed = Session(m, _config(measure_feeds=REAL), registry=reg)
    chosen = [p for p in fed.considered_plans if p["chosen"]][0]
    assert chosen["label"] == "picky alone" and chosen["estimated_ms"] is not None
    slow_alone = [p for p in fed.considered_plans if p["label"] == "slow alone"][0]
    assert slow_alone["estimated_ms"] > 3  # timed too, on the same feed
    notes = [e.message for e in fed.events if e.kind == "plan_measured"]
    assert any("measure_feeds given" in n and fed.config.measure_feeds.digest in n for n in notes), notes
    np.testing.assert_array_equal(fed.run(REAL)["y"], REAL["x"])


def test_a_list_of_feed_sets_and_an_npz_file(tmp_path):
    picky, slow = _engines()
    reg = registry(picky, slow)
    path = tmp_path / "feeds.npz"
    np.savez(path, **REAL)
    from_file = Session(chain("Relu"), _config(measure_feeds=str(path)), registry=reg)
    assert [p for p in from_file.considered_plans if p["chosen"]][0]["label"] == "picky alone"
    assert from_file.config.measure_feeds == MeasureFeeds.coerce(REAL)  # the same arrays: the same digest
    two = Session(chain("Relu"), _config(measure_feeds=[REAL, {"x": np.full((2, 3), -1.0, np.float32)}]),
                  registry=reg)  # every set in each run: picky fails on the second
    picky_plan = [p for p in two.considered_plans if p["label"] == "picky alone"][0]
    assert picky_plan["estimated_ms"] is None and "only on real audio" in picky_plan["problem"]
    assert [p for p in two.considered_plans if p["chosen"]][0]["label"] == "slow alone"


@pytest.mark.parametrize("feeds, match", [
    ({"z": np.ones((2, 3), np.float32)}, r"\['z'\] is not an input of the model; its inputs: \['x'\]"),
    ({"x": np.ones((2, 3), np.float64)}, r"input 'x' is float64 \[2, 3\]; the model expects float32 \[2, 3\]"),
    ({"x": np.ones((3, 2), np.float32)}, r"input 'x' is float32 \[3, 2\]; the model expects float32 \[2, 3\]"),
    ({"x": np.ones(6, np.float32)}, r"input 'x' is float32 \[6\]"),
])
def test_feeds_that_do_not_fit_the_model_are_a_config_error_naming_the_input(feeds, match):
    picky, slow = _engines()
    with pytest.raises(ConfigError, match=match):
        Session(chain("Relu"), _config(measure_feeds=feeds), registry=registry(picky, slow))


def test_a_missing_input_is_named_with_what_the_model_expects():
    from onnx import helper
    from onnx_models import make_model, vi

    m = make_model([helper.make_node("Add", ["a", "b"], ["y"])], [vi("a", shape=(2, "n")), vi("b", shape=(2, "n"))],
                   [vi("y", shape=(2, "n"))])
    with pytest.raises(ConfigError, match=r"measure_feeds\[1\]: input 'b' is missing; the model expects float32 "
                                          r"\[2, n\]"):
        Session(m, _config(measure_feeds=[{"a": np.ones((2, 5), np.float32), "b": np.ones((2, 5), np.float32)},
                                          {"a": np.ones((2, 4), np.float32)}]), registry=registry(*_engines()))


@pytest.mark.parametrize("bad, match", [
    (3, "must be a {input name: array} mapping"),
    ([], "an empty list"),
    ([{"x": np.ones(1)}] * (MAX_SETS + 1), f"at most {MAX_SETS}"),
    ({"x": [1.0, 2.0]}, r"measure_feeds\['x'\] must be a numpy array"),
    ({"x": np.array([object()])}, "object"),
    ({}, "empty feed set"),
    ("feeds.txt", "is not an .npz file"),
    ("missing.npz", "does not exist"),
])
def test_bad_measure_feeds_are_a_config_error(bad, match, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "feeds.txt").write_text("x")
    with pytest.raises(ConfigError, match=match):
        ScheduleConfig(measure_feeds=bad)


def test_an_npz_that_is_not_arrays_or_too_large_is_refused(tmp_path, monkeypatch):
    pickled = tmp_path / "objects.npz"
    np.savez(pickled, x=np.array([{"a": 1}], dtype=object))
    with pytest.raises(ConfigError, match="cannot read .* as an .npz of arrays"):
        ScheduleConfig(measure_feeds=str(pickled))  # allow_pickle=False: never unpickled
    junk = tmp_path / "junk.npz"
    junk.write_bytes(b"not a zip")
    with pytest.raises(ConfigError, match="cannot read"):
        ScheduleConfig(measure_feeds=junk)
    big = tmp_path / "big.npz"
    np.savez(big, x=np.zeros(1000, np.float32))
    import nnrt_core.feed_sets as feed_sets

    monkeypatch.setattr(feed_sets, "MAX_FEED_BYTES", 1000)
    with pytest.raises(ConfigError, match="over the 1,000-byte limit"):
        ScheduleConfig(measure_feeds=big)  # the sizes the archive declares, checked before reading
    with pytest.raises(ConfigError, match="over the 1,000-byte limit"):
        ScheduleConfig(measure_feeds={"x": np.zeros(1000, np.float32)})


def test_the_feeds_are_copied_read_only_and_their_digest_keys_the_config():
    x = np.ones((2, 3), np.float32)
    cfg = ScheduleConfig(measure_feeds={"x": x})
    x[0, 0] = 5  # the caller's array changes; the config's copy does not
    held = cfg.measure_feeds.sets[0]["x"]
    assert held[0, 0] == 1 and not held.flags.writeable
    d = cfg.to_dict()
    assert d["measure_feeds"] == cfg.measure_feeds.digest and d["measure_feeds"].startswith("xxh3_128:")
    assert ScheduleConfig(measure_feeds={"x": x}).to_dict()["measure_feeds"] != d["measure_feeds"]
    assert cfg == ScheduleConfig(measure_feeds={"x": np.ones((2, 3), np.float32)})
    assert hash(cfg.measure_feeds) == hash(MeasureFeeds.coerce({"x": np.ones((2, 3), np.float32)}))
    assert ScheduleConfig().to_dict()["measure_feeds"] is None


def test_the_cache_measures_again_for_other_feeds_and_not_for_the_same(tmp_path, monkeypatch):
    """The feeds' digest is in the model-cache key and the choice record's:
    a second session with the same cache and feeds measures nothing, other feeds measure again."""
    pytest.importorskip("nnrt_onnxruntime")
    m = chain("Relu", "Neg")

    def config(x):
        return ScheduleConfig(backends=["onnxruntime", "numpy"], backup=None, scheduler="measured",
                              cache_dir=str(tmp_path), measure_feeds={"x": x})

    first = Session(m, config(REAL["x"]))
    assert not first.compiled_model.cache_hit and len(first.considered_plans) >= 2
    timed = []
    real_time = measure._time_plans
    monkeypatch.setattr(measure, "_time_plans", lambda *a: timed.append(a) or real_time(*a))
    same = Session(m, config(REAL["x"].copy()))
    assert same.compiled_model.cache_hit and not timed  # the same feeds: nothing measured
    assert same.placement == first.placement and same.considered_plans == first.considered_plans
    other = Session(m, config(np.full((2, 3), 8.0, np.float32)))
    assert not other.compiled_model.cache_hit and timed  # other feeds: measured again
    assert first.compiled_model.cache_path != other.compiled_model.cache_path


def test_a_saved_session_keeps_the_digest_not_the_feeds(tmp_path):
    sess = Session(chain("Relu"), ScheduleConfig(backends=["numpy"], measure_feeds={"x": X["x"]}))
    path = tmp_path / "m.nnrt"
    sess.save(str(path))
    loaded = Session(str(path))
    assert loaded.config.measure_feeds is None
    np.testing.assert_array_equal(loaded.run(X)["y"], reference(chain("Relu"), X)[0])


def test_a_plan_not_chosen_keeps_its_warnings_out_of_the_session(caplog):
    """The slow plan sends a node to the backup (a ``node_fallback`` warning);
    the fast plan, which runs every node, wins: the session neither lists nor
    logs the loser's warning, its ``considered_plans`` entry keeps it."""
    fast = timed_backend("fast", ELEMENTWISE, delay=0.0, device_type="cpu", priority=100)
    slow = timed_backend("slow", ["Relu"], delay=0.004, device_type="cpu")
    fast.emulated = slow.emulated = False
    m = chain("Relu", "Neg")
    with caplog.at_level(logging.WARNING, logger="nnrt"):
        sess = Session(m, ScheduleConfig(backends=["fast", "slow"], backup="numpy", scheduler="measured"),
                       registry=registry(fast, slow))
    chosen = [p for p in sess.considered_plans if p["chosen"]][0]
    assert chosen["label"] == "fast alone" and chosen["warnings"] == []
    loser = [p for p in sess.considered_plans if p["label"] == "slow alone"][0]
    assert any("fall back to backup 'numpy'" in w for w in loser["warnings"]), loser
    assert not [e for e in sess.events if e.kind == "node_fallback"]
    assert "fall back to backup" not in caplog.text


def test_the_chosen_plans_warnings_are_the_sessions_and_logged(caplog):
    slow = timed_backend("slow", ELEMENTWISE, delay=0.004, device_type="cpu", priority=100)
    fast = timed_backend("fast", ["Relu"], delay=0.0, device_type="cpu")
    slow.emulated = fast.emulated = False
    with caplog.at_level(logging.WARNING, logger="nnrt"):
        sess = Session(chain("Relu", "Neg"), ScheduleConfig(backends=["slow", "fast"], backup="numpy",
                                                            scheduler="measured"), registry=registry(slow, fast))
    chosen = [p for p in sess.considered_plans if p["chosen"]][0]
    assert chosen["label"] == "fast alone"  # relu on fast, neg on the backup (µs) against 2 x 4 ms
    assert [e for e in sess.events if e.kind == "node_fallback"] and "fall back to backup" in caplog.text


def _clipping_chip():
    """A real engine offering fp16 whose fp16 plans are fast and exact on
    small values but clip at +-100 (a reduced format's range): only inputs of
    the real size show the error."""
    return fp16_engine(lambda out: {k: np.clip(v, -100, 100) for k, v in out.items()})


def test_precision_auto_checks_the_error_on_the_measure_feeds():
    m = chain("Relu", "Neg")
    synthetic = Session(m, ScheduleConfig(backends=["chip"], backup=None, precision="auto"),
                        registry=registry(_clipping_chip()))
    assert synthetic.config.precision == "fp16"  # standard-normal inputs never reach the clip
    big = {"x": np.full((2, 3), 1000.0, np.float32)}
    fed = Session(m, ScheduleConfig(backends=["chip"], backup=None, precision="auto", measure_feeds=big),
                  registry=registry(_clipping_chip()))
    assert fed.config.precision == "fp32"
    fp16 = next(p for p in fed.considered_plans if p["precision"] == "fp16")
    assert not fp16["chosen"] and fp16["max_rel_err"] > 0.5 and "over precision_tolerance" in fp16["problem"]
    np.testing.assert_array_equal(fed.run(big)["y"], -big["x"])


def test_a_measured_session_on_feeds_specializes_for_other_shapes():
    """The chosen plan's config keeps the feeds (their digest in its key) but
    does not measure again: a specialization for another input shape builds
    that plan, the feeds' shape never checked against it."""
    pytest.importorskip("nnrt_onnxruntime")
    from onnx import helper
    from onnx_models import make_model, vi

    m = make_model([helper.make_node("Relu", ["x"], ["t"]), helper.make_node("Neg", ["t"], ["y"])],
                   [vi("x", shape=("n", 3))], [vi("y", shape=("n", 3))])
    sess = Session(m, ScheduleConfig(backends=["onnxruntime", "numpy"], backup=None, scheduler="measured",
                                     specialize_shapes="always", measure_feeds={"x": np.ones((4, 3), np.float32)}))
    assert sess.config.scheduler == "priority" and sess.config.measure_feeds is not None
    x = np.arange(15, dtype=np.float32).reshape(5, 3) - 7
    np.testing.assert_array_equal(sess.run({"x": x})["y"], -np.maximum(x, 0))
    assert not [e for e in sess.events if "feeds are not used" in e.message]


def test_feeds_a_build_does_not_measure_with_are_said_unused():
    sess = Session(chain("Relu"), ScheduleConfig(backends=["numpy"], measure_feeds={"z": np.ones(1, np.float32)}))
    (note,) = [e.message for e in sess.events if "feeds are not used" in e.message]
    assert "scheduler 'priority'" in note
