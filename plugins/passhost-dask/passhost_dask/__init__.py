"""passhost plugin: the ``dask`` executor (see :mod:`.executor`).

``passhost run models/*.onnx -O3 -o out/ --executor dask`` runs the batch on a Dask
``LocalCluster`` it starts; ``--executor dask://HOST:PORT`` (or ``DASK_SCHEDULER_ADDRESS``)
on a running scheduler. Dask itself is imported only when a batch starts.
"""
from __future__ import annotations

from passhost import hookimpl
from passhost.hookspecs import ExecutorEntry

from .executor import DaskExecutor

__all__ = ["DaskExecutor", "passhost_register_executors"]


#: the passhost plugin API versions this plugin works with (see passhost.compat)
PASSHOST_API = ">=1.0,<2"


@hookimpl
def passhost_register_executors():
    yield ExecutorEntry("dask", DaskExecutor,
                        summary="a Dask cluster: a LocalCluster of -j N workers, or dask://HOST:PORT's "
                                "(DASK_SCHEDULER_ADDRESS)")
