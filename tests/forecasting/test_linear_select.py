"""dp-linear's design at every horizon and its private selection: with the noise off it is
the ridge on its own features; the selection's release is inside the composed guarantee."""

from __future__ import annotations

import math

import numpy as np
import pytest

from qpriv.errors import InvalidInputError
from qpriv.forecasting.linear import (
    RULES_NOTE,
    default_spec,
    fit_dp_linear,
    fit_ridge,
)
from qpriv.forecasting.linear_design import block_edges, output_basis, record_maps
from qpriv.forecasting.linear_select import design_candidates
from qpriv.forecasting.windows import load_forecasting_data
from qpriv.privacy.ssp import (
    composed_noise_multiplier,
    gaussian_epsilon_pld,
    gaussian_noise_multiplier,
    split_noise_multiplier,
)


@pytest.fixture(scope="module", params=[24, 96, 336, 720])
def etth1(request):
    return load_forecasting_data("ETTh1", horizon=request.param)


@pytest.mark.parametrize("unit_scale", [0.0, 10.0])
def test_noiseless_dp_linear_is_the_ridge_on_its_features_at_every_horizon(etth1, unit_scale):
    """Noise off (test-only switch), clips wide open and the loader's scaler: the fixed design
    equals the non-private ridge on the same features and outputs to 1e-6, unshrunk (ridge
    scale 0) and shrunk toward the public forecast by the ridge the noise sets (scale 10,
    compared with fit_ridge at the ridge the fit reports): the design's cost shows only
    through clipping, never through the solve."""
    spec = default_spec(etth1)
    fit = fit_dp_linear(etth1, eps=1.0, unit="record", select="fixed", scaler="data",
                        ridge_scale=unit_scale, clip=1e9, feature_clip=1e9, target_clip=1e9,
                        noise=False)
    ridge = fit_ridge(etth1, ridge=fit.model.details["ridge"], spec=spec)
    assert (fit.model.details["ridge"] > 0) == (unit_scale > 0)
    np.testing.assert_allclose(fit.model.kernel, ridge.kernel, atol=1e-6)
    if unit_scale:  # the shrinkage acts: the unshrunk ridge is another kernel
        assert not np.allclose(fit_ridge(etth1, ridge=0.0, spec=spec).kernel, ridge.kernel,
                               atol=1e-6)


def test_block_mean_targets_keep_the_record_target_term_flat_in_the_horizon():
    """T(Q) of the identity part is exactly k for block means (it was sqrt(H k) for the
    orthonormal basis), so the record sensitivity no longer grows with H."""
    for horizon in (24, 96, 336, 720):
        for scale, expected in (("mean", 2.0), ("orthonormal", math.sqrt(2 * horizon))):
            v = output_basis(horizon, 2, scale)
            _, target_map = record_maps(np.zeros((1, 8)), np.zeros((horizon, 8)), v)
            t_q = np.linalg.norm(target_map, axis=0).sum()
            assert t_q == pytest.approx(expected, rel=1e-12)
    assert set(block_edges(720, 2)) <= set(block_edges(720, 8))  # nested candidates


def test_candidates_depend_on_the_shapes_only_and_scale_with_the_period():
    hourly = design_candidates(seq_len=336, horizon=96, period=24)
    assert {c.spec.output_blocks for c in hourly} == {1, 2, 4, 8}
    assert hourly[0].spec.recent == (1, 3, 6, 12, 24, 48, 96)
    quarter = design_candidates(seq_len=672, horizon=96, period=96)
    assert quarter[0].spec.recent[-1] == 384 and quarter[0].spec.public_days == 7
    assert {c.spec.output_blocks for c in design_candidates(seq_len=336, horizon=2)} == {1, 2}


@pytest.mark.parametrize("unit", ["record", "window"])
def test_the_selection_is_inside_the_composed_gaussian_guarantee(unit):
    """The selection's release and the fit's compose as one Gaussian mechanism whose eps at
    delta is the claim's Gaussian part: dropping the selection's share from the accountant
    (the fit calibrated to the whole budget) makes the composed eps exceed the claim."""
    data = load_forecasting_data("ETTh1", horizon=24)
    _, (claim,) = fit_dp_linear(data, eps=1.0, unit=unit, seed=0)
    details = claim.details
    selection = details["selection"]
    assert selection["select"] == "private" and 0 < selection["share"] < 1
    z_fit, z_select = details["noise_multiplier"], selection["noise_multiplier"]
    composed = composed_noise_multiplier((z_select, z_fit))
    assert composed == pytest.approx(details["noise_multiplier_total"], rel=1e-12)
    eps = gaussian_epsilon_pld(noise_multiplier=composed, delta=claim.delta)
    assert eps <= details["eps_gaussian"] * (1 + 2e-3)
    assert eps >= details["eps_gaussian"] * (1 - 2e-3)
    # the release's noise is what its multiplier says
    assert details["sigma_b"] == pytest.approx(
        details["sensitivity_b"] * z_fit / math.sqrt(1 - details["share_a"]), rel=1e-12)
    assert selection["sigma_b"] == pytest.approx(
        selection["sensitivity_b"] * z_select / math.sqrt(1 - details["share_a"]), rel=1e-12)
    # the claim names the mechanism, the share and the rules taken as given
    assert RULES_NOTE in claim.notes
    assert any("selected inside the guarantee" in note and f"{selection['share']:g} of the "
               "Gaussian budget" in note for note in claim.notes)


def test_split_and_compose_are_inverse_and_refuse_bad_shares():
    z = gaussian_noise_multiplier(eps=1.0, delta=1e-6)
    parts = split_noise_multiplier(z, (0.1, 0.9))
    assert parts[0] == pytest.approx(z / math.sqrt(0.1))
    assert composed_noise_multiplier(parts) == pytest.approx(z, rel=1e-12)
    with pytest.raises(InvalidInputError, match="sum to 1"):
        split_noise_multiplier(z, (0.5, 0.6))


def test_select_private_refuses_a_given_design():
    data = load_forecasting_data("ETTh1", horizon=24, max_train_windows=64)
    with pytest.raises(InvalidInputError, match="select='fixed'"):
        fit_dp_linear(data, eps=1.0, ridge_scale=3.0)
    with pytest.raises(InvalidInputError, match="select = 'best'"):
        fit_dp_linear(data, eps=1.0, select="best")


def test_the_selection_reads_no_split_but_training(monkeypatch):
    """The selection's statistics come from the training rows alone: changing every
    validation and test value leaves the chosen design and the kernel unchanged."""
    data = load_forecasting_data("ETTh1", horizon=96)
    fit = fit_dp_linear(data, eps=1.0, seed=4)
    data.val.series.mul_(-3.0).add_(7.0)
    data.test.series.mul_(-3.0).add_(7.0)
    again = fit_dp_linear(data, eps=1.0, seed=4)
    assert again.claims[0].details["selection"]["chosen"] == \
        fit.claims[0].details["selection"]["chosen"]
    np.testing.assert_array_equal(again.model.kernel, fit.model.kernel)
