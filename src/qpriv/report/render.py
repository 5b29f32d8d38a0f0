"""One self-contained ``report.html`` for what a command wrote: :func:`write_report_html`.

It reads the directory (:func:`~qpriv.report.contents.detect`), builds the page's sections
(:mod:`qpriv.report.forecast_run`, :mod:`qpriv.report.classifier_run`, and those of the kinds
registered in :mod:`qpriv.report.registry`) and renders them with the package's Jinja
template into one HTML page beside them: images are PNGs embedded as base64 data URIs and the
styles are inline, so the page opens offline and can be mailed as one file.

Example::

    import qpriv.experiments.report_sections  # a quickstart, a frontier, a reproduction
    path = write_report_html("runs/quickstart")   # runs/quickstart/report.html
"""

from __future__ import annotations

import re
from pathlib import Path

import jinja2
from markupsafe import Markup, escape

from qpriv.errors import ArgumentError, require_positive_int
from qpriv.report.classifier_run import classifier_run_section
from qpriv.report.contents import CLASSIFIER, RUN, Contents, detect
from qpriv.report.document import Section
from qpriv.report.forecast_run import FORECAST_WINDOWS, MAX_FORECAST_WINDOWS, forecast_run_section
from qpriv.report.registry import folder_kind, runs_kind
from qpriv.runs.files import atomic_write_text
from qpriv.runs.layout import REPORT_FILE


def _code_spans(text: str) -> Markup:
    """Escape ``text`` and turn its `backtick` spans into <code> elements."""
    return Markup(re.sub(r"`([^`]+)`", r"<code>\1</code>", str(escape(text))))


_ENVIRONMENT = jinja2.Environment(
    loader=jinja2.PackageLoader("qpriv.report", "templates"),
    autoescape=jinja2.select_autoescape(["html"]), undefined=jinja2.StrictUndefined,
    trim_blocks=True, lstrip_blocks=True)
_ENVIRONMENT.filters["code_spans"] = _code_spans


def report_sections(contents: Contents, *, data_dir: str | Path | None = None,
                    windows: int = FORECAST_WINDOWS) -> list[Section]:
    """The page's sections for what :func:`~qpriv.report.contents.detect` found: the section
    leading a folder of runs (where its registered kind has one), those of the registered
    folders, then one per run."""
    sections: list[Section] = []
    folder_of_runs = runs_kind()
    if contents.kind == folder_of_runs.kind and folder_of_runs.build is not None:
        sections.append(folder_of_runs.build(contents.runs))
    for kind, folders in contents.folders.items():
        sections += [folder_kind(kind).build(where) for where in folders]
    for run in contents.runs:
        if contents.kind == CLASSIFIER:
            sections.append(classifier_run_section(run, title=f"Classifier run {run.name}"))
        elif contents.kind == RUN:
            sections.append(forecast_run_section(run, title=f"Run {run.name}",
                                                 data_dir=data_dir, windows=windows))
        else:
            label = folder_of_runs.labels.get(run.name, run.name)
            sections.append(forecast_run_section(run, title=f"Run {label} ({run.name}/)",
                                                 data_dir=data_dir, windows=windows))
    for number, section in enumerate(sections, 1):
        section.anchor = f"section-{number}"
    return sections


def render_report(directory: str | Path, *, data_dir: str | Path | None = None,
                  windows: int = FORECAST_WINDOWS) -> str:
    """The report of ``directory`` as one self-contained HTML page (see
    :func:`~qpriv.report.contents.detect`).

    Args:
        directory: a folder a qpriv command wrote.
        data_dir: where a run's data is (None: its recorded path where that file exists,
            else ``$QPRIV_DATA_DIR`` and the user cache, where data that cannot be found is
            said so on the page instead of the forecast plots).
        windows: test windows drawn per channel, 1 to
            :data:`~qpriv.report.forecast_run.MAX_FORECAST_WINDOWS` (a run whose test split
            holds fewer draws them all, and says so).

    Raises:
        InvalidInputError: ``windows`` is outside that range; the directory holds nothing to
            report on; a result file or table in it is damaged; a run in it lacks its
            weights or has damaged ones; ``data_dir`` does not hold a run's data.
    """
    if require_positive_int("windows", windows) > MAX_FORECAST_WINDOWS:
        raise ArgumentError(f"{{windows}} = {windows!r} is outside the valid range [1, "
                            f"{MAX_FORECAST_WINDOWS}]: the forecast figure draws each test "
                            "window as a column of panels")
    contents = detect(directory)
    sections = report_sections(contents, data_dir=data_dir, windows=windows)
    return _ENVIRONMENT.get_template("report.html").render(
        title=f"qpriv report: {contents.title} ({contents.directory})",
        kind=contents.kind, sections=sections)


def write_report_html(directory: str | Path, *, data_dir: str | Path | None = None,
                      windows: int = FORECAST_WINDOWS) -> Path:
    """Write :func:`render_report`'s page to ``directory/report.html`` atomically; return its
    path. Raises as :func:`render_report` does, before anything is written."""
    page = render_report(directory, data_dir=data_dir, windows=windows)
    return atomic_write_text(Path(directory).expanduser() / REPORT_FILE, page)
