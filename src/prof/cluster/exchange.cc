// Sharing the ranks of a cluster among processes: one process, or MPI's (built with
// PORTKIT_WITH_MPI). Only the reductions (RankDigest bytes) travel: one gather to process 0,
// then one broadcast of the exit code.
#include <cstdint>
#include <cstdlib>

#include "prof/cluster/cluster.h"

#ifdef PORTKIT_HAVE_MPI
#include <mpi.h>
#endif

namespace portkit::prof::cluster {
namespace {

class SingleProcess final : public Exchange {
 public:
  int process() const override { return 0; }
  int processes() const override { return 1; }
  Expected<std::vector<std::string>> GatherToRoot(const std::string& mine) override {
    return std::vector<std::string>{mine};
  }
  int Broadcast(int value) override { return value; }
};

#ifdef PORTKIT_HAVE_MPI
/// Whether a launcher (Open MPI's mpirun, or a PMI/PMIx one) started this process.
bool LaunchedByMpi() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_SIZE"})
    if (std::getenv(v)) return true;
  return false;
}

class Mpi final : public Exchange {
 public:
  Mpi() {
    int done = 0;
    MPI_Initialized(&done);
    if (!done) {
      MPI_Init(nullptr, nullptr);
      owner_ = true;
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &process_);
    MPI_Comm_size(MPI_COMM_WORLD, &processes_);
  }
  ~Mpi() override {
    if (owner_) MPI_Finalize();
  }
  int process() const override { return process_; }
  int processes() const override { return processes_; }
  Expected<std::vector<std::string>> GatherToRoot(const std::string& mine) override {
    // Sizes first (as 64-bit: a digest of many collectives can pass 2 GiB only with 10^7 of them,
    // but MPI counts are int, so anything over INT_MAX is refused rather than cut).
    long long size = static_cast<long long>(mine.size());
    std::vector<long long> sizes(process_ == 0 ? static_cast<size_t>(processes_) : 0);
    if (MPI_Gather(&size, 1, MPI_LONG_LONG, sizes.data(), 1, MPI_LONG_LONG, 0, MPI_COMM_WORLD) != MPI_SUCCESS)
      return Status(ErrorCode::kInternal, "MPI_Gather of the digest sizes failed");
    std::vector<int> counts, displs;
    long long total = 0;
    bool too_big = size > INT32_MAX;
    for (long long s : sizes) {
      too_big |= s > INT32_MAX || total + s > INT32_MAX;
      counts.push_back(static_cast<int>(s));
      displs.push_back(static_cast<int>(total));
      total += s;
    }
    int refuse = Broadcast(too_big ? 1 : 0);
    if (refuse || too_big) return Status(ErrorCode::kInternal, "the rank digests exceed 2 GiB for one MPI gather");
    std::string all(process_ == 0 ? static_cast<size_t>(total) : 0, '\0');
    if (MPI_Gatherv(mine.data(), static_cast<int>(size), MPI_CHAR, all.data(), counts.data(), displs.data(), MPI_CHAR,
                    0, MPI_COMM_WORLD) != MPI_SUCCESS)
      return Status(ErrorCode::kInternal, "MPI_Gatherv of the digests failed");
    std::vector<std::string> out;
    for (size_t i = 0; i < counts.size(); ++i)
      out.push_back(all.substr(static_cast<size_t>(displs[i]), static_cast<size_t>(counts[i])));
    return out;
  }
  int Broadcast(int value) override {
    MPI_Bcast(&value, 1, MPI_INT, 0, MPI_COMM_WORLD);
    return value;
  }

 private:
  int process_ = 0, processes_ = 1;
  bool owner_ = false;
};
#endif

}  // namespace

std::unique_ptr<Exchange> MakeSingleProcessExchange() { return std::make_unique<SingleProcess>(); }

std::unique_ptr<Exchange> MakeExchange() {
#ifdef PORTKIT_HAVE_MPI
  if (LaunchedByMpi()) return std::make_unique<Mpi>();
#endif
  return MakeSingleProcessExchange();
}

bool BuiltWithMpi() {
#ifdef PORTKIT_HAVE_MPI
  return true;
#else
  return false;
#endif
}

}  // namespace portkit::prof::cluster
