"""Reading the user's compile command and turning it into the instrumented one.

The one-off form of ``perfcast taint`` takes an ordinary command (``mpicc app.c -o app``).
We keep everything the user wrote -- flags, libraries, output name -- and change only the
compiler (clang with DataFlowSanitizer; Open MPI's wrappers are pointed at it through
``OMPI_CC``/``OMPI_CXX``), the source files (their rewritten copies), and add our flags and
runtime objects.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from perfcast.csource.languages import CXX_SUFFIXES
from perfcast.errors import InputError
from perfcast.taint.build import LIBSTDCXX_HEADER, RuntimeParts, find_library
from perfcast.taint.instrument import INCLUDE_DIR
from perfcast.taint.toolchain import Toolchain, mpi_compile_flags

SOURCE_SUFFIXES = {".c", *CXX_SUFFIXES} - {".hpp", ".hh", ".hxx"}
MPI_C_WRAPPERS = {"mpicc"}
MPI_CXX_WRAPPERS = {"mpicxx", "mpic++", "mpiCC"}
CXX_COMPILERS = {"g++", "c++", "clang++"}
FLAGS_WITH_VALUE = {"-o", "-I", "-D", "-U", "-include", "-isystem", "-iquote", "-L", "-l", "-x"}
PARSE_FLAG_PREFIXES = ("-I", "-D", "-U", "-std=", "-isystem", "-iquote", "-include")


@dataclass
class CompileCommand:
    compiler: str
    arguments: list[str]
    cwd: Path
    sources: list[Path] = field(default_factory=list)
    parse_flags: list[str] = field(default_factory=list)
    include_dirs: list[Path] = field(default_factory=list)
    library_dirs: list[Path] = field(default_factory=list)
    libraries: list[str] = field(default_factory=list)

    @property
    def mpi(self) -> bool:
        return Path(self.compiler).name in MPI_C_WRAPPERS | MPI_CXX_WRAPPERS

    @property
    def output(self) -> str:
        """The program the command builds (``-o``'s value; ``a.out`` as compilers default)."""
        args = self.arguments
        for flag, value in itertools.pairwise(args):
            if flag == "-o":
                return value
        for arg in args:
            if arg.startswith("-o") and len(arg) > 2:
                return arg[2:]
        return "a.out"

    @property
    def cplusplus(self) -> bool:
        name = Path(self.compiler).name
        if name in MPI_CXX_WRAPPERS or name in CXX_COMPILERS or name.startswith("clang++"):
            return True
        return any(s.suffix in CXX_SUFFIXES for s in self.sources)

    @classmethod
    def parse(cls, argv: Sequence[str], cwd: Path) -> CompileCommand:
        if not argv:
            raise InputError("no compile command given after `--` (e.g. -- mpicc app.c -o app)")
        command = cls(compiler=argv[0], arguments=list(argv[1:]), cwd=cwd)
        args = command.arguments
        i = 0
        while i < len(args):
            arg = args[i]
            value = None
            if arg in FLAGS_WITH_VALUE and i + 1 < len(args):
                value = args[i + 1]
                i += 1
            if arg == "-c":
                raise InputError(
                    "the one-off form builds and links the program in one command; "
                    "drop -c and name all sources"
                )
            if arg in ("-I", "-isystem", "-iquote", "-D", "-U", "-include") and value:
                command.parse_flags += [arg, value]
                if arg == "-I":
                    command.include_dirs.append((cwd / value).resolve())
            elif arg.startswith(PARSE_FLAG_PREFIXES):
                command.parse_flags.append(arg)
                if arg.startswith("-I"):
                    command.include_dirs.append((cwd / arg[2:]).resolve())
            elif arg == "-L" and value:
                command.library_dirs.append((cwd / value).resolve())
            elif arg.startswith("-L"):
                command.library_dirs.append((cwd / arg[2:]).resolve())
            elif arg == "-l" and value:
                command.libraries.append(value)
            elif arg.startswith("-l"):
                command.libraries.append(arg[2:])
            elif value is None and not arg.startswith("-") and Path(arg).suffix in SOURCE_SUFFIXES:
                path = (cwd / arg).resolve()
                if not path.is_file():
                    raise InputError("source file of the compile command not found", path=path)
                command.sources.append(path)
            i += 1
        if not command.sources:
            raise InputError(f"the compile command names no C/C++ source file: {' '.join(argv)}")
        if command.mpi:
            command.parse_flags += mpi_compile_flags(command.compiler)
        return command

    def shared_libraries(self) -> list[Path]:
        found = (find_library(name, self.library_dirs) for name in self.libraries)
        return [path for path in found if path is not None]

    def instrumented(
        self,
        toolchain: Toolchain,
        rewritten: dict[Path, Path],
        root: Path,
        shadow_root: Path,
        runtime: RuntimeParts,
        *,
        control_flow: bool = True,
    ) -> tuple[list[str], dict[str, str]]:
        """The command (and extra environment) that builds the taint-instrumented program.
        Without ``control_flow`` the condition slots hold no labels (perfcast_prelude.h): the
        sinks are inline, so the choice is made when the program is built."""
        env: dict[str, str] = {}
        compiler = toolchain.clangxx if self.cplusplus else toolchain.clang
        if self.mpi:
            env["OMPI_CXX" if self.cplusplus else "OMPI_CC"] = compiler
            compiler = self.compiler
        by_original = {str(k): str(v) for k, v in rewritten.items()}
        args = []
        for arg in self.arguments:
            resolved = str((self.cwd / arg).resolve()) if not arg.startswith("-") else arg
            args.append(by_original.get(resolved, arg))
        extra = ["-fsanitize=dataflow", "-DPERFCAST_TAINT", "-I", str(INCLUDE_DIR)]
        if not control_flow:
            extra.append("-DPERFCAST_NO_CONTROL_FLOW")
        if self.cplusplus:
            # std::string's code compiled into the program, so that DataFlowSanitizer
            # instruments its copies: parameters read through std::string keep their labels
            # (the header says how; the string streams' part is the runtime's)
            extra += ["-include", str(LIBSTDCXX_HEADER)]
        for abilist in runtime.abilists:
            extra += ["-mllvm", f"-dfsan-abilist={abilist}"]
        for source in self.sources:
            extra += ["-iquote", str(source.parent)]
        for directory in self.include_dirs:
            if directory.is_relative_to(root):
                extra += ["-I", str(shadow_root / directory.relative_to(root))]
        objects = [str(o) for o in runtime.objects]
        return [compiler, *extra, *args, *objects], env


def default_root(sources: Sequence[Path]) -> Path:
    """The project directory: the deepest directory holding all sources."""
    return Path(os.path.commonpath([str(s.parent) for s in sources]))
