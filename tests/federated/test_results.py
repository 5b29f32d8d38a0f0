"""A federated run folder, written without processes: load_run and qpriv report read it."""

from __future__ import annotations

import numpy as np

from qpriv.cli import main
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
