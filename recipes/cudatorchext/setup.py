from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CUDAExtension

# TORCH_CUDA_ARCH_LIST (the recipe variant's env) picks the fatbin's images; CUDA_HOME (the
# toolchain's) the locked toolkit.
setup(
    name="cudatorchext",
    version="0.1",
    packages=["cudatorchext"],
    ext_modules=[CUDAExtension("cudatorchext._C", ["csrc/axpy_op.cpp", "csrc/axpy_kernel.cu"])],
    cmdclass={"build_ext": BuildExtension},
)
