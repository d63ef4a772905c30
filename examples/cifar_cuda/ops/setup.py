"""Build the CUDA NMS extension in place: python setup.py build_ext --inplace"""
from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CUDAExtension

setup(
    name="cifar_ops",
    ext_modules=[
        CUDAExtension(
            name="_ext",
            sources=["csrc/bindings.cpp", "csrc/nms_kernel.cu"],
            extra_compile_args={"cxx": ["-O3"], "nvcc": ["-O3", "--use_fast_math"]},
        )
    ],
    cmdclass={"build_ext": BuildExtension},
)
