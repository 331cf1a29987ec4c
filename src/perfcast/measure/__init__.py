"""Measuring real programs: the ``perfcast build`` compiler wrapper (:mod:`.build`), the C
call-path runtime it links (``runtime/``, built by :mod:`.toolchain`), and the reader that
turns the runtime's per-rank profiles into an Experiment (:mod:`.profiles`). See
``README.md`` in this directory.
"""
