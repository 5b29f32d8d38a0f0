"""``python -m qpriv``: the ``qpriv`` command line (:func:`qpriv.cli.main`)."""

import sys

from qpriv.cli import main

sys.exit(main())
