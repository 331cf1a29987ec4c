"""Measuring real programs: the ``perfcast build`` compiler wrapper (:mod:`.build`), the C
call-path runtime it links (``runtime/``, built by :mod:`.toolchain`), and the reader that
turns the runtime's per-rank profiles into an Experiment (:mod:`.profiles`). See
``README.md`` in this directory.
"""

# perfcast.experiment registers the campaign-store reader (experiment/io/sqlite.py), which
# reads profiles with .profiles, which in turn builds Experiments: a cycle between the two
# packages. Initialising perfcast.experiment first resolves it in the one order that works,
# whichever module a user imports first.
import perfcast.experiment  # noqa: F401
