"""The command line: JSON contracts, labelled privacy numbers, one-line errors with exit code 2."""

import json
import os
import re

import pytest

from qpriv.cli import main
from qpriv.cli.train_classifier import analytic_bound_line
from qpriv.privacy.claims import PrivacyClaim


def _last_json(capsys) -> dict:
    out = capsys.readouterr().out.strip().splitlines()
    return json.loads(out[-1])


def test_calibrate_json_reproduces_the_issue_numbers(capsys):
    assert main(["calibrate", "--eps", "0.1", "5", "--json"]) == 0
    payload = _last_json(capsys)
    first, last = payload["rows"]
    assert round(first["p"], 4) == 0.9505
    assert round(first["gamma"], 3) == 3.006
    assert round(first["sigma"], 4) == 0.0840
    assert round(first["eps_me"], 4) == 0.0217
    assert round(first["fidelity"], 3) == 0.109 and first["fidelity_paper"] == 0.617
    assert first["eps_basic"] == pytest.approx(2.0)
    assert round(first["eps_advanced"], 2) == 2.56
    assert last["eps_s"] == 5.0 and last["eps_me"] is None
    assert any("eps_me undefined" in note and "eps_s = 5" in note for note in payload["notes"])
    assert "accounting=paper" in payload["labels"]["eps_s"]


def test_calibrate_table_labels_every_epsilon(capsys):
    assert main(["calibrate", "--eps", "0.1"]) == 0
    out = capsys.readouterr().out
    assert "local eps-QDP per pass, accounting=paper" in out
    assert "composed, accounting=paper" in out
    assert "0.9505" in out and "0.6170" in out


def test_methods_lists_every_method_with_its_claim(capsys):
    from qpriv.forecasting.methods import METHODS

    assert main(["methods"]) == 0
    out = capsys.readouterr().out
    table = out.split("\n\nRecommended:")[0]
    rows = [line for line in table.splitlines()[2:] if not line.startswith(" ")]  # not wrapped
    assert [line.split()[0] for line in rows] == list(METHODS)
    assert "global (eps, delta)-DP" in out and "local eps-QDP per pass" in out
    # the recommended forecaster is marked, and named as train's default (issue 42)
    assert "dp-linear (recommended)" in table
    assert "Recommended: dp-linear, the default of 'qpriv train'" in out


@pytest.mark.skipif(not os.environ.get("QPRIV_DATA_DIR"), reason="needs QPRIV_DATA_DIR (ETT)")
def test_train_without_a_method_fits_the_recommended_private_forecaster(capsys):
    """``qpriv train`` defaulted to ldpt with 20 epochs; the recommended private forecaster
    is the default, and its claim says so (issue 42)."""
    assert main(["train", "--max-eval-windows", "64", "--json", "--quiet"]) == 0
    result = _last_json(capsys)
    assert result["method"] == "dp-linear"
    assert result["eps"]["kind"] == "global (eps, delta)-DP" and result["eps"]["unit"] == "record"
    assert any("recommended private forecaster" in note for note in result["eps"]["notes"])


def _labelled(entry: dict) -> str:
    return PrivacyClaim.from_json(entry).label()


def test_every_printed_epsilon_carries_its_delta():
    assert _labelled({"value": 2.5605, "kind": "composed", "accounting": "paper",
                      "delta_prime": 1e-6}) == "2.561 (composed, delta'=1e-06, accounting=paper)"
    assert _labelled({"value": 0.9999, "kind": "global (eps, delta)-DP", "delta": 1e-6,
                      "accounting": "rigorous"}) == (
        "0.9999 (global (eps, delta)-DP, delta=1e-06, accounting=rigorous)")
    assert _labelled({"value": 2.0, "kind": "composed", "accounting": "paper",
                      "delta_total": 2e-5}) == "2 (composed, total delta=2e-05, accounting=paper)"
    assert _labelled({"value": 0.1, "kind": "local eps-QDP per pass", "accounting": "paper"}
                     ) == "0.1 (local eps-QDP per pass, accounting=paper)"


def test_audit_channel_labels_its_epsilon(capsys):
    assert main(["audit", "channel", "--eps", "0.1", "--pairs", "50"]) == 0
    out = " ".join(capsys.readouterr().out.split())  # a long line is wrapped at 100 columns
    assert "0.080000 (local eps-QDP of the channel alone, per pass, accounting=paper)" in out


def test_audit_channel_json(capsys):
    assert main(["audit", "channel", "--eps", "0.1", "--pairs", "300", "--json"]) == 0
    payload = _last_json(capsys)
    assert 0 < payload["dmax_max"] <= payload["eps_ch_bound"]
    assert payload["eps_ch_bound"] == pytest.approx(0.08)
    assert payload["pairs"] >= 300
    assert payload["accounting"] == "paper"
    bound, exact = payload["claims"]  # each epsilon typed, with its unit and what it covers
    assert (bound["value"], bound["accounting"], bound["unit"]) == (
        payload["eps_ch_bound"], "paper", "token")
    assert (exact["accounting"], exact["unit"]) == ("rigorous", "token")
    assert exact["value"] == max(payload["dmax_closed_form"], payload["dmax_max"])
    assert exact["covers"] == bound["covers"] and "before the measurement" in exact["covers"]


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["calibrate", "--eps", "0"], "error: --eps = 0 is outside"),
        (["calibrate", "--eps", "0.1", "--dim", "12"], "power of two"),
        (["calibrate", "--delta-prime", "2"], "error: --delta-prime = 2 is outside"),
        (["calibrate", "--d", "3"], "(0, 2]"),
        (["audit", "channel", "--eps", "-1"], "error: --eps = -1 is outside"),
        (["audit", "channel", "--pairs", "0"], "positive integer"),
        (["train", "--dataset", "ETTh3"], "unknown dataset"),
        (["train", "--method", "nope"], "unknown method"),
        (["train", "--method", "ldpt", "--accounting", "rigorous", "--eps-total", "0"],
         "error: --eps-total = 0 is outside the valid range (0, inf)"),
        (["calibrate", "--eps", "1000"], "--eps = 1000 is outside the valid range (0, 700]"),
        (["train", "--method", "classical", "--eps", "0.1"], "takes no --eps; leave it out"),
        (["train", "--method", "ldpt", "--accounting", "rigorous", "--eps-total", "8",
          "--eps", "0.5"], "takes --eps-total only"),
        (["train", "--data-dir", "/no/such/dir"], "'/no/such/dir' does not exist"),
        (["train", "--out", ""], "an empty path"),
        # a library range check names the flag of the command that ran, not the keyword
        (["train-classifier", "--preclip-noise", "-1"],
         "error: --preclip-noise = -1 is outside the valid range [0, inf)"),
        # the flag, not the library's keyword or a description of it
        (["calibrate", "--dim", "3"], "error: --dim = 3 is not a power of two >= 2"),
        (["calibrate", "--d", "5"], "error: --d = 5 is outside the valid range (0, 2]"),
        (["calibrate", "--alpha", "2"], "error: --alpha = 2 is outside the valid range (0, 1]"),
        (["frontier", "--methods", "ridge", "ridge"], "error: --methods ridge given more than"),
        (["train", "--method", "classical", "--delta", "1e-5"],
         "error: --delta = 1e-05 cannot be set for method 'classical'"),
        (["train-classifier", "--optimizer", "foo"],
         "error: --optimizer = 'foo' is not one of ('adam', 'sgd')"),
        (["train-classifier", "--task", "{x}"], "error: --task = '{x}' is not one of"),
        (["reproduce", "table1", "--quick", "--budget", "full"], "ask for two budgets"),
        # --list ran nothing and said nothing of the run flags it ignored
        (["reproduce", "--list", "--out", "somewhere"],
         "--list only lists the experiments and their cost; --out sets a run: leave them out"),
        (["reproduce", "table3", "--list", "--quick", "--seeds", "1"],
         "--quick, --seeds set a run: leave them out, or drop --list to run"),
        (["train", "--method", "dpsgd", "--eps", "1", "--delta", "1e-5"],
         "cannot be set for method 'dpsgd': it runs at the paper's delta = 1e-06"),
        (["train", "--horizon", "0"], "positive integer"),
        (["train", "--csv", "x.csv", "--data-dir", "."], "--csv names its file itself"),
        # a negative seed reached NumPy's seeding as a traceback
        *[([*command, "--seed", "-1"], "expected a seed (an integer in [0, 2**63)), got -1")
          for command in (["account"], ["audit", "channel"], ["train"], ["quickstart"],
                          ["attack", "mia", "x"], ["audit", "sidechannel"])],
        (["reproduce", "table3", "--seeds", "2024", "-5"], "got -5"),
        (["train", "--method", "ridge", "--accounting", "rigorous", "--eps-total", "1"],
         "method 'ridge' has none: leave --accounting rigorous and --eps-total out"),
        (["train", "--method", "dp-linear", "--accounting", "rigorous", "--eps-total", "1"],
         "leave --accounting rigorous and --eps-total out and give its budget as --eps"),
        (["audit", "sidechannel", "--method", "classical", "--eps", "0.5"],
         "method 'classical' adds no noise and takes no --eps; leave it out"),
        (["audit", "sidechannel", "--method", "ldpt", "--windows", "100000000"],
         "--windows = 100000000 is above 4096"),
    ],
)
def test_bad_input_is_one_line_and_exit_code_2(capsys, argv, needle):
    assert main(argv) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("qpriv: error:")
    assert needle in lines[0]
    assert "Traceback" not in captured.err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        # the value is named by the option typed, not by the library's keyword eps_total
        (["account", "--target-eps", "0"], "--target-eps = 0 is outside the valid range (0, "
         "inf); a privacy budget must be > 0"),
        (["train", "--accounting", "rigorous", "--eps-total", "0", "--out", "run"],
         "--eps-total = 0 is outside the valid range (0, inf); a privacy budget must be > 0"),
        # dp-linear's fit said "clip", after writing run/config.json
        (["train", "--method", "dp-linear", "--clip-range", "inf", "--out", "run"],
         "--clip-range = inf is not a finite number > 0; give the value range R in z-scored "
         "units, e.g. 2"),
        (["train-classifier", "--lr-grid", "0.1", "-1", "--out", "run"],
         "--lr-grid = -1 is outside the valid range (0, inf)"),
        # accepted and ignored: without --out there is no checkpoint to keep
        (["train", "--keep-checkpoints"],
         "--keep-checkpoints keeps a finished run's last checkpoint in --out, and without "
         "--out nothing is written: give --out DIR, or drop --keep-checkpoints"),
        # clamped to the data set: the run took every example at each step
        (["train-classifier", "--batch", "100000000", "--out", "run"],
         "--batch = 100000000 is outside the valid range [1, 1638]: task 'synthetic' has 1638 "
         "training examples; give --batch 1638 or less"),
        # a run started afresh, as if --resume were not given
        (["train", "--out", "run", "--resume"],
         "no run to resume at run; drop --resume to start one"),
        (["train-classifier", "--out", "run", "--resume"],
         "no run to resume at run; drop --resume to start one"),
        # named the library's out_dir, and the command, rather than the flags
        (["train", "--method", "ridge", "--resume"],
         "--resume needs --out: the folder of the run to continue"),
        (["train-classifier", "--resume"],
         "--resume needs --out: the folder of the run to continue"),
        # the seeds were accepted and nothing used them
        (["reproduce", "table1", "--seeds", "2024", "--budget", "tiny", "--out", "run"],
         "experiment 'table1' trains nothing and takes no --seeds; leave them out"),
        # torch starts every thread: 100,000 crashed the process, leaving a config.json behind
        (["train", "--threads", "100000", "--out", "run"],
         "qpriv train: argument --threads: expected at most 1024 threads (torch starts every "
         "one), got 100000; give at most the machine's cores (see 'qpriv train --help')"),
        # the top parser's own errors were prefixed twice ("qpriv: error: qpriv: ...") and a
        # missing command was "required: command" (issue 42, D10): list the commands
        ([], "qpriv needs a command, one of: calibrate, audit, attack, train, forecast, "
             "methods, quickstart, train-classifier, reproduce, frontier, federate, account, "
             "report (see 'qpriv --help')"),
        (["audit"], "qpriv audit needs a command, one of: channel, run, sidechannel, privacy (see "
                    "'qpriv audit --help')"),
        (["methods", "--bogus"], "unrecognized arguments: --bogus (see 'qpriv --help')"),
        (["train-classifier", "--threads", "5000", "--out", "run"],
         "qpriv train-classifier: argument --threads: expected at most 1024 threads (torch "
         "starts every one), got 5000; give at most the machine's cores (see 'qpriv "
         "train-classifier --help')"),
    ],
)
def test_a_refused_value_or_combination_is_one_line_and_writes_nothing(
        capsys, tmp_path, monkeypatch, argv, message):
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert out == "" and err == f"qpriv: error: {message}\n"
    assert list(tmp_path.iterdir()) == []


def test_resume_in_an_empty_folder_is_refused_and_leaves_it_empty(capsys, tmp_path):
    empty = tmp_path / "run"
    empty.mkdir()
    assert main(["train", "--out", str(empty), "--resume"]) == 2
    assert capsys.readouterr().err == (f"qpriv: error: no run to resume at {empty}; drop "
                                       "--resume to start one\n")
    assert list(empty.iterdir()) == []


@pytest.mark.skipif(not os.environ.get("QPRIV_DATA_DIR"), reason="needs QPRIV_DATA_DIR (ETT)")
def test_train_json_has_the_contract_keys(capsys, tmp_path):
    argv = ["train", "--method", "ldpt", "--eps", "0.5", "--epochs", "1", "--quiet", "--json",
            "--max-train-windows", "16", "--max-eval-windows", "8", "--out", str(tmp_path / "r")]
    assert main(argv) == 0
    result = _last_json(capsys)
    assert result["report"] == str(tmp_path / "r" / "report.html")
    assert (tmp_path / "r" / "report.html").is_file()
    for key in ("mse", "mae", "val_loss", "best_epoch", "epochs", "seconds_per_epoch", "params",
                "method", "eps_per_pass", "p", "gamma", "sigma", "eps_basic", "eps_advanced"):
        assert key in result, key
    assert result["eps_per_pass"]["accounting"] == "paper"
    assert result["eps_advanced"]["kind"] == "composed"
    assert (tmp_path / "r" / "result.json").is_file()
    # the same --out without --resume is refused, in the command line's words, and nothing is
    # overwritten
    assert main(argv) == 2
    assert capsys.readouterr().err == (
        f"qpriv: error: --out {tmp_path / 'r'} already holds a finished run; add --resume to "
        "continue or read it, or choose another --out\n")
    # the summary gives an epoch's time in its two parts; it said "s/epoch" for the training
    # part alone, beside epoch lines (training and validation) three times as long (issue 42)
    history = json.loads((tmp_path / "r" / "result.json").read_text())["history"]
    assert main([word for word in argv if word != "--json"] + ["--resume"]) == 0
    summary = " ".join(capsys.readouterr().out.split())
    assert (f"{history[0]['train_seconds']:.1f} s training + {history[0]['val_seconds']:.1f} s "
            "validation per epoch") in summary


@pytest.mark.skipif(not os.environ.get("QPRIV_DATA_DIR"), reason="needs QPRIV_DATA_DIR (ETT)")
def test_quickstart_tiny_budget(capsys, tmp_path):
    argv = ["quickstart", "--epochs", "1", "--max-train-windows", "16", "--max-eval-windows",
            "8", "--eval-passes", "2", "--frontier-budget", "tiny", "--out", str(tmp_path)]
    # first, as a person sees it (stderr is no terminal here, as in a CI log: lines, no bars)
    assert main(argv) == 0
    captured = capsys.readouterr()
    out, err = captured.out.splitlines(), captured.err.splitlines()
    # the plan comes first: every part, its rough time, and the total
    flat = " ".join(captured.out.split())
    parts = ["plan (5 parts, rough time",
             "[1/5 classical] train 1 epoch on 16 training windows, test 2 passes on 8 windows ~",
             "[4/5 channel audit] exact channel audit at eps_s = 0.1",
             "[5/5 frontier] privacy-utility frontier at the record unit, eps 0.1, 1, tiny "
             "budget: 17 cells ~", "total: about "]
    at = [flat.find(part) for part in parts]
    assert -1 not in at and at == sorted(at) and flat.find("[1/5 classical] trained") > at[-1]
    # it fits a terminal of 100 columns (paths aside): a table and notes ran to 489 (issue 41)
    assert max(len(line) for line in out if str(tmp_path) not in line) <= 100
    # every progress line says whose it is, and the job's progress follows each part
    epochs = [line for line in err if "epoch 1/1:" in line]
    assert [line.split("] epoch")[0] + "]" for line in epochs[:3]] == [
        "[1/5 classical]", "[2/5 LDPT eps=1.0]", "[3/5 LDPT eps=0.1]"]
    assert all("val loss" in line for line in epochs)
    # DP-SGD at the record unit: its own cell key (issue 46)
    assert any(line.startswith("[5/5 frontier] [13/17 ETTh1-H24-dpsgd-eps0.1-unitrecord-s2024] "
                               "epoch 1/1") for line in err)
    assert any(line.startswith("[4/5 channel audit] exact channel audit") for line in err)
    done = [line for line in err if " done; the job: " in line]
    assert len(done) == 5 and done[-1].startswith("[5/5 frontier] done; the job: 100 % of the "
                                                  "plan done in ")
    assert not any("\r" in line for line in err)
    trained = {line.split("]")[0] + "]": line for line in out
               if line.startswith("[") and " trained in " in line}
    assert list(trained) == ["[1/5 classical]", "[2/5 LDPT eps=1.0]", "[3/5 LDPT eps=0.1]"]
    # where everything went, and how much
    assert any(line.startswith("done in ") and f"under {tmp_path}" in line for line in out)
    assert f"  {tmp_path / 'classical'}  run classical" in out
    assert any(line.startswith(f"  {tmp_path / 'frontier' / 'ETTh1-H24-record' / 'tiny'}  "
                               "frontier: frontier.md, frontier.csv, frontier.png")
               for line in out)

    assert main([*argv, "--json"]) == 0
    payload = _last_json(capsys)
    labels = [row["label"] for row in payload["rows"]]
    assert labels == ["classical", "LDPT eps=1.0", "LDPT eps=0.1"]
    assert payload["reused"] == labels  # the second call trains nothing
    assert payload["rows"][0]["delta_mse_pct"] is None
    # the table reports the mean over the evaluation passes, and the change against classical
    stored = sorted(json.loads(path.read_text())["mse_mean"]
                    for path in tmp_path.glob("*/result.json"))
    assert sorted(row["mse"] for row in payload["rows"]) == stored
    base = payload["rows"][0]["mse"]
    for row in payload["rows"][1:]:
        assert row["delta_mse_pct"] == pytest.approx(100 * (row["mse"] / base - 1))
    # each run's line gave that same mean, not one pass's MSE
    for row in payload["rows"]:
        line = next(v for k, v in trained.items() if k.endswith(f"{row['label']}]"))
        assert f"test MSE {row['mse']:.4f} (mean of 2 passes)" in line
    assert payload["rows"][2]["eps_per_pass"]["value"] == 0.1
    assert payload["audit"]["passed"]
    # it closes with the frontier at the record unit: dp-linear against the public floor
    frontier = {(row["method"], row["eps"]): row for row in payload["frontier"]["rows"]}
    assert frontier[("dp-linear", 1.0)]["unit"] == "record"
    assert frontier[("dpsgd", 1.0)]["role"] == "covers"  # record-level DP-SGD (issue 46)
    assert ("public", None) in frontier
    assert (tmp_path / "frontier").is_dir()
    assert payload["report"] == str(tmp_path / "report.html")
    assert (tmp_path / "report.html").is_file()
    # a finished run keeps its best weights, not its last checkpoint
    assert sorted(p.name for p in (tmp_path / "classical").iterdir()) == [
        "best.pt", "config.json", "result.json"]
    # a third call says which runs it reused, from where, and when they were trained
    assert main(argv) == 0
    again = capsys.readouterr().out.splitlines()
    assert "  [1/5 classical] reused: read back its finished run  ~1 s" in again
    assert "17 cells, 17 reused" in " ".join(" ".join(again).split())
    reused = [line for line in again if line.startswith("reused: ")]
    assert len(reused) == 3 and not any(" trained in " in line and line.startswith("[")
                                        for line in again)
    assert reused[0].startswith(f"reused: classical (finished run in {tmp_path / 'classical'}, "
                                "trained in ")
    assert f"test MSE {payload['rows'][0]['mse']:.4f} (mean of 2 passes)" in reused[0]
    assert f"  {tmp_path / 'classical'}  run classical (reused)" in again


def test_train_classifier_json(capsys):
    argv = ["train-classifier", "--task", "synthetic", "--model", "quantum", "--clip", "1.5",
            "--batch", "64", "--eps", "10", "--epochs", "1", "--json", "--threads", "1"]
    assert main(argv) == 0
    result = _last_json(capsys)
    assert 0.0 <= result["accuracy"] <= 1.0
    assert result["eps"]["kind"] == "global (eps, delta)-DP"
    assert result["eps"]["accounting"] == "rigorous"
    assert result["eps"]["value"] <= 10.0 + 1e-9
    for key in ("clip_probability", "alignment", "clipping_bias_norm"):
        assert key in result["final_diagnostics"]


def test_train_classifier_clipless_lipschitz(capsys):
    argv = ["train-classifier", "--task", "synthetic", "--model", "lipschitz", "--clip",
            "analytic", "--tau", "1", "--batch", "128", "--eps", "10", "--epochs", "1",
            "--threads", "1"]
    assert main([*argv, "--json"]) == 0
    result = _last_json(capsys)
    bound = result["gradient_bound"]
    assert result["final_diagnostics"]["clip_probability"] == 0.0
    assert result["clip"]["value"] == bound["per_example_norm_bound"] > 0
    assert 0 < bound["max_example_norm_over_bound"] <= 1.0
    assert result["eps"]["value"] <= 10.0 + 1e-9 and 0.0 <= result["accuracy"] <= 1.0
    assert main([*argv, "--quiet"]) == 0
    out = capsys.readouterr().out
    assert f"analytic per-example gradient bound Delta = {bound['per_example_norm_bound']:.4g}" \
        in out and "clip probability: 0" in out
    assert bound["max_epoch_clip_fraction"] == 0.0 and "nothing was clipped" in out


@pytest.mark.parametrize(("clipped", "ratio"), [(0.01, 0.9), (0.0, 1.2)])
def test_a_clipless_run_whose_guard_clipped_is_not_called_unclipped(clipped, ratio):
    line = analytic_bound_line({"per_example_norm_bound": 20.9, "max_epoch_clip_fraction":
                                clipped, "max_example_norm_over_bound": ratio})
    assert "BOUND NOT MET" in line and "nothing was clipped" not in line
    assert "nothing was clipped" in analytic_bound_line(
        {"per_example_norm_bound": 20.9, "max_epoch_clip_fraction": 0.0,
         "max_example_norm_over_bound": 0.9})


def test_an_out_dir_below_a_file_is_one_line(capsys, tmp_path):
    blocker = tmp_path / "afile"
    blocker.write_text("not a directory")
    argv = ["train-classifier", "--task", "synthetic", "--model", "mlp", "--clip", "1",
            "--epochs", "1", "--threads", "1", "--quiet", "--out", str(blocker / "run")]
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert out == ""  # refused before the model is built
    [line] = err.strip().splitlines()
    assert line.endswith(f"out_dir {blocker / 'run'} lies inside {blocker}, which exists and "
                         "is not a directory; name a folder")
    assert not (blocker.parent / "run").exists()


def test_train_classifier_lr_grid_resumes_without_tuning_again(capsys, tmp_path, monkeypatch):
    from qpriv.classification import tuning

    out = tmp_path / "run"
    argv = ["train-classifier", "--task", "synthetic", "--model", "mlp", "--clip", "1",
            "--batch", "128", "--epochs", "1", "--threads", "1", "--lr-grid", "0.01", "0.1",
            "--json", "--out", str(out)]
    assert main(argv) == 0
    first = _last_json(capsys)
    stored = json.loads((out / "result.json").read_text())
    assert stored["lr_tuning"] == first["lr_tuning"] == json.loads(
        (out / "lr_tuning.json").read_text())  # one write, with how the rate was chosen
    monkeypatch.setattr(tuning, "train_classifier", lambda **kw: pytest.fail("tuned again"))
    assert main([*argv, "--resume"]) == 0
    assert _last_json(capsys) == stored
    assert main(argv) == 2  # without --resume a finished run is not overwritten
    assert "already holds a finished run" in capsys.readouterr().err
    assert main([*argv[:-4], "0.01", "0.3", "--json", "--out", str(out), "--resume"]) == 2
    assert "tuned over another --lr-grid" in capsys.readouterr().err


def test_ctrl_c_says_how_to_go_on(capsys, monkeypatch, tmp_path):
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr("qpriv.classification.estimators.run_request", interrupted)
    argv = ["train-classifier", "--task", "synthetic", "--model", "mlp", "--clip", "1",
            "--out", str(tmp_path / "run")]
    assert main(argv) == 130
    err = capsys.readouterr().err.strip()
    assert err == (f"qpriv: interrupted; rerun with --out {tmp_path / 'run'} --resume to "
                   "continue from the last finished epoch")


@pytest.mark.usefixtures("nan_classifier_weights")
def test_train_classifier_reports_divergence(capsys):
    argv = ["train-classifier", "--task", "synthetic", "--model", "mlp", "--clip", "1",
            "--batch", "128", "--epochs", "2", "--threads", "1", "--quiet"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "test accuracy 0.0000" in out
    assert "DIVERGED at epoch 1 (training loss not finite)" in out


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["train-classifier", "--model", "foo"], "model = 'foo'"),
        (["train-classifier", "--delta", "1e-5"], "--delta is the delta of --eps"),
        (["train-classifier", "--model", "mlp", "--tau", "2", "--shots", "10"],
         "--tau, --shots set the quantum models; model 'mlp' takes none"),
        (["train-classifier", "--clip", "abc"], "'analytic' or 'none'"),
        (["train-classifier", "--task", "images"], "task"),
        (["train-classifier", "--model", "lipschitz", "--input-bound", "4"],
         "--bias-bound set the bound of --clip analytic; a clip of 1.5 takes neither"),
        (["train-classifier", "--model", "mlp", "--clip", "analytic"],
         "needs model 'lipschitz'"),
        (["train-classifier", "--model", "mlp", "--clip", "none", "--eps", "1"],
         "a private run (--eps given) needs a clipping threshold: give --clip a number C > 0"),
        (["train-classifier", "--model", "lipschitz", "--clip", "analytic",
          "--preclip-noise", "0.5"], "--preclip-noise = 0.5 would break the bound of --clip "
         "analytic"),
    ],
)
def test_train_classifier_bad_input(capsys, argv, needle):
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and needle in err[0]


@pytest.mark.parametrize("command", [[], ["calibrate"], ["audit", "channel"], ["audit", "run"],
                                     ["audit", "sidechannel"], ["attack", "mia"], ["train"],
                                     ["forecast"], ["methods"], ["quickstart"],
                                     ["train-classifier"], ["reproduce"], ["frontier"],
                                     ["account"], ["report"]])
def test_help_is_plain_text_with_defaults(capsys, command):
    with pytest.raises(SystemExit) as exit_:
        main([*command, "--help"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    assert "``" not in out
    assert out.count("\n") > 3 and (not command or "(default" in out or command == ["methods"])


def test_help_shows_the_library_defaults(capsys):
    with pytest.raises(SystemExit):
        main(["train", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--horizon HORIZON forecast length H (default: 24)" in text
    assert "(default: 0.1); methods without noise take none" in text


def test_a_csv_written_another_way_trains_and_forecasts_with_its_format(capsys, tmp_path):
    """Issue 42, item 7: --sep, --date-column and --date-format; the run records them and
    reads its file (and a forecast's) the same way."""
    import numpy as np
    import pandas as pd

    steps = np.arange(800)
    frame = pd.DataFrame({
        "Zeit": pd.date_range("2000-01-01", periods=800, freq="D").strftime("%d.%m.%Y"),
        "a": np.sin(2 * np.pi * steps / 7), "b": np.cos(2 * np.pi * steps / 7) + steps / 800})
    csv = tmp_path / "semi.csv"
    frame.to_csv(csv, sep=";", index=False)
    out = tmp_path / "run"
    assert main(["train", "--csv", str(csv), "--sep", ";", "--date-column", "Zeit",
                 "--date-format", "%d.%m.%Y", "--seq-len", "28", "--horizon", "7",
                 "--eps", "1", "--out", str(out), "--quiet", "--json"]) == 0
    assert _last_json(capsys)["method"] == "dp-linear"
    config = json.loads((out / "config.json").read_text())
    assert config["csv_format"] == {"date_column": "Zeit", "date_format": "%d.%m.%Y",
                                    "sep": ";"}
    assert main(["forecast", str(out), "--csv", str(csv), "--json"]) == 0
    forecast = _last_json(capsys)
    assert forecast["window_end"].startswith("2002-03-10")  # the file's last date, day first
    assert main(["train", "--sep", ";", "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["qpriv: error: --sep says how a --csv file is written; a named dataset's "
                   "file has its own format: give --csv PATH, or leave them out"]


@pytest.mark.parametrize("argv", [["--version"], ["--help"], ["--bogus"], ["no-such-command"],
                                  ["train", "--bogus"], ["forecast", "--bogus"],
                                  ["methods", "--bogus"], ["calibrate", "--bogus"],
                                  ["attack", "mia", "--bogus"]])
def test_argument_errors_and_version_import_no_numerical_library(argv):
    """`qpriv --version` took 3.5 s and every argument error as long: the command line imported
    torch, QuTiP, SciPy and Ray before parsing (issue 42, item 6; benchmarks/startup.py times
    it). A fresh process, since this one has them all loaded already."""
    import subprocess
    import sys

    heavy = ("torch", "qutip", "scipy", "ray", "matplotlib", "opacus", "dp_accounting",
             "pandas", "sklearn")
    code = ("import sys\nfrom qpriv.cli import main\ntry:\n    code = main(sys.argv[1:])\n"
            "except SystemExit as stop:\n    code = stop.code\n"
            f"print(sorted(name for name in {heavy!r} if name in sys.modules), code)")
    done = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True,
                          check=True)
    loaded, code = done.stdout.strip().splitlines()[-1].rsplit(" ", 1)
    assert loaded == "[]" and int(code) in (0, 2)


def test_python_dash_m_qpriv_is_the_command_line():
    """`python -m qpriv` (issue 41, item 5)."""
    import importlib.metadata
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "qpriv", "--version"], capture_output=True,
                          text=True, check=True)
    assert done.stdout.strip() == f"qpriv {importlib.metadata.version('qpriv')}"
    failed = subprocess.run([sys.executable, "-m", "qpriv", "train", "--bogus"],
                            capture_output=True, text=True)
    assert failed.returncode == 2 and failed.stderr.startswith("qpriv: error: unrecognized")


def test_version_prints_the_installed_version(capsys):
    import importlib.metadata

    with pytest.raises(SystemExit) as stop:
        main(["--version"])
    assert stop.value.code == 0
    assert capsys.readouterr().out.strip() == f"qpriv {importlib.metadata.version('qpriv')}"


def test_tables_fit_100_columns_with_text_left_and_numbers_right(capsys):
    assert main(["methods"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert max(len(line) for line in lines) <= 100
    assert lines[0].startswith("method ") and lines[2].startswith("classical ")


def test_messages_name_commands_not_library_functions(capsys, tmp_path):
    """A CLI user was told of ``run_forecast(out_dir=DIR)`` and ``run_forecast(method=...)``,
    functions ``qpriv`` does not export (issue 42, D6)."""
    assert main(["audit", "run", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"qpriv: error: {tmp_path} is not a qpriv run: it has no config.json; "
                          "pass the directory given to `qpriv train --out DIR`")
    assert "run_forecast" not in err
    assert main(["audit", "sidechannel", "--method", "public"]) == 0  # not applicable (item 3)
    out = capsys.readouterr().out
    assert "not applicable" in out and "run_forecast" not in out


def test_a_path_that_cannot_be_used_is_named_without_flags_the_command_lacks(capsys,
                                                                            monkeypatch):
    """``report`` into a read-only folder named --out, --csv and --data-dir, none of which
    ``report`` has (issue 42, D7)."""
    from qpriv.cli import report

    def refuse(args):
        raise PermissionError(13, "Permission denied", "/read-only/report.html")

    monkeypatch.setattr(report, "run", refuse)
    assert main(["report", "somewhere"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("qpriv: error: cannot use /read-only/report.html: Permission denied; ")
    assert "--csv" not in err and "--data-dir" not in err


def _disk_full(*_args, **_kwargs):
    raise OSError(28, "No space left on device")  # as write or fsync raise it: no file named


@pytest.mark.skipif(not os.environ.get("QPRIV_DATA_DIR"), reason="needs QPRIV_DATA_DIR (ETT)")
def test_a_full_disk_is_one_line_naming_the_file_and_leaves_nothing_half_written(
        capsys, tmp_path, monkeypatch):
    """A full disk during ``train --out`` was exit 1 and a traceback (issue 42, D13)."""
    from qpriv.runs import files

    monkeypatch.setattr(files.os, "fsync", _disk_full)
    out = tmp_path / "run"
    assert main(["train", "--method", "public", "--out", str(out), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"qpriv: error: cannot use {out / 'config.json'}: No space left on "
                          "device; free some space there, or write elsewhere")
    assert len(err.splitlines()) == 1
    assert not [p for p in out.rglob("*") if p.is_file()]  # no temporary twin left behind


@pytest.mark.skipif(not os.environ.get("QPRIV_DATA_DIR"), reason="needs QPRIV_DATA_DIR (ETT)")
def test_a_report_that_cannot_be_written_still_prints_the_finished_run(capsys, tmp_path,
                                                                      monkeypatch):
    """The result was written but its summary and claims never printed (issue 42, D13)."""
    def full(run_dir, **_kwargs):
        raise OSError(28, "No space left on device", str(run_dir) + "/report.html")

    monkeypatch.setattr("qpriv.report.render.write_report_html", full)
    out = tmp_path / "run"
    assert main(["train", "--method", "dp-linear", "--eps", "1", "--out", str(out),
                 "--quiet"]) == 2
    printed, err = capsys.readouterr()
    assert "test MSE" in printed and "global (eps, delta)-DP" in printed
    assert (out / "result.json").is_file()
    assert err.startswith(f"qpriv: error: cannot use {out}/report.html: No space left")


@pytest.mark.skipif(not os.environ.get("QPRIV_DATA_DIR"), reason="needs QPRIV_DATA_DIR (ETT)")
def test_train_prints_lines_of_at_most_100_characters(capsys):
    """Seven notes of up to 396 characters were printed on single lines (issue 42)."""
    assert main(["train", "--eps", "1", "--max-eval-windows", "64", "--quiet"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert max(len(line) for line in lines) <= 100
    assert lines[0].startswith("dp-linear on ETTh1, H = 24: test MSE ")
    assert sum(line.startswith("  note: ") for line in lines) >= 5


@pytest.fixture(scope="module")
def linear_run(tmp_path_factory):
    """A dp-linear run on a generated hourly series (seconds), and its CSV."""
    import numpy as np
    import pandas as pd

    folder = tmp_path_factory.mktemp("widths")
    steps = np.arange(2400)
    pd.DataFrame({"date": pd.date_range("2022-01-01", periods=2400, freq="h"),
                  **{f"channel_{c}": np.sin(2 * np.pi * steps / 24 + c) + steps / 2400
                     for c in range(9)}}).to_csv(folder / "wide.csv", index=False)
    assert main(["train", "--csv", str(folder / "wide.csv"), "--eps", "1", "--seq-len", "168",
                 "--out", str(folder / "run"), "--quiet"]) == 0
    return folder / "run", folder / "wide.csv"


@pytest.mark.parametrize("argv", [
    ["calibrate"], ["methods"], ["reproduce", "--list"],
    ["account", "--eps", "0.1", "--shots", "64", "--lower-bound-trials", "0"],
    ["forecast", "{run}", "--csv", "{csv}"], ["attack", "mia", "{run}", "--n", "32"],
    ["audit", "run", "{run}"],
])
def test_every_table_fits_100_columns(capsys, linear_run, argv):
    """A table the command line prints fits a terminal of 100 columns: the account table ran to
    109, the quickstart's to 250 (issue 41, item 3). A table's width is its rule of dashes."""
    run, csv = linear_run
    assert main([word.format(run=run, csv=csv) for word in argv]) == 0
    rules = [line for line in capsys.readouterr().out.splitlines()
             if re.fullmatch(r"-+( +-+)+ *", line)]
    assert rules and max(len(rule.rstrip()) for rule in rules) <= 100


@pytest.mark.parametrize("argv", [
    ["calibrate"], ["audit", "channel", "--eps", "0.1", "--pairs", "20"],
    ["forecast", "{run}", "--csv", "{csv}"], ["attack", "mia", "{run}", "--n", "32"],
])
def test_every_line_of_prose_fits_100_columns(capsys, linear_run, argv):
    """The sentences around the tables (headings, claims, notes, protocols) are wrapped too: the
    channel audit's claims ran to 230 columns, the attack's protocol to 150 (issue 41, item 3).
    A path the line names may run past the width; nothing else does."""
    run, csv = linear_run
    assert main([word.format(run=run, csv=csv) for word in argv]) in (0, 1)
    lines = [line.replace(str(run), "RUN").replace(str(csv), "CSV")
             for line in capsys.readouterr().out.splitlines()]
    assert max(len(line) for line in lines) <= 100, max(lines, key=len)
