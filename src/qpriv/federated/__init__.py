"""Federated private forecasting: sites that never pool their data fit one private model.

:mod:`qpriv.federated.protocol` is the maths of one round of federated dp-linear (the plan, how
the server solves, the claim); :mod:`qpriv.federated.site` what each site runs (its data, its
update, its Flower ClientApp; NumPy and pandas only, no torch); :mod:`qpriv.federated.personal`
the personal round (one kernel per site beside the pooled one); :mod:`qpriv.federated.app` the
Flower ServerApp (SecAgg+); :mod:`qpriv.federated.processes` starts a SuperLink and one
SuperNode per site on this machine and runs the app (``qpriv federate``).

The FedAvg methods (``--method ldpt-fedavg | dp-fedavg``) train a torch model by rounds:
:mod:`qpriv.federated.fedavg` is their public plan and claims, :mod:`qpriv.federated.train_site`
the sites' ClientApp (it imports torch), :mod:`qpriv.federated.fedavg_app` the ServerApp on
Flower's Message-API FedAvg (and its DP wrapper), :mod:`qpriv.federated.fedavg_results` the run
folder and :mod:`qpriv.federated.fedavg_run` the front door.
"""
