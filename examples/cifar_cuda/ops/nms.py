"""Python front-end of the custom CUDA NMS op (built by ops/setup.py)."""
import torch

from . import _ext


def nms(boxes: torch.Tensor, scores: torch.Tensor, iou_threshold: float = 0.5) -> torch.Tensor:
    """Returns the indices of the boxes kept, sorted by decreasing score."""
    if boxes.numel() == 0:
        return torch.empty((0,), dtype=torch.long, device=boxes.device)
    thr = float(iou_threshold)
    return _ext.nms_cuda(boxes.contiguous(), scores.contiguous(), thr)


def batched_nms(boxes, scores, labels, iou_threshold=0.5):
    """Class-aware NMS: offsets boxes per label so different classes never overlap."""
    if boxes.numel() == 0:
        return torch.empty((0,), dtype=torch.long, device=boxes.device)
    offsets = labels.to(boxes) * (boxes.max() + 1)
    return nms(boxes + offsets[:, None], scores, iou_threshold)
