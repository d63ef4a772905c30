from .nms import nms, batched_nms

__all__ = ["nms", "batched_nms"]
