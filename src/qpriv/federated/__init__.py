"""Federated private forecasting: sites that never pool their data fit one private model.

:mod:`qpriv.federated.protocol` is the maths of one round of federated dp-linear (the plan, how
the server solves, the claim); :mod:`qpriv.federated.site` what each site runs (its data, its
update, its Flower ClientApp; NumPy and pandas only, no torch); :mod:`qpriv.federated.personal`
the personal round (one kernel per site beside the pooled one); :mod:`qpriv.federated.app` the
Flower ServerApp (SecAgg+); :mod:`qpriv.federated.processes` starts a SuperLink and one
SuperNode per site on this machine and runs the app (``qpriv federate``).
"""
