"""fatkit: find, judge and translate the GPU code inside CUDA binaries for AMD GPUs."""

__version__ = "0.1.0"
