"""Forecasting new data with a finished run (`qpriv forecast`, `load_run(dir).forecast`) and the
test metrics in the data's own units.

The data is an exchange-rate-like user CSV unlike ETT: a daily series with a date column and
three channels with arbitrary names on very different scales, so that a forecast left in
z-scored units, or scaled with the wrong channel's statistics, is far from the right one.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from qpriv.cli import main
from qpriv.errors import InvalidInputError
from qpriv.forecasting.artifacts import LinearRun, LoadedRun, load_backbone_run, load_run
from qpriv.forecasting.config import ModelConfig
from qpriv.forecasting.datasets import DATASETS
from qpriv.forecasting.inference import MAX_PASSES, SOURCE_NOTE, ForecastingRun, claims_path
from qpriv.forecasting.methods import LINEAR, METHODS, setup_method
from qpriv.forecasting.run import run_forecast
from qpriv.forecasting.windows import load_forecasting_data
from qpriv.privacy.claims import PrivacyClaim
from qpriv.runs.layout import CONFIG_FILE, RESULT_FILE
from qpriv.training.evaluation import seeded_noise
from qpriv.training.seeding import derive_seed

CHANNELS = ["usd per eur", "JPY", "gold.oz"]
L, H = 168, 4  # the linear family's features need L >= 7 periods of 24
TINY_MODEL = {"d_model": 16, "n_heads": 2, "d_ff": 32}
SMALL = {"seq_len": L, "horizon": H, "max_train_windows": 32, "max_eval_windows": 16,
         "progress": False, "threads": 1}


def exchange_frame(rows: int = 1000, *, seed: int = 0, start: str = "2001-01-01") -> pd.DataFrame:
    """A daily series with a date column and three channels on scales 1, 100 and 1000."""
    rng = np.random.default_rng(seed)
    t = np.arange(rows)
    return pd.DataFrame({
        "date": pd.date_range(start, periods=rows, freq="D").strftime("%Y-%m-%d"),
        "usd per eur": 1.1 + 0.05 * np.sin(t / 9) + 0.01 * rng.standard_normal(rows),
        "JPY": 110 + 5 * np.sin(t / 13) + rng.standard_normal(rows),
        "gold.oz": 1300 + 40 * np.sin(t / 30) + 10 * rng.standard_normal(rows),
    })


@pytest.fixture(scope="module")
def csv(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("data") / "exchange-like.csv"
    exchange_frame().to_csv(path, index=False)
    return path


@pytest.fixture(scope="module")
def runs(csv, tmp_path_factory):
    """``make(method, **settings)``: a tiny finished run on the CSV, made once per module."""
    root = tmp_path_factory.mktemp("runs")
    made: dict[str, Path] = {}

    def make(method: str, **settings) -> Path:
        if method not in made:
            made[method] = root / method
            extra = ({} if METHODS[method].family == LINEAR else
                     {"epochs": 1, "overrides": TINY_MODEL, "rigorous": False})
            run_forecast(csv=csv, method=method, out_dir=made[method],
                         **{**SMALL, **extra, **settings})
        return made[method]

    return make


def _last_json(capsys) -> dict:
    return json.loads(capsys.readouterr().out.strip().splitlines()[-1])


def _window(frame: pd.DataFrame, end: int | None = None) -> np.ndarray:
    """The look-back of L rows ending at row ``end`` (default: the last) in the file's units."""
    values = frame[CHANNELS].to_numpy(dtype=np.float64)
    stop = len(values) if end is None else end + 1
    return values[stop - L:stop]


# --------------------------------------------------------------------------------------------
# Every method, through the command line
# --------------------------------------------------------------------------------------------


SWAMPED = {"dp-input", "bottleneck-dp"}
"""At eps 0.1 the Gaussian-mechanism sigma is 53: DP-Input adds noise of that std to every
z-scored input value and Bottleneck-DP injects it into the activations, so their forecasts are
noise, far from the data's level (how forecasts follow from the model is checked below)."""


def _train_argv(method: str, csv: Path, out: Path) -> list[str]:
    argv = ["train", "--csv", str(csv), "--method", method, "--seq-len", str(L), "--horizon",
            str(H), "--quiet", "--threads", "1", "--out", str(out)]
    if method in ("dpsgd-linear", "dpsgd-dlinear"):  # batch 512: every training window
        return [*argv, "--max-eval-windows", "16"]
    argv += ["--max-train-windows", "32", "--max-eval-windows", "16"]
    if METHODS[method].family != LINEAR:
        argv += ["--epochs", "1", "--no-rigorous"]
    if method.startswith("dpsgd"):
        argv += ["--batch", "16"]
    return argv


@pytest.mark.parametrize("method", list(METHODS))
def test_every_method_forecasts_a_user_csv_in_its_own_units(method, csv, tmp_path, capsys):
    run_dir, out = tmp_path / "run", tmp_path / "f.csv"
    assert main(_train_argv(method, csv, run_dir)) == 0
    capsys.readouterr()
    assert main(["forecast", str(run_dir), "--csv", str(csv), "--last", "--out", str(out),
                 "--passes", "3"]) == 0
    assert f"written to {out}" in capsys.readouterr().out

    frame = pd.read_csv(out, index_col=0, parse_dates=True)
    source = exchange_frame()
    last = pd.Timestamp(source["date"].iloc[-1])
    assert list(frame.index) == list(pd.date_range(last + pd.Timedelta(days=1), periods=H,
                                                   freq="D"))
    run = load_run(run_dir)
    noisy = run.noisy
    spread = [f"{c}_std" for c in CHANNELS] if noisy else []
    assert list(frame.columns) == CHANNELS + spread
    assert np.isfinite(frame.to_numpy()).all()
    if method not in SWAMPED:  # in the file's units: near each channel's level, not near 0
        levels = source[CHANNELS].to_numpy().mean(axis=0)
        spreads = source[CHANNELS].to_numpy().std(axis=0)
        assert (np.abs(frame[CHANNELS].to_numpy() - levels) < 10 * spreads).all(), frame
    if noisy:
        assert (frame[spread].to_numpy() > 0).all()

    sidecar = json.loads(claims_path(out).read_text())
    result = json.loads((run_dir / RESULT_FILE).read_text())
    assert sidecar["method"] == method and sidecar["new_data"] is False
    assert sidecar["passes"] == (3 if noisy else 1)
    assert [PrivacyClaim.from_json(c) for c in sidecar["claims"]] == list(run.claims)
    assert [c["value"] for c in sidecar["claims"]] == [c["value"] for c in result["claims"]]
    for claim in sidecar["claims"]:
        assert {"value", "delta", "kind", "accounting", "unit", "covers"} <= set(claim)
    assert set(result["original_units"]["mse"]) == set(CHANNELS)
    assert result["metric_units"].startswith("z-scored")  # what the top-level mse is in
    # the private training file's digest identifies it exactly: it stays in config.json,
    # named in the notes, and is in neither result.json nor the forecast's record of the run
    # (the sidecar's source_sha256 is the digest of the file the forecast read, here the same)
    digest = hashlib.sha256(csv.read_bytes()).hexdigest()
    assert json.loads((run_dir / CONFIG_FILE).read_text())["source_sha256"] == digest
    assert digest not in (run_dir / RESULT_FILE).read_text()
    assert result["inference"]["source_sha256"] is None and sidecar["training_sha256"] is None
    assert SOURCE_NOTE in result["privacy_notes"]
    assert all(SOURCE_NOTE in claim["notes"] for claim in result["claims"])  # each claim too


def test_which_methods_draw_noise_at_inference():
    deterministic = {"classical", "ldpt-clean", "ldpt-signed-clean", "dpsgd", "dpsgd-tuned",
                     "public", "ridge", "dp-linear", "dpsgd-linear"}
    base = ModelConfig(seq_len=64, horizon=4, n_channels=1)
    for name, entry in METHODS.items():
        if entry.family == LINEAR:
            continue
        noisy = setup_method(name, base=base, eps=0.5).config.noisy_inference
        assert noisy == (name not in deterministic), name


# --------------------------------------------------------------------------------------------
# The values: the model's own z-scored output through the inverse scaler
# --------------------------------------------------------------------------------------------


def _reference(run: LoadedRun, csv: Path, window: np.ndarray, *, passes: int,
               seed: int) -> np.ndarray:
    """(passes, H, C): the scaler fitted again from the training file, the model called
    directly on the z-scored window, and the inverse z-score applied by hand."""
    data = load_forecasting_data(None, csv=csv, seq_len=L, horizon=H)
    mean, std = data.scaler.mean, data.scaler.std
    x = torch.tensor((window - mean) / std, dtype=torch.float32)[None]
    draws = []
    for m in range(passes):
        with seeded_noise(run.model, seed + m), torch.no_grad():
            draws.append(run.model(x)[0].double().numpy())
    return np.stack(draws) * std + mean


def test_a_deterministic_forecast_is_the_model_output_unscaled(runs, csv):
    run = load_run(runs("classical"))
    frame = exchange_frame()
    forecast = run.forecast(csv)
    expected = _reference(run, csv, _window(frame), passes=1, seed=0)[0]
    np.testing.assert_allclose(forecast[CHANNELS].to_numpy(), expected, rtol=1e-6)
    # --at: the window ending at that row
    at = run.forecast(csv, at="2002-06-30")
    end = int(np.flatnonzero(frame["date"] == "2002-06-30")[0])
    np.testing.assert_allclose(at[CHANNELS].to_numpy(),
                               _reference(run, csv, _window(frame, end), passes=1, seed=0)[0],
                               rtol=1e-6)
    assert at.index[0] == pd.Timestamp("2002-07-01") and at.index.name == "date"


def test_a_noisy_forecast_is_the_mean_and_std_of_seeded_passes(runs, csv):
    run = load_run(runs("ldpt", eps=0.5, overrides={**TINY_MODEL, "n_shots": 64}))
    assert run.noisy and run.default_passes == 10
    forecast = run.forecast_report(csv, passes=4, seed=7)
    draws = _reference(run, csv, _window(exchange_frame()), passes=4, seed=7)
    np.testing.assert_allclose(forecast.frame[CHANNELS].to_numpy(), draws.mean(axis=0),
                               rtol=1e-6)
    np.testing.assert_allclose(forecast.frame[[f"{c}_std" for c in CHANNELS]].to_numpy(),
                               draws.std(axis=0, ddof=1), rtol=1e-4)
    assert forecast.passes == 4 and forecast.seed == 7
    again = run.forecast_report(csv, passes=4, seed=7)
    pd.testing.assert_frame_equal(again.frame, forecast.frame)  # seeded: reproducible
    other = run.forecast_report(csv, passes=4, seed=8)
    assert not np.allclose(other.frame.to_numpy(), forecast.frame.to_numpy())


@pytest.mark.parametrize(("method", "settings"), [
    ("ridge", {}), ("dp-linear", {"eps": 1.0}), ("public", {})])
def test_a_linear_forecast_is_its_z_scored_forecast_unscaled(runs, csv, method, settings):
    run = load_run(runs(method, **settings))
    assert isinstance(run, LinearRun) and not run.noisy
    data = load_forecasting_data(None, csv=csv, seq_len=L, horizon=H)
    window = _window(exchange_frame())
    z = data.scaler.transform(window)
    expected = data.scaler.inverse_transform(run.model.predict(z[None])[0])
    forecast = run.forecast(csv)
    np.testing.assert_allclose(forecast[CHANNELS].to_numpy(), expected, rtol=1e-9)
    assert run.inference.scaler is None  # nothing fitted in the clear is stored or used


@pytest.mark.parametrize("dtype", ["float64", "float32", "float16", "int64"])
def test_any_float_dtype_is_accepted(runs, csv, dtype):
    run = load_run(runs("classical"))
    frame = exchange_frame()
    typed = frame.assign(**{c: frame[c].astype(dtype) for c in CHANNELS})
    got = run.forecast(typed)[CHANNELS].to_numpy()
    expected = _reference(run, csv, typed[CHANNELS].to_numpy(dtype=np.float64)[-L:],
                          passes=1, seed=0)[0]
    np.testing.assert_allclose(got, expected, rtol=1e-6)
    by_index = run.forecast(typed.set_index(pd.to_datetime(typed["date"])).drop(columns="date"))
    np.testing.assert_allclose(by_index[CHANNELS].to_numpy(), got, rtol=0)


def test_the_model_takes_a_float64_window(runs):
    model = load_run(runs("classical")).model
    x = torch.randn(2, L, len(CHANNELS), dtype=torch.float64)
    with torch.no_grad():
        assert torch.equal(model(x), model(x.float()))  # once a raw torch dtype error


def test_new_data_with_the_runs_columns_is_accepted_and_said_to_be_new(runs, tmp_path, capsys):
    run_dir = runs("classical")
    other = tmp_path / "later.csv"
    exchange_frame(rows=300, seed=5, start="2010-03-01").assign(extra=1.0).to_csv(
        other, index=False)
    assert main(["forecast", str(run_dir), "--csv", str(other), "--json"]) == 0
    out = _last_json(capsys)
    assert out["new_data"] is True and out["training_sha256"] is None  # a private file's
    assert out["source_sha256"] == hashlib.sha256(other.read_bytes()).hexdigest()
    assert out["timestamps"][0] == "2010-12-26T00:00:00"  # the day after the last row
    assert list(out["forecast"]) == CHANNELS and len(out["forecast"]["JPY"]) == H
    assert out["std"] is None and out["passes"] == 1 and out["claims"] == []
    assert main(["forecast", str(run_dir), "--csv", str(other)]) == 0
    assert "new data" in capsys.readouterr().out


def test_a_named_dataset_is_forecast_after_its_last_row(ldpt_run_dir, capsys):
    assert main(["forecast", str(ldpt_run_dir), "--dataset", "ETTh1", "--passes", "2",
                 "--json"]) == 0
    out = _last_json(capsys)
    assert out["new_data"] is False and out["passes"] == 2 and out["noisy"] is True
    assert out["training_sha256"] == DATASETS["ETTh1"].sha256  # a published digest is kept
    assert out["timestamps"][:2] == ["2018-06-26T20:00:00", "2018-06-26T21:00:00"]
    assert len(out["timestamps"]) == 24 and list(out["std"]) == list(out["forecast"])
    assert out["claims"][0]["kind"] == "local eps-QDP per pass" and out["claims"][0]["value"] == 0.1


# --------------------------------------------------------------------------------------------
# Refusals: one line, exit 2, nothing written
# --------------------------------------------------------------------------------------------


def _hourly(tmp_path: Path) -> Path:
    path = tmp_path / "hourly.csv"
    frame = exchange_frame(rows=300)
    frame["date"] = pd.date_range("2001-01-01", periods=300, freq="h").astype(str)
    frame.to_csv(path, index=False)
    return path


def _a_gap(tmp_path: Path) -> Path:
    path = tmp_path / "gap.csv"
    frame = exchange_frame(rows=300)
    frame.loc[200, "JPY"] = np.nan
    frame.to_csv(path, index=False)
    return path


def _missing_columns(tmp_path: Path) -> Path:
    path = tmp_path / "two.csv"
    exchange_frame(rows=300).drop(columns=["JPY", "gold.oz"]).to_csv(path, index=False)
    return path


@pytest.mark.parametrize(("argv", "needle"), [
    (lambda d, c, t: [str(t / "nowhere"), "--csv", str(c)], "nowhere does not exist"),
    (lambda d, c, t: [str(d), "--csv", str(_missing_columns(t))],
     re.escape("lacks the run's channels ['JPY', 'gold.oz']")),
    # the run's channels are fixed: a gap inside the look-back is to be filled (one outside
    # it is read past: test_a_gap_outside_the_look_back_does_not_block_a_forecast)
    (lambda d, c, t: [str(d), "--csv", str(_a_gap(t))],
     r"column 'JPY' of .*gap.csv has a missing value at .*, inside the 168 rows this forecast "
     r"reads \(ending .*\); fill or interpolate it, or forecast from an earlier point"),
    (lambda d, c, t: [str(d), "--csv", str(_hourly(t))],
     "frequency of .*hourly.csv is 'h' but the run was trained on 'D' data"),
    (lambda d, c, t: [str(d), "--csv", str(c), "--at", "1999-01-01"],
     "--at '1999-01-01' is not a timestamp of"),
    (lambda d, c, t: [str(d), "--csv", str(c), "--at", "2001-02-01"],
     "has 32 rows up to and including 2001-02-01 00:00:00, but the run's look-back needs "
     "L = 168"),
    (lambda d, c, t: [str(d), "--csv", str(c), "--passes", "0"],
     "--passes: expected a positive integer, got 0"),
    (lambda d, c, t: [str(d), "--csv", str(t)], "is a directory; give the CSV file itself"),
    (lambda d, c, t: [str(d), "--csv", str(c), "--out", str(t / "no" / "f.csv")],
     "its directory .*no does not exist"),
    # the data file itself as the folder: it exists, and is not a directory
    (lambda d, c, t: [str(d), "--csv", str(c), "--out", str(c / "f.csv")],
     r"\.csv is a file, not a directory; write elsewhere$"),
    (lambda d, c, t: [str(d), "--csv", str(c), "--out", str(t)], "is a directory; name"),
    (lambda d, c, t: [str(d), "--csv", str(c), "--data-dir", str(t)],
     "--data-dir says where to find a named dataset; --csv names its file itself"),
])
def test_bad_input_is_one_line_and_exit_2(runs, csv, tmp_path, capsys, argv, needle):
    out = tmp_path / "f.csv"
    args = argv(runs("classical"), csv, tmp_path)
    if "--out" not in args:
        args += ["--out", str(out)]
    assert main(["forecast", *args]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert re.search(needle, err), err
    assert not out.exists() and not claims_path(out).exists()


def test_out_never_replaces_the_data_or_the_run_and_others_only_with_force(
        runs, csv, tmp_path, capsys):
    run_dir = shutil.copytree(runs("classical"), tmp_path / "run")
    data = shutil.copy(csv, tmp_path / "data.csv")
    before = {path: path.read_bytes() for path in [Path(data), *run_dir.iterdir()]}
    for out, force, needle in [
            (data, True, "would overwrite .*data.csv of .*data.csv, which this forecast reads"),
            (run_dir / "config.json", True, "would overwrite .*config.json of .*run, which")]:
        argv = ["forecast", str(run_dir), "--csv", str(data), "--out", str(out)]
        assert main([*argv, *(["--force"] if force else [])]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and re.search(needle, err), err
    assert {path: path.read_bytes() for path in before} == before
    assert sorted(run_dir.iterdir()) == sorted(p for p in before if p.parent == run_dir)

    existing = tmp_path / "f.csv"
    existing.write_text("keep me\n")
    argv = ["forecast", str(run_dir), "--csv", str(data), "--out", str(existing)]
    assert main(argv) == 2
    assert "f.csv exists; pass --force to replace it" in capsys.readouterr().err
    assert existing.read_text() == "keep me\n" and not claims_path(existing).exists()
    assert main([*argv, "--force"]) == 0
    assert pd.read_csv(existing, index_col=0).shape[0] == H
    # a new file inside the run's folder overwrites nothing the forecast reads (issue 42, D4:
    # it was refused as "would overwrite RUN/fc.csv of RUN")
    inside = run_dir / "fc.csv"
    assert main(["forecast", str(run_dir), "--csv", str(data), "--out", str(inside)]) == 0
    assert pd.read_csv(inside, index_col=0).shape[0] == H and claims_path(inside).is_file()
    assert {path: path.read_bytes() for path in before} == before


def test_passes_above_the_cap_are_refused_before_any_work(runs, csv, capsys):
    argv = ["forecast", str(runs("classical")), "--csv", str(csv), "--passes",
            str(MAX_PASSES + 1)]
    assert main(argv) == 2
    assert f"--passes = {MAX_PASSES + 1} is above {MAX_PASSES}" in capsys.readouterr().err


def test_an_unfinished_run_is_refused(runs, tmp_path, csv, capsys):
    copy = shutil.copytree(runs("classical"), tmp_path / "run")
    (copy / RESULT_FILE).unlink()
    assert main(["forecast", str(copy), "--csv", str(csv)]) == 2
    assert "is not a finished run" in capsys.readouterr().err


# --------------------------------------------------------------------------------------------
# Runs written before the inference record, and the two families behind one type
# --------------------------------------------------------------------------------------------


def test_a_run_without_the_inference_record_recomputes_it_from_its_training_file(
        runs, csv, tmp_path):
    copy = shutil.copytree(runs("classical"), tmp_path / "run")
    result = json.loads((copy / RESULT_FILE).read_text())
    record = result.pop("inference")
    (copy / RESULT_FILE).write_text(json.dumps(result))
    run = load_run(copy)
    assert run.inference.to_json() == record
    pd.testing.assert_frame_equal(run.forecast(csv), load_run(runs("classical")).forecast(csv))
    # and with the training file gone: refused, saying why
    moved = tmp_path / "gone.csv"
    shutil.copy(csv, moved)
    config = json.loads((copy / "config.json").read_text())
    config["source"] = str(tmp_path / "nowhere.csv")
    (copy / "config.json").write_text(json.dumps(config))
    with pytest.raises(InvalidInputError, match="trained before runs stored what forecasting "
                                                "needs"):
        load_run(copy).forecast(moved)
    assert load_run(copy, data_dir=moved).forecast(moved).shape == (H, len(CHANNELS))


def test_both_families_are_forecasting_runs_and_the_audits_read_only_the_backbone(runs):
    backbone, linear = load_run(runs("classical")), load_run(runs("ridge"))
    assert isinstance(backbone, LoadedRun) and isinstance(linear, LinearRun)
    assert isinstance(backbone, ForecastingRun) and isinstance(linear, ForecastingRun)
    assert isinstance(load_backbone_run(runs("classical")), LoadedRun)
    with pytest.raises(InvalidInputError, match="linear forecaster 'ridge'"):
        load_backbone_run(runs("ridge"))


# --------------------------------------------------------------------------------------------
# Test metrics in the data's own units
# --------------------------------------------------------------------------------------------


def test_original_unit_metrics_are_those_of_the_unscaled_forecasts(runs, csv):
    run = load_run(runs("classical"))
    data = run.data()
    x, y = data.test.windows(torch.arange(len(data.test)))
    seed = derive_seed(2024, "evaluation")
    with seeded_noise(run.model, seed), torch.no_grad():
        pred = run.model(x).double().numpy()
    mean, std = data.scaler.mean, data.scaler.std
    err = (pred * std + mean) - (y.double().numpy() * std + mean)  # in the file's units
    metrics = run.result.original_units
    np.testing.assert_allclose([metrics["mse"][c] for c in CHANNELS],
                               (err**2).mean(axis=(0, 1)), rtol=1e-5)
    np.testing.assert_allclose([metrics["mae"][c] for c in CHANNELS],
                               np.abs(err).mean(axis=(0, 1)), rtol=1e-5)
    # closed form: the z-scored MSE is the mean over channels of MSE_c / std_c^2
    z_mse = np.mean([metrics["mse"][c] / s**2 for c, s in zip(CHANNELS, std, strict=True)])
    assert z_mse == pytest.approx(run.result.mse, rel=1e-6)


def test_original_unit_metrics_of_a_linear_run(runs):
    run = load_run(runs("ridge"))
    data = run.data()
    x, y = data.test.windows(torch.arange(len(data.test)))
    raw_x = data.scaler.inverse_transform(x.double().numpy())
    raw_y = data.scaler.inverse_transform(y.double().numpy())
    err = run.model.predict(raw_x) - raw_y  # the kernel applied in the file's units
    metrics = run.result.original_units
    np.testing.assert_allclose([metrics["mse"][c] for c in CHANNELS],
                               (err**2).mean(axis=(0, 1)), rtol=1e-9)
    np.testing.assert_allclose([metrics["mae"][c] for c in CHANNELS],
                               np.abs(err).mean(axis=(0, 1)), rtol=1e-9)


def test_train_prints_the_original_unit_metrics(csv, capsys):
    assert main(["train", "--csv", str(csv), "--method", "ridge", "--seq-len", str(L),
                 "--horizon", str(H)]) == 0
    out = capsys.readouterr().out
    assert "in the data's own units" in out
    for channel in CHANNELS:
        assert channel in out


def test_forecasts_keep_the_files_clock_across_a_daylight_saving_change(tmp_path, capsys):
    """Dates with two UTC offsets were read in UTC and the forecast written in UTC: the
    user's clock was dropped (issue 42, D11). It continues in the last date's offset."""
    stamps = pd.date_range("2021-03-01", periods=900, freq="h", tz="Europe/Berlin")
    wave = np.sin(np.arange(900) / 24 * 2 * np.pi)
    pd.DataFrame({"a": wave}, index=pd.Index([t.isoformat() for t in stamps], name="date")
                 ).to_csv(tmp_path / "dst.csv")
    run = tmp_path / "run"
    assert main(["train", "--csv", str(tmp_path / "dst.csv"), "--method", "public",
                 "--seq-len", "96", "--out", str(run), "--quiet"]) == 0
    out = tmp_path / "f.csv"
    assert main(["forecast", str(run), "--csv", str(tmp_path / "dst.csv"), "--out",
                 str(out)]) == 0
    first = pd.read_csv(out)["date"].iloc[0]
    assert first == "2021-04-07 13:00:00+02:00"  # the hour after the last row, 12:00+02:00


def test_the_readme_says_what_result_json_keeps_of_the_training_file(tmp_path):
    """The README said ``inference`` keeps the training file's sha256; for a user's file it
    is null by design (the digest identifies the file, and no guarantee covers it): the
    README now says so (issue 42)."""
    readme = (Path(__file__).resolve().parents[2] / "docs" / "python.md").read_text()
    assert "only `config.json`, which is not shared, keeps it" in " ".join(readme.split())
    stamps = pd.date_range("2021-01-01", periods=400, freq="h", name="date")
    pd.DataFrame({"a": np.sin(np.arange(400) / 3.8)}, index=stamps).to_csv(tmp_path / "u.csv")
    assert main(["train", "--csv", str(tmp_path / "u.csv"), "--method", "public",
                 "--seq-len", "48", "--out", str(tmp_path / "run"), "--quiet"]) == 0
    result = json.loads((tmp_path / "run" / "result.json").read_text())
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    assert result["inference"]["source_sha256"] is None and config["source_sha256"]


def test_a_gap_outside_the_look_back_does_not_block_a_forecast(runs, tmp_path):
    """A NaN anywhere in the file blocked every forecast, even one whose look-back does not
    reach it (issue 42)."""
    path = tmp_path / "early-gap.csv"
    frame = exchange_frame(rows=300)
    frame.loc[20, "JPY"] = np.nan  # the last look-back holds rows 132-299
    frame.to_csv(path, index=False)
    run = load_run(runs("classical"))
    forecast = run.forecast(path)
    assert np.isfinite(forecast.to_numpy()).all()
    # and the same file, forecast from a point whose look-back holds the gap, is refused
    with pytest.raises(InvalidInputError, match=r"missing value at .*inside the 168 rows"):
        run.forecast(path, at=str(pd.Timestamp(frame["date"].iloc[180])))
