"""One BLAS thread while models are fitted.

The modelers solve many small least-squares problems (a few columns, tens of rows, batched
over call paths and hypotheses). BLAS threads cannot split such products usefully; they
only synchronise and spin. Measured on the noise study's data (2-core machine, OpenBLAS
0.3.31): the count modeler took 2.6 s wall and 11.3 s CPU for 74 series with the default
threads and 1.7 s wall and 5.2 s CPU with one, and the time modeler the same 0.24 s wall at
half the CPU time. On a shared machine those spinning threads also take cores from the
measurements and from other work.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import ParamSpec, TypeVar

from threadpoolctl import threadpool_limits

P = ParamSpec("P")
R = TypeVar("R")


def serial_blas(function: Callable[P, R]) -> Callable[P, R]:
    """Run ``function`` with BLAS limited to one thread (restored afterwards)."""

    @functools.wraps(function)
    def limited(*args: P.args, **kwargs: P.kwargs) -> R:
        with threadpool_limits(limits=1, user_api="blas"):
            return function(*args, **kwargs)

    return limited
