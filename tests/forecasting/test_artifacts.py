"""Reading a finished run back: the model, the data it used, and every refusal with its reason."""

from __future__ import annotations

import json
import os
import shutil

import numpy as np
import pandas as pd
import pytest
import torch

from qpriv.cli import main
from qpriv.errors import InvalidInputError
from qpriv.forecasting.artifacts import load_run
from qpriv.forecasting.records import ForecastRequest, ForecastResult
from qpriv.forecasting.run import run_forecast
from qpriv.runs.layout import BEST_FILE, CONFIG_FILE, RESULT_FILE


@pytest.fixture
def run_copy(ldpt_run_dir, tmp_path):
    """A private copy of the tiny run, free to damage."""
    return shutil.copytree(ldpt_run_dir, tmp_path / "run")


def test_load_run_rebuilds_the_model_and_the_data(ldpt_run_dir):
    run = load_run(ldpt_run_dir)
    assert run.method == "ldpt" and run.eps_per_pass == 0.1 and run.claims_local_qdp
    assert run.config.p == pytest.approx(run.result.p) and run.config.dim == 16
    best = torch.load(ldpt_run_dir / BEST_FILE, weights_only=True)
    for name, value in run.model.state_dict().items():
        assert torch.equal(value, best["model"][name]), name
    assert not run.model.training
    data = run.data()
    windows = run.result.windows
    assert (len(data.train), len(data.val), len(data.test)) == (
        windows["train"], windows["val"], windows["test"])
    # without the evaluation limit the training windows stay the run's, the test split is whole
    full = run.data(limit_eval=False)
    assert torch.equal(full.train.starts, data.train.starts)
    assert len(full.test) > len(data.test)


def test_model_with_noise_changes_only_the_noise(ldpt_run_dir):
    run = load_run(ldpt_run_dir)
    other = run.model_with_noise(p=0.5, sigma=0.01)
    assert other.config.p == 0.5 and other.config.sigma == 0.01
    assert other.features.p == 0.5 and other.inject_output.scale == pytest.approx(0.02)  # k = 2
    for name, value in other.state_dict().items():
        assert torch.equal(value, run.model.state_dict()[name]), name


def test_refuses_an_unfinished_run(run_copy):
    (run_copy / RESULT_FILE).unlink()
    with pytest.raises(InvalidInputError, match="not a finished run") as err:
        load_run(run_copy)
    assert "--resume" in str(err.value) and "qpriv train --method ldpt" in str(err.value)


@pytest.mark.parametrize(
    ("damage", "match"),
    # without config.json the folder is a released model (result.json and best.pt): without
    # its weights too, it is nothing
    [(lambda d: [(d / name).unlink() for name in (CONFIG_FILE, BEST_FILE)],
      "not a qpriv run: it has no config.json"),
     (lambda d: (d / BEST_FILE).unlink(), "has no best.pt"),
     (lambda d: (d / RESULT_FILE).write_text("{not json"), "cannot read .*result.json"),
     (lambda d: (d / CONFIG_FILE).write_text("[1, 2]"), "not a JSON object"),
     (lambda d: (d / RESULT_FILE).write_text('{"method": "ldpt"}'), "lacks"),
     (lambda d: (d / BEST_FILE).write_bytes(b"garbage"), "cannot read .*best.pt"),
     (lambda d: torch.save({"epoch": 1}, d / BEST_FILE), "holds no model weights"),
     # a classifier's run is named as one, not as a forecasting run that lacks keys
     (lambda d: (d / CONFIG_FILE).write_text('{"task": "digits", "model": "mlp", "clip": 1}'),
      r"holds a classifier run \(qpriv train-classifier\), not a forecasting run; give the "
      r"folder of a forecasting run \(qpriv train --out DIR\)$")],
)
def test_refuses_damaged_files(run_copy, damage, match):
    damage(run_copy)
    with pytest.raises(InvalidInputError, match=match):
        load_run(run_copy)


@pytest.mark.parametrize(("changes", "match"), [
    ({"seq_len": "abc"}, r"seq_len = 'abc' is not a whole number >= 1"),
    ({"horizon": None}, r"horizon = None is not a whole number >= 1"),
    ({"horizon": 2.5}, r"horizon = 2.5 is not a whole number >= 1"),
    ({"seq_len": True}, r"seq_len = True is not a whole number >= 1"),
    ({"channels": "HUFL"}, r"channels = 'HUFL' is not a list of channel names"),
    ({"channels": []}, r"channels = \[\] is not a list of channel names"),
    ({"method": 3}, r"method = 3 is not a string"),
    ({"model": [1]}, r"model = \[1\] is not an object"),
    ({"max_train_windows": "all"}, r"max_train_windows = 'all' is not null or a whole number"),
])
def test_refuses_a_config_whose_fields_are_damaged(run_copy, changes, match):
    """A damaged or hand-edited config.json is one clear refusal naming the field, never a
    traceback from deep inside the loader."""
    _edit_json(run_copy / CONFIG_FILE, **changes)
    with pytest.raises(InvalidInputError, match=match) as err:
        load_run(run_copy)
    assert "re-run the training into a fresh directory" in str(err.value)


@pytest.mark.parametrize(("changes", "match"), [
    ({"method": "classical"}, r"method 'classical' vs 'ldpt'"),
    ({"channels": ["HUFL"]}, r"channels 1 vs 7"),
    ({"horizon": 48}, r"horizon 48 vs"),
])
def test_refuses_a_config_that_is_not_its_results_run(run_copy, changes, match):
    """config.json and result.json must describe one run: a field edited in one of them (or a
    file copied in from another run) is refused, not forecast with the other run's model."""
    _edit_json(run_copy / CONFIG_FILE, **changes)
    with pytest.raises(InvalidInputError, match=rf"describe different runs \({match}"):
        load_run(run_copy)


def _edit_json(path, **changes):
    data = json.loads(path.read_text())
    data.update(changes)
    path.write_text(json.dumps(data))


def test_refuses_weights_that_do_not_fit_the_config(run_copy):
    config = json.loads((run_copy / CONFIG_FILE).read_text())
    config["model"]["d_model"] = 32
    (run_copy / CONFIG_FILE).write_text(json.dumps(config))
    with pytest.raises(InvalidInputError, match=r"differ from those in config.json"):
        load_run(run_copy)
    result = json.loads((run_copy / RESULT_FILE).read_text())
    result["model"]["d_model"] = 32
    (run_copy / RESULT_FILE).write_text(json.dumps(result))
    with pytest.raises(InvalidInputError, match="weights do not fit"):
        load_run(run_copy)


def test_refuses_missing_or_different_data(run_copy, tmp_path, monkeypatch):
    # a custom CSV that has gone away
    _edit_json(run_copy / CONFIG_FILE, dataset="meters", source=str(tmp_path / "meters.csv"))
    _edit_json(run_copy / RESULT_FILE, dataset="meters")
    run = load_run(run_copy)
    with pytest.raises(InvalidInputError, match=r"cannot load the data of run .*--data-dir"):
        run.data()
    # the named dataset nowhere to be found (no download)
    _edit_json(run_copy / CONFIG_FILE, dataset="ETTh1", source=str(tmp_path / "gone.csv"))
    _edit_json(run_copy / RESULT_FILE, dataset="ETTh1")
    monkeypatch.delenv("QPRIV_DATA_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    with pytest.raises(InvalidInputError, match=r"no usable ETTh1.csv"):
        load_run(run_copy).data()
    monkeypatch.undo()
    # data that does not give the run's windows
    _edit_json(run_copy / CONFIG_FILE, max_train_windows=32)
    with pytest.raises(InvalidInputError, match="does not give the run's windows"):
        load_run(run_copy).data()


@pytest.mark.parametrize("where", ["missing", "file"])
def test_refuses_a_path_that_is_not_a_run_directory(tmp_path, where):
    path = tmp_path / "nothing"
    if where == "file":
        path.write_text("x")
    with pytest.raises(InvalidInputError, match=r"does not exist|not a directory"):
        load_run(path)


def test_data_dir_finds_a_moved_dataset(run_copy, tmp_path, monkeypatch):
    source = json.loads((run_copy / CONFIG_FILE).read_text())["source"]
    moved = tmp_path / "elsewhere"
    moved.mkdir()
    shutil.copy(source, moved / "ETTh1.csv")
    _edit_json(run_copy / CONFIG_FILE, source=str(tmp_path / "gone" / "ETTh1.csv"))
    monkeypatch.delenv("QPRIV_DATA_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    data = load_run(run_copy, data_dir=moved).data()
    assert data.source == moved / "ETTh1.csv"


def test_a_csv_named_like_a_dataset_is_read_back_as_that_csv(tmp_path):
    from qpriv.forecasting.run import run_forecast

    rows = 400
    frame = pd.DataFrame({"date": pd.date_range("2020-01-01", periods=rows, freq="h").astype(str),
                          "a": np.sin(np.arange(rows) / 7.0), "b": np.cos(np.arange(rows) / 5.0)})
    csv = tmp_path / "ETTh1.csv"  # not the ETT file: its own 70/10/20 split applies
    frame.to_csv(csv, index=False)
    out = tmp_path / "run"
    run_forecast(csv=csv, method="classical", epochs=1, seq_len=16, horizon=2,
                 max_train_windows=8, max_eval_windows=8, out_dir=out, progress=False,
                 threads=1)
    data = load_run(out).data()
    assert data.convention == "custom" and data.source == csv
    assert data.train.starts[-1] < 0.7 * rows  # ETT-hourly's split would start far later


def test_records_read_old_and_new_results_alike():
    """result.json is read through one typed view: claims parsed, missing keys defaulted, and a
    garbled file named."""


    old = {"method": "ldpt", "best_epoch": 2, "mse": 0.5, "privacy": "local eps-QDP per pass",
           "eps_per_pass": {"value": 0.1, "kind": "local eps-QDP per pass",
                            "accounting": "paper"},
           "eps_advanced": {"value": 2.56, "kind": "composed", "accounting": "paper",
                            "delta_prime": 1e-6}}
    result = ForecastResult.from_json(old)
    assert result.eps_per_pass == 0.1 and result.released_claim.unit == "token"
    assert result.claims["eps_advanced"].label() == (
        "2.56 (composed, delta'=1e-06, accounting=paper)")
    assert not result.covers_weights and result.mae is None
    with pytest.raises(InvalidInputError, match=r"result\.json lacks 'method': not a qpriv"):
        ForecastResult.from_json({"mse": 0.5})
    with pytest.raises(InvalidInputError, match=r"result\.json holds a value of the wrong type "
                                                r"\(could not convert string to float: 'abc'\)"):
        ForecastResult.from_json({"method": "ldpt", "mse": "abc"})
    with pytest.raises(InvalidInputError, match=r"config\.json lacks \['source', 'channels'"):
        ForecastRequest.from_json({"method": "ldpt", "dataset": "ETTh1"})


def test_a_run_from_a_relative_csv_path_is_found_from_another_folder(tmp_path, monkeypatch):
    """config.json stored the path as typed, so ``qpriv report`` from elsewhere could not find
    ``../good.csv`` (issue 42, D14): it stores the resolved path."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    days = pd.date_range("2020-01-01", periods=600, freq="D", name="date")
    wave = np.sin(2 * np.pi * np.arange(600) / 7) + np.random.default_rng(0).normal(0, 0.1, 600)
    pd.DataFrame({"a": wave}, index=days).to_csv(tmp_path / "good.csv")
    monkeypatch.chdir(tmp_path / "a")
    assert main(["train", "--csv", "../good.csv", "--method", "public", "--seq-len", "96",
                 "--horizon", "7", "--out", "run", "--quiet"]) == 0
    config = json.loads((tmp_path / "a" / "run" / "config.json").read_text())
    assert config["source"] == str((tmp_path / "good.csv").resolve())
    monkeypatch.chdir(tmp_path / "b")
    run = load_run("../a/run")
    assert run.data().source == (tmp_path / "good.csv").resolve()


def test_a_released_linear_model_forecasts_and_reports_without_its_settings(tmp_path):
    """Every claim advises sharing the weights and result.json, not config.json; such a
    folder was refused as "not a qpriv run: it has no config.json" (issue 42, D1)."""
    days = pd.date_range("2020-01-01", periods=600, freq="D", name="date")
    wave = np.sin(2 * np.pi * np.arange(600) / 7) + np.random.default_rng(1).normal(0, 0.1, 600)
    data = tmp_path / "mine.csv"
    pd.DataFrame({"a": wave, "b": np.cos(wave)}, index=days).to_csv(data)
    run = tmp_path / "run"
    assert main(["train", "--csv", str(data), "--eps", "1", "--seq-len", "96", "--horizon",
                 "7", "--out", str(run), "--quiet"]) == 0
    released = tmp_path / "released"
    released.mkdir()
    for name in ("result.json", "linear.npz"):
        shutil.copy(run / name, released / name)
    whole, bare = tmp_path / "whole.csv", tmp_path / "bare.csv"
    assert main(["forecast", str(run), "--csv", str(data), "--out", str(whole)]) == 0
    assert main(["forecast", str(released), "--csv", str(data), "--out", str(bare)]) == 0
    pd.testing.assert_frame_equal(pd.read_csv(whole), pd.read_csv(bare))
    # nothing identifies the training file: whether the data is new is unknown, not "new"
    assert json.loads((tmp_path / "bare.csv.claims.json").read_text())["new_data"] is None
    assert main(["report", str(released)]) == 0
    assert "a released model, which records no training file" in (
        released / "report.html").read_text()
    assert main(["report", str(released), "--data-dir", str(data)]) == 0
    assert "Forecasts not drawn" not in (released / "report.html").read_text()
    (released / "linear.npz").unlink()
    with pytest.raises(InvalidInputError, match=r"it has no config\.json.*released model, a "
                                                r"folder with its result\.json and its "
                                                r"weights, linear\.npz or best\.pt"):
        load_run(released)


@pytest.mark.skipif(not os.environ.get("QPRIV_DATA_DIR"), reason="needs QPRIV_DATA_DIR (ETT)")
def test_a_released_backbone_model_forecasts_reports_and_is_audited(ldpt_run_dir, tmp_path):
    """The claims' advice (share best.pt and result.json, not config.json) held for the linear
    family only: a released LDPT folder was refused (issue 42, D1). It forecasts as the run
    does, and with its data named it is reported and audited on the run's very windows."""
    released = tmp_path / "released"
    released.mkdir()
    for name in ("result.json", "best.pt"):
        shutil.copy(ldpt_run_dir / name, released / name)
    data = load_run(ldpt_run_dir).data().source
    whole, bare = tmp_path / "whole.csv", tmp_path / "bare.csv"
    for run, out in ((ldpt_run_dir, whole), (released, bare)):
        assert main(["forecast", str(run), "--csv", str(data), "--passes", "3",
                     "--out", str(out)]) == 0
    pd.testing.assert_frame_equal(pd.read_csv(whole), pd.read_csv(bare))
    full, bare_run = load_run(ldpt_run_dir), load_run(released, data_dir=data)
    assert bare_run.request.eps_per_pass == full.request.eps_per_pass
    assert {s: len(getattr(bare_run.data(), s)) for s in ("train", "val", "test")} == \
        {s: len(getattr(full.data(), s)) for s in ("train", "val", "test")}
    assert main(["report", str(released), "--data-dir", str(data)]) == 0
    assert "Forecasts not drawn" not in (released / "report.html").read_text()
    assert main(["audit", "run", str(released), "--data-dir", str(data), "--windows", "4",
                 "--pairs", "50", "--no-discover"]) == 0


def test_a_dataframe_trains_as_the_csv_it_would_be_written_to(tmp_path):
    """Issue 42, D15: a DataFrame is taken where a path is (it raised a raw TypeError, then
    was refused). The run is the CSV's run, number for number; its folder records no file."""
    days = pd.date_range("2020-01-01", periods=700, freq="D", name="date")
    rng = np.random.default_rng(4)
    frame = pd.DataFrame({"a": np.sin(2 * np.pi * np.arange(700) / 7) + rng.normal(0, .2, 700),
                          "b": rng.normal(0, 1, 700).cumsum()}, index=days)
    frame.to_csv(tmp_path / "same.csv")
    settings = {"method": "dp-linear", "eps": 1.0, "seq_len": 96, "horizon": 7,
                "progress": False}
    from_file = run_forecast(csv=tmp_path / "same.csv", **settings)
    out = tmp_path / "run"
    from_frame = run_forecast(csv=frame.reset_index(), out_dir=out, **settings)
    assert from_frame.mse == from_file.mse and from_frame.mae == from_file.mae
    assert from_frame.dataset == "dataframe"
    config = json.loads((out / "config.json").read_text())
    assert config["source"] == "" and config["source_sha256"] is None
    run = load_run(out)
    pd.testing.assert_frame_equal(run.forecast(frame), load_run(out).forecast(tmp_path /
                                                                             "same.csv"))
    with pytest.raises(InvalidInputError, match="trained on a DataFrame, which records no "
                                                "training file; pass its data as a file"):
        run.data()
    assert len(load_run(out, data_dir=tmp_path / "same.csv").data().test) == \
        from_frame.windows["test"]
    gap = frame.copy()
    gap.iloc[5, 1] = np.nan
    with pytest.raises(InvalidInputError, match=r"column 'b' of the DataFrame has a missing "
                                                r"\(NaN\) value at 2020-01-06"):
        run_forecast(csv=gap, **settings)
