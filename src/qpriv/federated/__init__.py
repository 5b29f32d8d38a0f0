"""Federated private forecasting: sites that never pool their data fit one private model.

:mod:`qpriv.federated.protocol` is the maths of one round of federated dp-linear (what a site
sends, how the server solves, the claim); :mod:`qpriv.federated.app` the Flower ServerApp and
ClientApp around it (SecAgg+); :mod:`qpriv.federated.processes` starts a SuperLink and one
SuperNode per site on this machine and runs the app (``qpriv federate``).
"""
