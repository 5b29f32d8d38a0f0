"""A federated run folder, written without processes: load_run and qpriv report read it."""

from __future__ import annotations

import numpy as np

from qpriv.cli import main
from qpriv.federated.personal import decode_personal
from qpriv.federated.protocol import decode_and_solve
from qpriv.federated.results import write_release
from qpriv.federated.site import site_errors, site_update
from qpriv.forecasting.artifacts import load_run

from .test_protocol import load, noiseless_plan


def test_the_folder_loads_forecasts_and_reports_its_sites(sites, tmp_path):
    datas = load(sites)
    plan = noiseless_plan(datas, noise=True, scaler="private")
    total = np.sum([site_update(d, plan, rng=np.random.default_rng(i))
                    for i, d in enumerate(datas)], axis=0)
    model, claim = decode_and_solve(total, plan, survivors=3)
    reports = [{"site": d.dataset, **site_errors(model.kernel, d, "test"),
                "val_mse": site_errors(model.kernel, d, "val")["mse"],
                "test_windows": d.windows("test"), "train_windows": d.windows("train"),
                "val_windows": d.windows("val"),
                "rows": len(d.dates), "first": d.dates[0].isoformat(),
                "last": d.dates[-1].isoformat(), "date_column": "date", "freq": "h"}
               for d in datas]
    result = write_release(tmp_path, model=model, claim=claim, plan=plan, sites=reports)
    pooled = sum(r["mse"] * r["test_windows"] for r in reports) / sum(
        r["test_windows"] for r in reports)
    assert result["mse"] == pooled
    run = load_run(tmp_path)
    assert np.array_equal(run.model.kernel, model.kernel)
    assert run.forecast(sites[0]).shape == (24, 2)
    assert main(["report", str(tmp_path)]) == 0
    page = (tmp_path / "report.html").read_text()
    assert "Sites (federated)" in page and "site1" in page


def test_a_personal_folder_holds_every_kernel_and_its_report_says_so(sites, tmp_path):
    """A personal round's folder: load_run reads the pooled kernel; linear.npz holds each
    site's by slot; the report says each site's errors are of its own kernel."""
    datas = load(sites)
    plan = noiseless_plan(datas, noise=True, scaler="private", personal=True)
    total = np.sum([site_update(d, plan, rng=np.random.default_rng(i), slot=i)
                    for i, d in enumerate(datas)], axis=0)
    release = decode_personal(total, plan, survivors=3)
    reports = [{"site": d.dataset, **site_errors(release.sites[i].kernel, d, "test"),
                "val_mse": 0.0, "test_windows": d.windows("test"),
                "train_windows": d.windows("train"), "val_windows": d.windows("val"),
                "rows": len(d.dates), "first": d.dates[0].isoformat(),
                "last": d.dates[-1].isoformat(), "date_column": "date", "freq": "h", "slot": i}
               for i, d in enumerate(datas)]
    result = write_release(tmp_path, model=release.pooled, claim=release.claim, plan=plan,
                           sites=reports,
                           site_kernels={s: m.kernel for s, m in release.sites.items()})
    assert np.array_equal(load_run(tmp_path).model.kernel, release.pooled.kernel)
    with np.load(tmp_path / "linear.npz") as stored:
        assert np.array_equal(stored["site_kernels"][2], release.sites[2].kernel)
    assert result["federated"]["personal"]["slots"] == [0, 1, 2]
    assert main(["report", str(tmp_path)]) == 0
    assert "A personal round" in (tmp_path / "report.html").read_text()
