# A small CUDA extension built the way pointnet2_ops is: setup.py hard-codes the arch list,
# overriding the user's TORCH_CUDA_ARCH_LIST (nvcc 12+ rejects compute_37, CUDA 13 rejects 5.0-7.0).
import os

from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CUDAExtension

os.environ["TORCH_CUDA_ARCH_LIST"] = "3.7+PTX;5.0;6.0;6.1;6.2;7.0;7.5"

setup(
    name="cuext",
    version="0.1.0",
    packages=["cuext"],
    ext_modules=[
        CUDAExtension(
            name="cuext._ext",
            sources=["csrc/bindings.cpp", "csrc/add_one.cu"],
            extra_compile_args={"cxx": ["-O2"], "nvcc": ["-O2"]},
        )
    ],
    cmdclass={"build_ext": BuildExtension},
    install_requires=["torch"],
)
