"""qpriv: private machine learning with privacy noise calibrated through simulated quantum channels.

Two papers define the library (see ``README.md``):

* LDPT, low-dimensional feature-path privacy for transformer forecasting
  (``qpriv.forecasting``, calibrated by ``qpriv.privacy`` through ``qpriv.quantum``);
* private training of classical, Lipschitz and variational quantum classifiers.
"""

from qpriv.errors import InvalidInputError, QprivError

__version__ = "0.1.0"

__all__ = ["InvalidInputError", "QprivError", "__version__"]
