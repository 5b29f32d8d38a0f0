"""Small sites for the federated tests: hourly series that share their columns."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

SEQ_LEN, HORIZON = 48, 24


def write_site(path: Path, *, seed: int, rows: int = 600, start: str = "2020-01-01",
               freq: str = "h", columns: tuple[str, ...] = ("load", "temp")) -> Path:
    """A CSV of ``rows`` daily-periodic values with noise, one column per name."""
    rng = np.random.default_rng(seed)
    t = np.arange(rows)
    frame = pd.DataFrame({"date": pd.date_range(start, periods=rows, freq=freq)})
    for i, name in enumerate(columns):
        frame[name] = np.sin(2 * np.pi * (t + 3 * i) / 24) + 0.3 * rng.standard_normal(rows)
    frame.to_csv(path, index=False)
    return path


@pytest.fixture
def sites(tmp_path: Path) -> list[Path]:
    """Three sites of 600 hourly rows each (different noise, same columns)."""
    return [write_site(tmp_path / f"site{i}.csv", seed=i) for i in range(3)]
