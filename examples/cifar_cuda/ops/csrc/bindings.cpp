#include <torch/extension.h>

at::Tensor nms_cuda(const at::Tensor& boxes, const at::Tensor& scores, double iou_threshold);

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("nms_cuda", &nms_cuda, "NMS (CUDA)");
}
