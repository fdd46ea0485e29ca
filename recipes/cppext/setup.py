from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CppExtension

setup(
    name="cppext",
    version="0.1",
    packages=["cppext"],
    ext_modules=[CppExtension("cppext._C", ["csrc/scale.cpp"])],
    cmdclass={"build_ext": BuildExtension},
)
