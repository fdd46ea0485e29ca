"""Builders: turn a plan + toolchain + source into an installed prefix and meta/ files.

context (BuildContext, Builder, build_dir_key) is what every builder gets; registry maps
build.system to its builder (cmake, pytorch*, setuptools, pep517); cmake_steps and
cmake_file_api drive a CMake tree for the cmake and pytorch builders; wheel holds the PEP 517
wheel build the setuptools and pep517 builders share; process runs a step with its log;
compile_cache/ is the launcher (ccache, sccache, distcc) in front of the compilers.
"""
