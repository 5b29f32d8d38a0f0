"""A run directory: its file names (:mod:`~qpriv.runs.layout`), atomic writes and checked reads
(:mod:`~qpriv.runs.files`), the out_dir and resume rules shared by every kind of run
(:mod:`~qpriv.runs.directory`) and the read-or-compute cache of a JSON answer
(:mod:`~qpriv.runs.cache`)."""
