// Greedy NMS on the GPU: one bitmask word per (box, block of 64 boxes).
#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <vector>

namespace {
constexpr int kThreads = 64;

__device__ inline float iou(const float* a, const float* b) {
  float left = fmaxf(a[0], b[0]), right = fminf(a[2], b[2]);
  float top = fmaxf(a[1], b[1]), bottom = fminf(a[3], b[3]);
  float w = fmaxf(right - left, 0.f), h = fmaxf(bottom - top, 0.f);
  float inter = w * h;
  float area_a = (a[2] - a[0]) * (a[3] - a[1]);
  float area_b = (b[2] - b[0]) * (b[3] - b[1]);
  return inter / (area_a + area_b - inter);
}

__global__ void nms_kernel(int n, float thr, const float* boxes, unsigned long long* mask) {
  const int row = blockIdx.y, col = blockIdx.x;
  const int rows = min(n - row * kThreads, kThreads);
  const int cols = min(n - col * kThreads, kThreads);
  __shared__ float block_boxes[kThreads * 4];
  if (threadIdx.x < cols) {
    for (int k = 0; k < 4; ++k)
      block_boxes[threadIdx.x * 4 + k] = boxes[(kThreads * col + threadIdx.x) * 4 + k];
  }
  __syncthreads();
  if (threadIdx.x < rows) {
    const int cur = kThreads * row + threadIdx.x;
    unsigned long long t = 0;
    int start = (row == col) ? threadIdx.x + 1 : 0;
    for (int i = start; i < cols; ++i)
      if (iou(boxes + cur * 4, block_boxes + i * 4) > thr) t |= 1ULL << i;
    mask[cur * gridDim.x + col] = t;
  }
}
}  // namespace

at::Tensor nms_cuda(const at::Tensor& boxes, const at::Tensor& scores, double iou_threshold) {
  TORCH_CHECK(boxes.is_cuda() && scores.is_cuda(), "boxes and scores must be CUDA tensors");
  at::cuda::CUDAGuard guard(boxes.device());
  auto order = std::get<1>(scores.sort(0, /*descending=*/true));
  auto sorted = boxes.index_select(0, order).to(at::kFloat).contiguous();
  const int n = static_cast<int>(boxes.size(0));
  const int blocks = (n + kThreads - 1) / kThreads;
  auto mask = at::empty({n * blocks}, boxes.options().dtype(at::kLong));
  dim3 grid(blocks, blocks), block(kThreads);
  nms_kernel<<<grid, block, 0, at::cuda::getCurrentCUDAStream()>>>(
      n, static_cast<float>(iou_threshold), sorted.data_ptr<float>(),
      reinterpret_cast<unsigned long long*>(mask.data_ptr<int64_t>()));
  auto mask_cpu = mask.cpu();
  const auto* m = reinterpret_cast<const unsigned long long*>(mask_cpu.data_ptr<int64_t>());
  std::vector<unsigned long long> removed(blocks, 0);
  std::vector<int64_t> keep;
  for (int i = 0; i < n; ++i) {
    if (removed[i / kThreads] & (1ULL << (i % kThreads))) continue;
    keep.push_back(i);
    for (int j = 0; j < blocks; ++j) removed[j] |= m[i * blocks + j];
  }
  auto keep_t = at::tensor(keep, at::kLong).to(boxes.device());
  return order.index_select(0, keep_t);
}
