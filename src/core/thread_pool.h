#pragma once
/// A fixed set of worker threads. ParallelFor is the common entry: it splits [0, n) across the
/// workers (dynamic scheduling, one index at a time) and returns when all are done.
#include <condition_variable>
#include <functional>
#include <mutex>
#include <queue>
#include <thread>
#include <vector>

namespace portkit {

class ThreadPool {
 public:
  /// `threads` <= 0 means one per hardware core.
  explicit ThreadPool(int threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return static_cast<int>(workers_.size()); }
  void Submit(std::function<void()> task);
  /// Blocks until every submitted task has finished.
  void Wait();
  /// Runs fn(worker_index, i) for i in [0, n); worker_index < size() identifies per-thread state.
  void ParallelFor(size_t n, const std::function<void(int worker, size_t i)>& fn);

  static int DefaultThreads();

 private:
  void WorkerLoop();
  std::vector<std::thread> workers_;
  std::queue<std::function<void()>> tasks_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::condition_variable idle_cv_;
  size_t active_ = 0;
  bool stop_ = false;
};

}  // namespace portkit
