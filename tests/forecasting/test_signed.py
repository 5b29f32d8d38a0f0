"""ldpt-signed: the feature path with each token's sign and scale kept (the signed encoding),
its calibration at the proved neighbouring distance, its rigorous accounting by the one
accountant, its privacy claims, and a tiny training run."""

from __future__ import annotations

import math
import os

import pytest
import torch

from qpriv.audits.paper import run_audits
from qpriv.errors import InvalidInputError
from qpriv.experiments.frontier import run_frontier
from qpriv.experiments.frontier_plan import FEATURE_PATH
from qpriv.experiments.grid import TINY as TINY_BUDGET
from qpriv.forecasting import rigorous
from qpriv.forecasting.config import ModelConfig
from qpriv.forecasting.methods import setup_method
from qpriv.forecasting.model import LDPTForecaster
from qpriv.forecasting.run import run_forecast
from qpriv.privacy.claims import PrivacyClaim
from qpriv.privacy.feature_path.accountant import account
from qpriv.privacy.feature_path.plan import UNITS, composition_plan
from qpriv.quantum.features import outcome_probabilities
from qpriv.quantum.states import amplitude_encode

TINY = ModelConfig(seq_len=32, horizon=4, n_channels=3, dim=4, stride=4, d_model=16,
                   n_heads=4, d_ff=32, n_shots=64)


def build(name: str, eps: float | None = None, **overrides) -> LDPTForecaster:
    torch.manual_seed(0)
    return LDPTForecaster(setup_method(name, base=TINY, eps=eps, overrides=overrides).config)


def batch(b: int = 5, seed: int = 1) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(b, TINY.seq_len, TINY.n_channels, generator=g).cumsum(1)


def test_the_signed_register_is_one_qubit_more() -> None:
    config = ModelConfig(encoding="signed")
    assert (config.hilbert_dim, config.n_features) == (32, 32**2 + 1)
    assert config.reference_amplitude == pytest.approx(2 * (2 + math.sqrt(3.99)) / 0.1)
    assert config.neighbour_d == pytest.approx(0.1, rel=1e-12)
    assert ModelConfig().neighbour_d == 0.1 and ModelConfig().hilbert_dim == 16
    wide = ModelConfig(encoding="signed", clip=1.0, reference=1.0)
    assert wide.neighbour_d == 2.0  # r <= c: neighbours can be orthogonal
    with pytest.raises(InvalidInputError, match="encoding = 'sign'"):
        ModelConfig(encoding="sign")
    with pytest.raises(InvalidInputError, match="clip"):
        ModelConfig(encoding="signed", clip=0.0)


def test_encoded_states_are_the_clipped_token_with_its_reference() -> None:
    model = build("ldpt-signed-clean")
    x = batch().double()
    vectors = model.encoded_tokens(x)
    tokens = build("ldpt-clean").encoded_tokens(x)  # eq. 2's tokens, the same normalisation
    assert vectors.shape == (*tokens.shape[:-1], 8)
    r = model.config.reference_amplitude
    expected = torch.cat([tokens.clamp(-2.0, 2.0), torch.full_like(tokens[..., :1], r),
                          torch.zeros_like(tokens[..., :3])], dim=-1)
    torch.testing.assert_close(vectors, expected, rtol=0, atol=0)
    psi, zero = amplitude_encode(vectors)
    assert zero == 0
    norms = torch.sqrt(tokens.clamp(-2.0, 2.0).square().sum(-1) + r * r)
    torch.testing.assert_close(psi[..., 4], r / norms)


def test_a_window_and_its_mirror_image_differ_only_for_the_signed_encoding() -> None:
    """RevIN maps a window's mirror image about its mean to -z: eq. 2 gives the same states
    (rho(x) = rho(-x)), the signed encoding does not."""
    x = batch()
    mirror = 2 * x.mean(dim=1, keepdim=True) - x
    rng = torch.Generator()
    for name, same in (("ldpt-clean", True), ("ldpt-signed-clean", False)):
        model = build(name)
        qf, qf_mirror = (model.features(model.encoded_tokens(v), rng) for v in (x, mirror))
        gap = float((qf - qf_mirror).abs().max())
        assert (gap < 1e-5) if same else (gap > 0.1), (name, gap)


@pytest.mark.parametrize("p", [0.0, 0.9])
def test_features_are_centred_on_the_zero_token(p: float) -> None:
    """A token of zeros is the state |r>: its exact features are 0 after the centring map,
    and a token's features are the closed form gain D^2 (q(psi) - q(|r>))."""
    model = build("ldpt-signed-clean", p=p, normalisation="fixed")
    zeros = torch.zeros(2, TINY.seq_len, TINY.n_channels)
    qf = model.features(model.encoded_tokens(zeros), torch.Generator())
    assert float(qf[..., :-1].abs().max()) < 1e-3  # float32 rounding x gain D^2
    x = batch(2)
    vectors = model.encoded_tokens(x.double())
    psi, _ = amplitude_encode(vectors)
    ref = torch.zeros(8, dtype=torch.float64)
    ref[4] = 1.0
    gain = 1.0 / ((1 - p) * 2.0 / model.config.reference_amplitude)
    expected = gain * 64 * (outcome_probabilities(psi, p=p) - outcome_probabilities(ref, p=p))
    qf = model.features(model.encoded_tokens(x), torch.Generator())
    torch.testing.assert_close(qf[..., :-1].double(), expected, atol=2e-3, rtol=2e-3)


def test_calibrated_at_the_proved_distance_and_the_register_dimension() -> None:
    """Theorem 1 solved for p (eq. 6) at eps_ch = 0.8 eps_s, d and D = 2 x 16."""
    eps_ch = 0.8 * 0.1
    signed = setup_method("ldpt-signed", base=ModelConfig(), eps=0.1)
    assert signed.config.p == pytest.approx(0.1 * 32 / (math.expm1(eps_ch) + 0.1 * 32), 1e-12)
    assert signed.config.sigma == pytest.approx(signed.config.p / math.sqrt(128), 1e-12)
    assert signed.config.encoding == "signed" and signed.privacy == "local eps-QDP per pass"
    ldpt = setup_method("ldpt", base=ModelConfig(), eps=0.1)
    assert ldpt.config.p == pytest.approx(0.1 * 16 / (math.expm1(eps_ch) + 0.1 * 16), 1e-12)
    wide = setup_method("ldpt-signed", base=ModelConfig(), eps=0.1,
                        overrides={"clip": 1.0, "reference": 1.0})
    assert wide.calibration.d == 2.0
    assert wide.config.p == pytest.approx(2 * 32 / (math.expm1(eps_ch) + 2 * 32), 1e-12)
    clean = setup_method("ldpt-signed-clean", base=ModelConfig())
    assert (clean.config.p, clean.config.n_shots, clean.config.injects) == (0.0, None, False)


def test_the_accountant_counts_tokens_of_16_values_in_32_amplitudes() -> None:
    for unit in UNITS:
        signed = composition_plan(unit, dim=32, token_length=16)
        assert signed.factors == composition_plan(unit, dim=16).factors
    assert composition_plan("record", dim=32).count == 1024 * 77 * 32 * 20  # if unsplit



def test_rigorous_claims_are_the_accountant_at_the_proved_distance(private_cache) -> None:
    config = setup_method("ldpt-signed", base=TINY, eps=1.0,
                          overrides={"normalisation": "fixed", "n_shots": 16,
                                     "reference": 10.0}).config
    d = 4 * 2.0 * 10.0 / (2.0**2 + 10.0**2)  # 0.769, not the paper's 0.1
    assert config.p == pytest.approx(d * 8 / (math.expm1(0.8) + d * 8), rel=1e-12)
    summary = rigorous.rigorous_summary(config, epochs=1, delta=1e-5)
    report = account(p=config.p, d=d, dim=8, token_length=4, n_shots=16, stride=4,
                     seq_len=32, epochs=1, units=rigorous.RIGOROUS_UNITS)
    for unit in rigorous.RIGOROUS_UNITS:
        claim = PrivacyClaim.from_json(summary[f"eps_{unit}"])
        assert claim.value == pytest.approx(report.row(unit).eps, rel=1e-6)  # p to 12 digits
        assert (claim.kind, claim.accounting, claim.unit, claim.delta) == (
            "composed", "rigorous", unit, 1e-5)
        assert "not the forecast targets, not the trained weights" in claim.covers
        assert "proved" in claim.details["neighbourhood"]
        assert "every window and record" in claim.details["neighbourhood"]
    assert report.row("record").count == 16 * 8 * 4  # n_tokens(4, 4, 32) = 8 tokens of 4
    assert summary["assumptions"][0].startswith("one value of a token replaced within [-2, 2]")
    assert "forecast targets" in summary["covers"] and "RevIN" not in summary["covers"]


@pytest.mark.skipif(not os.environ.get("QPRIV_DATA_DIR"),
                    reason="QPRIV_DATA_DIR (the ETT csv files) not set")
def test_a_tiny_run_trains_and_states_its_claims(private_cache) -> None:
    tiny = {"seq_len": 48, "horizon": 4, "epochs": 1, "max_train_windows": 32,
            "max_eval_windows": 16, "progress": False, "threads": 1,
            "overrides": {"d_model": 8, "n_heads": 2, "d_ff": 16, "dim": 4, "n_shots": 32}}
    result = run_forecast(method="ldpt-signed", eps=0.5, **tiny)
    assert math.isfinite(result.mse) and result.model["encoding"] == "signed"
    assert result.p == pytest.approx(0.1 * 8 / (math.expm1(0.4) + 0.1 * 8), rel=1e-12)
    per_pass = result.claims["eps_per_pass"]
    assert (per_pass.value, per_pass.unit, per_pass.accounting) == (0.5, "token", "paper")
    assert "token unit only" in per_pass.details["neighbourhood"]  # RevIN: the bound is per token
    record = result.rigorous_claims["record"]
    assert record.value > result.rigorous_claims["token"].value > 0.5
    assert "RevIN" in result.rigorous["covers"]
    # --accounting rigorous: p for a record budget, at d and the 8-dim register, tokens of 4
    calibrated = run_forecast(method="ldpt-signed", accounting="rigorous", eps_total=3.0,
                              delta=1e-5, **tiny)
    achieved = calibrated.rigorous_calibration["achieved"]
    assert (achieved["dim"], achieved["d"]) == (8, pytest.approx(0.1, rel=1e-12))
    assert achieved["count"] == 32 * 12 * 4 * 1  # shots x n_tokens(4, 4, 48) x 4 values
    assert achieved["eps"]["value"] <= 3.0
    assert calibrated.model["normalisation"] == "fixed"


@pytest.mark.skipif(not os.environ.get("QPRIV_DATA_DIR"),
                    reason="QPRIV_DATA_DIR (the ETT csv files) not set")
def test_the_paper_audits_read_the_five_qubit_register(tmp_path) -> None:
    """Audits 1-4 and 6 recompute Algorithm 1, the channel and its fidelity at D = 32."""
    run_dir = tmp_path / "signed"
    run_forecast(dataset="ETTh1", method="ldpt-signed", eps=0.1, epochs=1, horizon=24,
                 seq_len=64, max_train_windows=64, max_eval_windows=32, progress=False,
                 threads=1, rigorous=False, out_dir=run_dir,
                 overrides={"d_model": 16, "n_heads": 2, "d_ff": 32, "n_shots": 64})
    audits = run_audits(run_dir, pairs=200, windows=8, ladder=(0.1, 1.0), discover=False)
    assert [a.status for a in audits] == ["pass"] * 4 + ["not applicable", "pass"], [
        a.detail for a in audits]
    fidelity = audits[5].values["rows"][0]
    assert fidelity["fidelity_closed_form"] == pytest.approx(1 - 0.9746330229558825
                                                             + 0.9746330229558825 / 32)


@pytest.mark.skipif(not os.environ.get("QPRIV_DATA_DIR"),
                    reason="QPRIV_DATA_DIR (the ETT csv files) not set")
def test_on_the_frontier_it_is_drawn_like_ldpt(tmp_path) -> None:
    report = run_frontier(unit="record", eps=(0.1,), methods=("ldpt", "ldpt-signed", "public"),
                          seeds=1, budget=TINY_BUDGET, out_dir=tmp_path, progress=False)
    assert report.failures == []
    rows = {r["method"]: r for r in report.rows}
    for name in ("ldpt", "ldpt-signed"):
        row = rows[name]
        assert (row["role"], row["claim_unit"], row["claim_kind"]) == (
            FEATURE_PATH, "token", "local eps-QDP per pass")
        assert not row["covers_unit"] and not row["covers_weights"]
        assert "covers neither the targets nor the weights" in row["reading"]
        assert math.isfinite(row["mse_mean"])
    assert rows["ldpt-signed"]["covers"] == rows["ldpt"]["covers"]
