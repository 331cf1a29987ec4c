"""C and C++ sources read with libclang, below every stage that reads them.

:mod:`~perfcast.csource.syntax` is the one vocabulary of C/C++ the taint rewriter
(:mod:`perfcast.taint.rewriter`) and the loop analysis share: cursor kinds, operators,
where a statement ends, a file's tokens. :mod:`~perfcast.csource.loopsafety` decides
whether skipping a loop's bodies could change an MPI program's trace (the threshold
iteration rule of :mod:`perfcast.measure.threshold`), each refusal typed
(:mod:`~perfcast.csource.verdicts`). Neither knows the taint profile nor the build: the
stage above names the loops and the compile flags.
"""
