"""Rigorous accounting of the LDPT feature path (issue 6 parts 1 and 2).

Every fast path has a slow twin here: the PLD of one shot against the exact hockey-stick sum, the
composed PLD against the exact multinomial of N shots, our connect-the-dots PMF against
dp-accounting's, the torch search objective against dp-accounting's RDP conversion, the found
worst case against random pairs, and the inverse calibration against the forward accountant.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.optimize
import torch
from dp_accounting.pld import pld_pmf
from scipy.special import gammaln

from qpriv.audits.channel import neighbouring_pure_pairs, worst_case_dmax
from qpriv.errors import InvalidInputError
from qpriv.privacy.claims import COVERS_FEATURES_PER_PASS
from qpriv.privacy.feature_path.accountant import (
    WORST_PAIR_NOTE,
    account,
    evaluate_pairs,
    paper_equivalent_eps_s,
    rigorous_epsilon,
    rigorous_notes,
)
from qpriv.privacy.feature_path.divergences import (
    RDP_ORDERS,
    choose_discretization,
    compose_staged,
    connect_dots_masses,
    pld_epsilon,
    pld_from_pair,
    privacy_losses,
    rdp_epsilon,
    renyi_divergences,
)
from qpriv.privacy.feature_path.pairs import (
    NeighbourPair,
    sic_aligned_pair,
    single_shot_distribution,
)
from qpriv.privacy.feature_path.plan import UNITS, composition_plan, tokens_per_window
from qpriv.privacy.feature_path.rigorous_calibration import rigorous_calibration
from qpriv.privacy.feature_path.worst_pair import _torch_rdp_epsilon, search_worst_pairs
from qpriv.privacy.theorems import channel_epsilon, check_trace_distance
from qpriv.quantum.channels import apply_superoperator, depolarizing_propagator, depolarizing_rate
from qpriv.quantum.povm import sic_povm
from qpriv.quantum.states import density_matrix
from qpriv.quantum.tokens import n_tokens

# Independent closed forms the accountant is checked against (used by these tests only).


def pair_at_distance(psi: np.ndarray, direction: np.ndarray, *, d: float,
                     source: str = "given") -> NeighbourPair:
    """The pair (psi, cos(t) psi + sin(t) chi) at full trace distance exactly d, where chi is
    ``direction`` made orthogonal to psi and sin(t) = d / 2."""
    d = check_trace_distance(d)
    psi = np.asarray(psi, dtype=np.complex128)
    psi = psi / np.linalg.norm(psi)
    chi = np.asarray(direction, dtype=np.complex128)
    chi = chi - np.vdot(psi, chi) * psi
    norm = np.linalg.norm(chi)
    if norm < 1e-12:
        raise InvalidInputError(
            "direction is parallel to psi; give one with a part orthogonal to psi"
        )
    s = d / 2.0
    return NeighbourPair(psi, math.sqrt(1.0 - s * s) * psi + s * chi / norm, source)


def pure_epsilon(P: np.ndarray, Q: np.ndarray) -> float:
    """Pure-DP eps of one shot, ``max_k |ln(P_k / Q_k)|`` (both directions)."""
    return float(np.max(np.abs(privacy_losses(P, Q))))


def hockey_stick(P: np.ndarray, Q: np.ndarray, eps: float | np.ndarray) -> np.ndarray:
    """Exact one-shot delta(eps) = max of ``sum_k (P_k - e^eps Q_k)_+`` and the swapped sum."""
    scale = np.exp(np.atleast_1d(np.asarray(eps, dtype=float)))[:, None]
    forward = np.maximum(P[None, :] - scale * Q[None, :], 0.0).sum(axis=1)
    backward = np.maximum(Q[None, :] - scale * P[None, :], 0.0).sum(axis=1)
    return np.maximum(forward, backward)


PAPER_P = 0.9505  # Algorithm 1 at eps_s = 0.1, d = 0.1, D = 16 (Table 7)


def _random_pairs(*, dim: int, d: float, n: int, seed: int) -> list[NeighbourPair]:
    psi, phi = neighbouring_pure_pairs(dim=dim, d=d, pairs=n, rng=np.random.default_rng(seed))
    return [NeighbourPair(a, b, "random") for a, b in zip(psi, phi, strict=True)]


def test_single_shot_distribution_is_the_lindblad_channel_then_the_sic_povm():
    # closed form vs tr(M_k e^{L t}(|psi><psi|)): the QuTiP Liouvillian's propagator
    rng = np.random.default_rng(0)
    psi = rng.standard_normal((3, 16)) + 1j * rng.standard_normal((3, 16))
    psi /= np.linalg.norm(psi, axis=1, keepdims=True)
    ours = single_shot_distribution(psi, p=0.7)
    rho = apply_superoperator(depolarizing_propagator(4, gamma=depolarizing_rate(0.7)),
                              density_matrix(torch.from_numpy(psi)))
    theirs = torch.einsum("kij,bji->bk", sic_povm(16), rho).real.numpy()
    np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-12)
    np.testing.assert_allclose(ours.sum(axis=1), 1.0, atol=1e-12)
    assert ours.min() >= 0.7 / 256


@pytest.mark.parametrize(("p", "d", "dim"), [(PAPER_P, 0.1, 16), (0.5, 0.3, 4), (0.9, 1.0, 8)])
def test_sic_aligned_pair_attains_the_closed_form_single_shot_maximum(p, d, dim):
    pair = sic_aligned_pair(p=p, d=d, dim=dim)
    assert pair.trace_distance_full == pytest.approx(d, abs=1e-12)
    P, Q = pair.distributions(p=p)
    # one shot: pure eps = max |ln P/Q| = the quantum D_max of the 2x2 closed form (audit.py)
    assert pure_epsilon(P, Q) == pytest.approx(worst_case_dmax(p=p, d=d, dim=dim), rel=1e-10)


def test_no_random_pair_beats_the_single_shot_maximum():
    """Data processing: a measured likelihood ratio never exceeds D_max of the channel outputs."""
    bound = worst_case_dmax(p=PAPER_P, d=0.1, dim=16)
    worst = max(pure_epsilon(*pair.distributions(p=PAPER_P))
                for pair in _random_pairs(dim=16, d=0.1, n=500, seed=1))
    assert 0.3 * bound < worst <= bound


def test_pair_at_distance_is_exactly_at_distance():
    rng = np.random.default_rng(2)
    pair = pair_at_distance(rng.standard_normal(8) + 0j, rng.standard_normal(8) + 1j,
                                d=0.37)
    assert pair.trace_distance_full == pytest.approx(0.37, abs=1e-12)
    with pytest.raises(InvalidInputError, match="parallel"):
        pair_at_distance(np.ones(4), 2 * np.ones(4), d=0.1)


def test_one_shot_pld_is_the_exact_hockey_stick_divergence():
    P, Q = sic_aligned_pair(p=PAPER_P, d=0.1, dim=16).distributions(p=PAPER_P)
    step = choose_discretization(P, Q, 1)
    pld = pld_from_pair(P, Q, step=step)
    grid = step * np.arange(-40, 41) * 50
    # connect-the-dots keeps delta(eps) exactly at grid points, both directions
    np.testing.assert_allclose(pld.get_delta_for_epsilon(grid), hockey_stick(P, Q, grid),
                               rtol=1e-9, atol=1e-13)
    total_variation = hockey_stick(P, Q, 0.0)[0]
    for delta in (total_variation / 2, total_variation / 20):
        exact = scipy.optimize.brentq(lambda e, t=delta: hockey_stick(P, Q, e)[0] - t,
                                      0.0, 1.0)
        assert exact - 1e-12 <= pld.get_epsilon_for_delta(delta) <= exact + step
    # delta -> 0: pure eps of one shot, max |ln P/Q|, rounded up to the grid
    pure = pure_epsilon(P, Q)
    assert pure <= pld.get_epsilon_for_delta(1e-300) <= pure + step


def test_connect_the_dots_masses_equal_dp_accountings_at_a_coarse_grid():
    P, Q = sic_aligned_pair(p=0.6, d=0.4, dim=4).distributions(p=0.6)
    step = 1e-2
    ours = connect_dots_masses(P, Q, step)
    losses = privacy_losses(P, Q)
    grid = np.arange(math.floor(losses.min() / step), math.ceil(losses.max() / step) + 1)
    deltas = np.maximum(P[None, :] - np.exp(grid * step)[:, None] * Q[None, :], 0).sum(axis=1)
    theirs = pld_pmf.create_pmf_pessimistic_connect_dots(step, grid, deltas)
    losses_theirs, probs_theirs = theirs._get_losses_probs()
    theirs = {round(loss / step): prob
              for loss, prob in zip(losses_theirs, probs_theirs, strict=True)}
    # the same PMF; theirs also holds ~1e-15 masses, the rounding noise of differencing
    # hockey-stick values that grows as 1/step (why the split is done per outcome)
    for index in set(theirs) | set(ours):
        assert theirs.get(index, 0.0) == pytest.approx(ours.get(index, 0.0), abs=1e-13)
    assert sum(ours.values()) == pytest.approx(1.0, abs=1e-14)
    # mass under Q is kept: sum over grid of mass * e^-loss = sum_k Q_k = 1
    assert sum(m * math.exp(-i * step) for i, m in ours.items()) == pytest.approx(1.0, abs=1e-12)


def _multinomial_delta(P: np.ndarray, Q: np.ndarray, shots: int, eps: float) -> float:
    """Exact delta(eps) of ``shots`` shots by enumerating every count vector (4 outcomes)."""
    counts = np.array([(a, b, c, shots - a - b - c) for a in range(shots + 1)
                       for b in range(shots + 1 - a) for c in range(shots + 1 - a - b)])
    log_coef = gammaln(shots + 1) - gammaln(counts + 1).sum(axis=1)
    up, low = np.exp(log_coef + counts @ np.log(P)), np.exp(log_coef + counts @ np.log(Q))
    return max(np.maximum(up - math.exp(eps) * low, 0).sum(),
               np.maximum(low - math.exp(eps) * up, 0).sum())


def test_composed_pld_matches_the_exact_multinomial_of_one_pass():
    """One pass (one epoch) of one token: N shots, whose counts are multinomial (D = 2)."""
    P, Q = sic_aligned_pair(p=0.5, d=0.5, dim=2).distributions(p=0.5)
    shots = 40
    step = choose_discretization(P, Q, shots)
    pld = compose_staged(pld_from_pair(P, Q, step=step), (("shots", shots),))
    staged = compose_staged(pld_from_pair(P, Q, step=step), (("a", 8), ("b", 5)))
    for eps in (0.5, 1.0, 2.0, 3.0):
        exact = _multinomial_delta(P, Q, shots, eps)
        ours = pld.get_delta_for_epsilon(eps)
        assert exact <= ours <= exact * 1.01  # pessimistic and tight
        assert staged.get_delta_for_epsilon(eps) == pytest.approx(ours, rel=1e-9)


def test_search_objective_is_dp_accountings_rdp_conversion():
    pair = sic_aligned_pair(p=PAPER_P, d=0.1, dim=16)
    P, Q = pair.distributions(p=PAPER_P)
    for count in (1024, 26_542_080):
        ours = _torch_rdp_epsilon(
            torch.from_numpy(P), torch.from_numpy(Q), count=count, delta=1e-5,
            orders=torch.from_numpy(RDP_ORDERS))
        reference = rdp_epsilon(renyi_divergences(P, Q), count=count, delta=1e-5)
        assert float(ours) == pytest.approx(reference, rel=1e-9)


def test_renyi_divergences_against_the_direct_sum():
    P, Q = sic_aligned_pair(p=0.5, d=0.3, dim=4).distributions(p=0.5)
    orders = np.array([1.5, 2.0, 5.0, 20.0])
    direct = np.maximum(
        np.log([np.sum(P**a * Q ** (1 - a)) for a in orders]),
        np.log([np.sum(Q**a * P ** (1 - a)) for a in orders]),
    ) / (orders - 1)
    np.testing.assert_allclose(renyi_divergences(P, Q, orders), direct, rtol=1e-10)
    # near-equal pair (high noise): accurate where the direct sum cancels to rounding error
    P, Q = sic_aligned_pair(p=0.99999, d=0.1, dim=16).distributions(p=0.99999)
    chi2 = max(np.sum((P - Q) ** 2 / Q), np.sum((P - Q) ** 2 / P))
    assert renyi_divergences(P, Q, np.array([2.0]))[0] == pytest.approx(chi2, rel=1e-4)


def test_pld_and_rdp_agree_within_the_known_slack():
    """RDP's conversion is an upper bound looser than the PLD: at most ~12 % here."""
    pairs = search_worst_pairs(p=PAPER_P, count=4096, restarts=1)
    for unit in ("token", "window", "token-training"):
        plan = composition_plan(unit)
        result = evaluate_pairs(plan, pairs, p=PAPER_P, delta=1e-5)
        assert result.eps <= result.eps_rdp <= 1.15 * result.eps
        assert result.kind == "composed" and result.accounting == "rigorous"
    token = evaluate_pairs(composition_plan("token"), pairs, p=PAPER_P, delta=1e-5)
    assert token.eps == pytest.approx(0.386, abs=0.002)  # N_s shots: far above eps_s = 0.1


def test_the_record_units_three_stages_agree_with_rdp_over_the_whole_count():
    """The record composes shots, token states and epochs in three PLD stages: against RDP's
    conversion of the same total count (an independent upper bound) the PLD stays below and
    within the known slack, and a second epoch costs what composing twice costs."""
    small = {"n_shots": 32, "dim": 4, "stride": 2, "seq_len": 12}
    results = {}
    for epochs in (1, 2):
        plan = composition_plan("record", epochs=epochs, **small)
        assert plan.count == 32 * 5 * 4 * epochs  # 5 tokens of 4 values over 12 steps
        pairs = search_worst_pairs(p=0.5, dim=4, count=plan.count, restarts=1)
        results[epochs] = evaluate_pairs(plan, pairs, p=0.5, delta=1e-5)
        assert results[epochs].eps <= results[epochs].eps_rdp <= 1.2 * results[epochs].eps
    assert 1.3 * results[1].eps < results[2].eps < 2 * results[1].eps


def test_worst_case_found_is_never_exceeded_by_random_pairs():
    plan = composition_plan("token")
    found = rigorous_epsilon(p=PAPER_P, unit="token", restarts=1)
    randoms = _random_pairs(dim=16, d=0.1, n=20, seed=3)
    worst_random = max(pld_epsilon(*pair.distributions(p=PAPER_P), factors=plan.factors,
                                   delta=1e-5)[0] for pair in randoms)
    assert worst_random <= found.eps
    assert worst_random > 0.9 * found.eps  # the SIC is a 2-design: pairs differ by little
    # the record's count (26.5 million shots): compare RDP bounds, 200 random pairs
    record = composition_plan("record")
    pairs = search_worst_pairs(p=PAPER_P, count=record.count, restarts=1)
    best = rdp_epsilon(renyi_divergences(*pairs[0].distributions(p=PAPER_P)),
                       count=record.count, delta=1e-5)
    for pair in _random_pairs(dim=16, d=0.1, n=200, seed=4):
        rdp = renyi_divergences(*pair.distributions(p=PAPER_P))
        assert rdp_epsilon(rdp, count=record.count, delta=1e-5) <= best


def test_eps_decreases_with_p_and_increases_with_shots():
    common = {"unit": "token", "dim": 4, "restarts": 1, "delta": 1e-5}
    by_p = [rigorous_epsilon(p=p, n_shots=64, **common).eps for p in (0.5, 0.8, 0.95)]
    assert by_p[0] > by_p[1] > by_p[2] > 0
    pairs = search_worst_pairs(p=0.8, dim=4, count=64, restarts=1)
    by_shots = [evaluate_pairs(composition_plan("token", n_shots=n, dim=4), pairs,
                               p=0.8, delta=1e-5).eps for n in (16, 64, 256)]
    assert by_shots[0] < by_shots[1] < by_shots[2]
    # shots compose: 4x the shots is about 2x the eps in this Gaussian-like regime, never 1x
    assert 1.5 < by_shots[2] / by_shots[1] < 4.0


def test_composition_counts():
    assert n_tokens(dim=16, stride=4, seq_len=336) == 81
    assert tokens_per_window(dim=16, stride=4, seq_len=336) == 4
    assert tokens_per_window(dim=16, stride=5, seq_len=336) == 4  # ceil(16/5)
    assert tokens_per_window(dim=16, stride=3, seq_len=336) == 6  # ceil(16/3)
    counts = {u: composition_plan(u).count for u in UNITS}
    assert counts == {"token": 1024, "token-training": 1024 * 20, "window": 1024 * 4,
                      "record": 1024 * 81 * 16 * 20}
    # a count the accountant cannot hold is refused before any work (1e6 shots: 2.6e10 fits)
    assert composition_plan("record", n_shots=10**6).count == 10**6 * 81 * 16 * 20
    with pytest.raises(InvalidInputError, match=r"composes 2\.07e\+11 single-shot"):
        composition_plan("record", n_shots=8 * 10**6)
    # at most L windows x ceil(D/s) tokens per window
    assert counts["record"] <= 1024 * 336 * 4 * 20


def test_report_sets_the_rigorous_numbers_beside_the_papers(terminal):
    stderr = terminal()
    report = account(eps_s=0.1, units=("token",), restarts=1, progress=True)
    assert "rigorous accounting" in stderr.getvalue()  # the bar, on stderr
    assert report.p == pytest.approx(PAPER_P, abs=1e-4)
    assert report.paper["eps_per_pass"] == {
        "value": 0.1, "kind": "local eps-QDP per pass", "accounting": "paper", "unit": "token",
        "covers": COVERS_FEATURES_PER_PASS}
    assert report.paper["eps_basic"]["value"] == pytest.approx(2.0)
    assert round(report.paper["eps_advanced"]["value"], 2) == 2.56
    token = report.row("token")
    assert token.labelled() == {"value": token.eps, "kind": "composed",
                                "accounting": "rigorous", "delta": 1e-5, "unit": "token",
                                "composed_over": "token", "covers": COVERS_FEATURES_PER_PASS,
                                "notes": list(rigorous_notes("token", d=0.1))}
    assert WORST_PAIR_NOTE in token.labelled()["notes"]
    assert token.eps > 3 * report.paper["eps_per_pass"]["value"]
    assert any("RevIN" in a for a in report.assumptions)
    assert any("no credit" in a for a in report.assumptions)
    # the paper chain's eps_s of a given p is Theorem 1 over alpha: back to 0.1
    assert paper_equivalent_eps_s(p=report.p) == pytest.approx(0.1, rel=1e-9)
    assert paper_equivalent_eps_s(p=0.5) == pytest.approx(
        channel_epsilon(p=0.5, d=0.1, dim=16) / 0.8)


def test_inverse_calibration_round_trip():
    cal = rigorous_calibration(eps_total=0.5, delta=1e-5, unit="token", dim=4,
                               n_shots=64, d_model=16, restarts=1)
    assert 0.5 * 0.97 <= cal.achieved.eps <= 0.5
    assert cal.gamma == pytest.approx(-math.log1p(-cal.p))
    assert cal.sigma == pytest.approx(cal.p / 4.0)
    assert cal.eps_s_paper == pytest.approx(channel_epsilon(p=cal.p, d=0.1, dim=4) / 0.8)
    forward = rigorous_epsilon(p=cal.p, unit="token", dim=4, n_shots=64, restarts=1,
                               seed=7)
    assert forward.eps == pytest.approx(0.5, rel=0.03)
    assert forward.eps <= 0.5 * 1.003  # a fresh search finds nothing much worse
    # the paper would call the same p a far smaller per-pass budget (shots are not counted)
    assert cal.eps_s_paper < 0.5
    payload = cal.as_dict()
    assert payload["eps_target"]["accounting"] == "rigorous"
    assert payload["eps_s_paper"]["accounting"] == "paper"


@pytest.mark.parametrize(
    ("call", "needle"),
    [
        (lambda: rigorous_epsilon(p=0.0, unit="token"), "p (depolarizing probability) = 0"),
        (lambda: rigorous_epsilon(p=1.0, unit="token"), "p = 1 releases nothing"),
        (lambda: rigorous_epsilon(p=0.5, unit="token", delta=0.0), "delta = 0"),
        (lambda: rigorous_epsilon(p=0.5, unit="epoch"), "unit = 'epoch'"),
        (lambda: rigorous_epsilon(p=0.5, unit="token", dim=12), "power of two"),
        (lambda: composition_plan("token", n_shots=0), "n_shots = 0"),
        (lambda: composition_plan("window", seq_len=8), "shorter than one token"),
        (lambda: account(eps_s=0.1, p=0.5), "exactly one of eps_s"),
        (lambda: rigorous_calibration(eps_total=0.0), "eps_total = 0"),
        (lambda: rigorous_calibration(eps_total=1.0, unit="token-training"), "not offered"),
        (lambda: single_shot_distribution(np.ones(4), p=0.5), "unit vector"),
    ],
)
def test_bad_input_is_rejected_with_the_range(call, needle):
    with pytest.raises(InvalidInputError, match=None) as err:
        call()
    assert needle in str(err.value)
