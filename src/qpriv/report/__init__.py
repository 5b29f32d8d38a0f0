"""One self-contained ``report.html`` for what a command wrote: a run, a quickstart, a frontier
or a reproduction (``qpriv report DIR``; ``qpriv train --out`` writes one too).

The page shows the settings, every privacy claim (value, delta, kind, accounting, unit, what it
covers and its notes), the learning curves, forecasts against the actual values for a few test
windows per channel, the comparison table and the frontier plot where there is one. It reads
the result files only, so it sits above the models it loads and below the experiments, which
register their kinds of folder with it. By job:

* :mod:`qpriv.report.document`: the page's pieces (sections, tables, figures, text) and the
  table of a run's privacy claims;
* :mod:`qpriv.report.plots`: the matplotlib PNGs (learning curves, forecasts);
* :mod:`qpriv.report.result_files`: result tables and Markdown read back, checked whole;
* :mod:`qpriv.report.registry`: the kinds of folder the layers above register (the
  experiments' quickstart, frontier and reproduction, in
  :mod:`qpriv.experiments.report_sections`);
* :mod:`qpriv.report.contents`: what a directory holds, and so what its page shows;
* :mod:`qpriv.report.forecast_run` and :mod:`qpriv.report.classifier_run`: the section of one
  run of each kind;
* :mod:`qpriv.report.render`: the page rendered (a Jinja template, images as data URIs, inline
  styles: it opens offline) and written atomically.
"""
