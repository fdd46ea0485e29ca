"""A cmake recipe of two linked outputs (libtwice.so and a program `main` that links it), for
the tests of how a build links: tests/test_linker.py and tests/test_relink.py."""
from __future__ import annotations

from pathlib import Path


def write_linked_recipe(project: Path, name: str, build: str = "") -> Path:
    """recipes/<name>/ and recipes/<name>.toml (variant release; `build`: more [build] lines);
    the source directory."""
    src = project / "recipes" / name
    src.mkdir(parents=True, exist_ok=True)
    (src / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.18)\nproject(linked CXX)\n"
        "set(CMAKE_INSTALL_RPATH \"$ORIGIN/../lib\")\n"
        "add_library(twice SHARED twice.cpp)\n"
        "add_executable(main main.cpp)\ntarget_link_libraries(main twice)\n"
        "install(TARGETS twice main)\n")
    (src / "twice.cpp").write_text("int twice(int x) { return 2 * x; }\n")
    (src / "main.cpp").write_text("int twice(int);\nint main() { return twice(21) == 42 ? 0 : 1; }\n")
    (project / "recipes" / f"{name}.toml").write_text(
        f'description = "two linked outputs"\n[source]\nkind = "path"\npath = "{name}"\n'
        f'[build]\nsystem = "cmake"\n{build}\n'
        '[variants.release]\nbuild_type = "Release"\n')
    return src
