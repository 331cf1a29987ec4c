"""C and C++ sources read with libclang, below every stage that reads them.

:mod:`~perfcast.csource.syntax` is the one vocabulary of C/C++ the taint rewriter
(:mod:`perfcast.taint.rewriter`) and the loop analysis share: cursor kinds, operators,
where a statement ends, a file's tokens; :mod:`~perfcast.csource.languages` tells C, C++
and headers apart by name, without libclang. :mod:`~perfcast.csource.loopsafety` decides
whether skipping a loop's bodies could change an MPI program's trace (the threshold
iteration rule of :mod:`perfcast.measure.threshold`), each refusal typed
(:mod:`~perfcast.csource.verdicts`), from the program's files and call graph
(:mod:`~perfcast.csource.program`), what the body does
(:mod:`~perfcast.csource.effects`), the memory it writes
(:mod:`~perfcast.csource.memorywrites`) and where the values it computes are used
(:mod:`~perfcast.csource.search`). None knows the taint profile nor the build: the stage
above names the loops and the compile flags.
"""
