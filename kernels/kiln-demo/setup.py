"""kiln-demo built the way most CUDA extensions build themselves: setuptools and
torch.utils.cpp_extension. kiln's setuptools backend runs this file; its native backend
compiles the same sources from the manifest without it. The archs come from
TORCH_CUDA_ARCH_LIST."""

from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CUDAExtension

setup(
    name="kiln-demo",
    version="0.1.0",
    description="A tiny PyTorch CUDA extension: kiln's end-to-end fixture and GPU smoke test",
    license="MIT",
    python_requires=">=3.9",
    packages=["kiln_demo"],
    ext_modules=[
        CUDAExtension(
            name="kiln_demo_cuda",
            sources=["csrc/kiln_demo.cpp", "csrc/kiln_demo_kernel.cu"],
            include_dirs=["csrc"],
            extra_compile_args={"cxx": ["-O3"], "nvcc": ["-O3"]},
        )
    ],
    cmdclass={"build_ext": BuildExtension},
    install_requires=["torch"],
)
