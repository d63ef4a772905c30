/// analyse_bench: throughput of the Python front end and of the full `torch_apis` analysis.
///
/// Generates a deterministic corpus of PyTorch-style Python code (>= 5 MB by default) into a
/// temporary folder, then measures, best of N repetitions each:
///   - tree-sitter parse only (PythonParser::Parse, 1 thread, sources already in memory);
///   - the full analysis (portkit::analyse::RunAnalyse and the report renderer: discovery, reading, parsing, summaries,
///     index, walking, rules, reports) with 1 and with 2 threads;
///   - CPython's ast.parse of the same files (peer figure, via `python3 -c`).
/// and prints a `what | MB/s | ratio` table; ratio is relative to the tree-sitter parse.
///
/// Usage: analyse_bench [--mb N] [--reps N] [--version V] [--keep]
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "analyse/api.h"
#include "analyse/python_syntax.h"
#include "core/context.h"
#include "core/log.h"
#include "render/analyse_report.h"

namespace fs = std::filesystem;
using portkit::analyse::ParsedSource;
using portkit::analyse::PythonParser;

namespace {

// ---------------------------------------------------------------------------------------------
// Deterministic corpus generator.

class Rng {
 public:
  explicit Rng(uint64_t seed) : s_(seed) {}
  uint64_t Next() {  // splitmix64
    uint64_t z = (s_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  size_t Below(size_t n) { return static_cast<size_t>(Next() % n); }
  bool Chance(int percent) { return Below(100) < static_cast<size_t>(percent); }
  template <typename T, size_t N>
  const T& Pick(const T (&a)[N]) {
    return a[Below(N)];
  }

 private:
  uint64_t s_;
};

const char* const kSyllables[] = {"con",  "res",  "att",   "enc",  "dec",  "proj", "feat",  "emb",
                                  "norm", "gate", "mix",   "pool", "head", "tok",  "patch", "vis",
                                  "aud",  "seq",  "graph", "edge", "node", "mask", "key",   "val",
                                  "qry",  "hid",  "lat",   "up",   "down", "skip", "fuse",  "dil"};
const char* const kClassStems[] = {"Block",     "Encoder", "Decoder", "Head",     "Stem",      "Mixer",
                                   "Attention", "Adapter", "Gate",    "Pooler",   "Projector", "Refiner",
                                   "Backbone",  "Neck",    "Fusion",  "Embedding"};
const char* const kActs[] = {"F.relu",        "F.gelu",       "F.silu", "torch.tanh",
                             "torch.sigmoid", "F.leaky_relu", "F.elu",  "F.mish"};
const char* const kChains[] = {
    "{x}.view({x}.size(0), -1)",
    "{x}.permute(0, 2, 1).contiguous()",
    "{x}.transpose(1, 2).reshape(b, -1, self.dim)",
    "{x}.flatten(1).unsqueeze(-1)",
    "{x}.float().softmax(dim=-1).type_as({x})",
    "{x}.mean(dim=1, keepdim=True).expand_as({x})",
    "{x}.clamp(min=-5.0, max=5.0).mul(self.scale)",
    "{x}.masked_fill(mask == 0, float(\"-inf\"))",
    "{x}.chunk(2, dim=-1)[0].sigmoid()",
    "{x}.norm(p=2, dim=-1, keepdim=True).add(1e-6)",
    "{x}.detach().cpu().numpy()",
    "{x}.to(device=self.device, dtype=torch.float16)",
    "{x}.half().cuda(non_blocking=True)",
    "{x}.new_zeros({x}.shape).copy_({x})",
    "{x}.abs().max(dim=-1).values.clamp_min(1e-5)",
};
const char* const kTorchCalls[] = {
    "torch.cat([{x}, {y}], dim=1)",
    "torch.stack([{x}, {y}], dim=0).sum(0)",
    "torch.matmul({x}, {y}.transpose(-2, -1))",
    "torch.einsum(\"bhld,bhmd->bhlm\", {x}, {y})",
    "torch.where({x} > 0, {x}, {y})",
    "torch.cdist({x}, {y}, p=2.0)",
    "torch.bmm({x}, {y}.transpose(1, 2))",
    "F.interpolate({x}, scale_factor=2, mode=\"bilinear\", align_corners=False)",
    "F.dropout({x}, p=self.drop, training=self.training)",
    "torch.nn.functional.layer_norm({x}, {x}.shape[-1:])",
    "F.pad({x}, (1, 1, 1, 1), mode=\"reflect\")",
    "torch.histc({x}.float(), bins=64, min=0, max=1)",
    "torch.addmm(self.bias, {x}, {y})",
    "torch.baddbmm({x}, {x}, {y})",
    "torch.from_numpy(np.asarray(self.table)).to({x}.device)",
};

std::string Subst(std::string t, const std::string& x, const std::string& y) {
  for (size_t p; (p = t.find("{x}")) != std::string::npos;) t.replace(p, 3, x);
  for (size_t p; (p = t.find("{y}")) != std::string::npos;) t.replace(p, 3, y);
  return t;
}

class ModuleGen {
 public:
  ModuleGen(Rng& rng, int pkg, int mod, int mods_per_pkg, int pkgs)
      : r_(rng), pkg_(pkg), mod_(mod), mods_(mods_per_pkg), pkgs_(pkgs) {}

  std::string Ident() {
    std::string s = r_.Pick(kSyllables);
    s += "_";
    s += r_.Pick(kSyllables);
    return s + std::to_string(r_.Below(100));
  }
  std::string ClassName(int pkg, int mod, int k) {
    return std::string(kClassStems[(pkg * 7 + mod * 3 + k) % std::size(kClassStems)]) + "P" + std::to_string(pkg) +
           "M" + std::to_string(mod) + "K" + std::to_string(k);
  }

  void Header(std::ostringstream& o) {
    o << "\"\"\"Module " << pkg_ << "." << mod_ << ": generated PyTorch-style model code.\n\n"
      << "Part of the portkit benchmark corpus; names vary per file (seed " << r_.Below(1 << 20) << ").\n\"\"\"\n";
    o << "import math\nimport os\nimport time\n";
    if (r_.Chance(50)) o << "from typing import Optional, Tuple\n";
    o << "\nimport numpy as np\nimport torch\nimport torch.nn as nn\n"
      << "from torch.nn import functional as F\n"
      << "from torch.utils.data import DataLoader, Dataset\n";
    if (r_.Chance(40)) o << "import torch.distributed as dist\n";
    if (r_.Chance(30)) o << "from torch.cuda.amp import GradScaler, autocast\n";
    o << "\nfrom ..common import helpers\nfrom ..common.helpers import count_params, seed_all\n";
    if (mod_ > 0) {
      int prev = static_cast<int>(r_.Below(static_cast<size_t>(mod_)));
      o << "from .mod_" << prev << " import " << ClassName(pkg_, prev, 0) << "\n";
      o << "from . import mod_" << prev << " as sibling\n";
      has_sibling_ = true;
      sibling_ = prev;
    }
    if (pkg_ > 0 && r_.Chance(50)) {
      int other = static_cast<int>(r_.Below(static_cast<size_t>(pkg_)));
      o << "from ..pkg_" << other << " import " << ClassName(other, 0, 0) << " as Imported" << other << "\n";
    }
    o << "\nDEVICE = torch.device(\"cuda\" if torch.cuda.is_available() else \"cpu\")\n"
      << "CONFIG_" << mod_ << " = {\"dim\": " << 64 * (1 + r_.Below(8)) << ", \"heads\": " << 1 + r_.Below(16)
      << ", \"drop\": 0." << r_.Below(5) << ", \"name\": \"" << Ident() << "\"}\n"
      << "__all__ = [\"" << ClassName(pkg_, mod_, 0) << "\", \"build_" << mod_ << "\"]\n\n\n";
  }

  void ModuleClass(std::ostringstream& o, int k) {
    std::string name = ClassName(pkg_, mod_, k);
    std::string base = "nn.Module";
    if (k > 0 && r_.Chance(30)) base = ClassName(pkg_, mod_, 0);
    else if (has_sibling_ && r_.Chance(20)) base = ClassName(pkg_, sibling_, 0);
    int dim = 32 * (1 + static_cast<int>(r_.Below(16)));
    o << "class " << name << "(" << base << "):\n"
      << "    \"\"\"" << Ident() << " layer with " << dim << " channels.\"\"\"\n\n"
      << "    def __init__(self, dim=" << dim << ", heads=" << 1 + r_.Below(8) << ", drop=0.1, device=None):\n";
    if (base == "nn.Module") o << "        super().__init__()\n";
    else o << "        super(" << name << ", self).__init__(dim, heads, drop)\n";
    o << "        self.dim = dim\n        self.heads = heads\n        self.drop = drop\n"
      << "        self.scale = dim ** -0.5\n        self.device = device or DEVICE\n"
      << "        self.table = [i * 0.5 for i in range(" << 4 + r_.Below(12) << ")]\n";
    int layers = 3 + static_cast<int>(r_.Below(6));
    for (int i = 0; i < layers; ++i) {
      std::string id = "self." + std::string(r_.Pick(kSyllables)) + std::to_string(i);
      layer_names_.push_back(id);
      switch (r_.Below(8)) {
        case 0: o << "        " << id << " = nn.Conv2d(dim, dim, kernel_size=3, padding=1, bias=False)\n"; break;
        case 1: o << "        " << id << " = nn.BatchNorm2d(dim, momentum=0.01)\n"; break;
        case 2: o << "        " << id << " = nn.Linear(dim, dim * " << 1 + r_.Below(4) << ")\n"; break;
        case 3: o << "        " << id << " = nn.LayerNorm(dim, eps=1e-6)\n"; break;
        case 4: o << "        " << id << " = nn.Dropout(p=drop)\n"; break;
        case 5:
          o << "        " << id << " = nn.Sequential(nn.Linear(dim, dim), nn.GELU(), nn.Linear(dim, dim))\n";
          break;
        case 6:
          o << "        " << id << " = nn.MultiheadAttention(dim, heads, dropout=drop, batch_first=True)\n";
          break;
        default: o << "        " << id << " = nn.Parameter(torch.zeros(1, dim).normal_(0, 0.02))\n"; break;
      }
    }
    o << "        self.register_buffer(\"pos_" << k << "\", torch.arange(" << 64 + r_.Below(512)
      << ").float().cuda())\n\n";
    // forward
    o << "    def forward(self, x, mask=None):\n"
      << "        b = x.size(0)\n"
      << "        residual = x\n";
    int steps = 4 + static_cast<int>(r_.Below(8));
    std::string cur = "x";
    for (int i = 0; i < steps; ++i) {
      std::string v = "h" + std::to_string(i);
      switch (r_.Below(5)) {
        case 0: o << "        " << v << " = " << Subst(r_.Pick(kChains), cur, "residual") << "\n"; break;
        case 1: o << "        " << v << " = " << Subst(r_.Pick(kTorchCalls), cur, "residual") << "\n"; break;
        case 2: o << "        " << v << " = " << r_.Pick(kActs) << "(" << cur << ")\n"; break;
        case 3:
          o << "        if mask is not None and " << cur << ".dim() > 2:\n"
            << "            " << v << " = " << Subst(r_.Pick(kChains), cur, "mask") << "\n"
            << "        else:\n"
            << "            " << v << " = " << cur << " * self.scale + self.table[" << i % 4 << "]\n";
          break;
        default:
          o << "        " << v << " = " << cur << " + " << Subst(r_.Pick(kChains), "residual", cur) << "\n";
          break;
      }
      cur = v;
    }
    o << "        if self.training and torch.cuda.is_available():\n"
      << "            torch.cuda.synchronize()\n"
      << "        return " << cur << "\n\n";
    if (r_.Chance(50)) {
      o << "    @torch.no_grad()\n"
        << "    def extra_repr(self):\n"
        << "        return f\"dim={self.dim}, heads={self.heads}, drop={self.drop:.2f}\"\n\n";
    }
    if (r_.Chance(40)) {
      o << "    @staticmethod\n"
        << "    def init_weights(m):\n"
        << "        if isinstance(m, nn.Linear):\n"
        << "            nn.init.trunc_normal_(m.weight, std=0.02)\n"
        << "            if m.bias is not None:\n"
        << "                nn.init.constant_(m.bias, 0)\n"
        << "        elif isinstance(m, (nn.LayerNorm, nn.BatchNorm2d)):\n"
        << "            nn.init.ones_(m.weight)\n\n";
    }
    o << "\n";
  }

  void DatasetClass(std::ostringstream& o) {
    std::string name = "Data" + std::to_string(pkg_) + "x" + std::to_string(mod_);
    o << "class " << name << "(Dataset):\n"
      << "    def __init__(self, root, size=" << 1000 + r_.Below(9000) << ", transform=None):\n"
      << "        self.root = root\n        self.size = size\n        self.transform = transform\n"
      << "        self.files = sorted(f for f in os.listdir(root) if f.endswith(\".pt\")) if os.path.isdir(root) else "
         "[]\n\n"
      << "    def __len__(self):\n        return self.size\n\n"
      << "    def __getitem__(self, idx):\n"
      << "        g = torch.Generator().manual_seed(idx)\n"
      << "        x = torch.randn(3, 32, 32, generator=g)\n"
      << "        y = torch.randint(0, 10, (1,), generator=g).item()\n"
      << "        if self.transform is not None:\n            x = self.transform(x)\n"
      << "        return x, y\n\n\n";
  }

  void TrainLoop(std::ostringstream& o) {
    std::string model = ClassName(pkg_, mod_, 0);
    o << "def train_" << mod_ << "(epochs=" << 1 + r_.Below(100) << ", lr=" << 1 + r_.Below(9)
      << "e-4, batch_size=" << (1 << (4 + r_.Below(4))) << ", amp=True):\n"
      << "    seed_all(" << r_.Below(10000) << ")\n"
      << "    model = " << model << "().cuda()\n"
      << "    print(f\"params: {count_params(model) / 1e6:.2f}M\")\n"
      << "    loader = DataLoader(Data" << pkg_ << "x" << mod_
      << "(\"./data\"), batch_size=batch_size, shuffle=True, num_workers=" << r_.Below(8)
      << ", pin_memory=True, drop_last=True)\n"
      << "    optimizer = torch.optim." << (r_.Chance(50) ? "AdamW" : "SGD")
      << "(model.parameters(), lr=lr, weight_decay=0.05)\n"
      << "    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=epochs)\n"
      << "    scaler = torch.cuda.amp.GradScaler(enabled=amp)\n"
      << "    criterion = nn.CrossEntropyLoss(label_smoothing=0.1)\n"
      << "    best = math.inf\n"
      << "    for epoch in range(epochs):\n"
      << "        model.train()\n"
      << "        start = time.time()\n"
      << "        total = 0.0\n"
      << "        for step, (images, targets) in enumerate(loader):\n"
      << "            images = images.cuda(non_blocking=True)\n"
      << "            targets = targets.to(DEVICE)\n"
      << "            optimizer.zero_grad(set_to_none=True)\n"
      << "            with torch.cuda.amp.autocast(enabled=amp):\n"
      << "                logits = model(images)\n"
      << "                loss = criterion(logits.view(logits.size(0), -1), targets)\n"
      << "            scaler.scale(loss).backward()\n"
      << "            scaler.unscale_(optimizer)\n"
      << "            nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)\n"
      << "            scaler.step(optimizer)\n"
      << "            scaler.update()\n"
      << "            total += loss.item()\n"
      << "            if step % " << 10 * (1 + r_.Below(10)) << " == 0:\n"
      << "                mem = torch.cuda.max_memory_allocated() / 2 ** 20\n"
      << "                print(f\"epoch {epoch} step {step} loss {loss.item():.4f} mem {mem:.0f}MB\")\n"
      << "        scheduler.step()\n"
      << "        if total < best:\n"
      << "            best = total\n"
      << "            torch.save({\"model\": model.state_dict(), \"epoch\": epoch}, f\"ckpt_" << mod_
      << "_{epoch}.pt\")\n"
      << "        print(\"epoch\", epoch, \"time\", time.time() - start)\n"
      << "    return model\n\n\n";
  }

  void Helpers(std::ostringstream& o, int k) {
    std::string fn = Ident() + "_" + std::to_string(k);
    switch (r_.Below(4)) {
      case 0:
        o << "def " << fn << "(tensors, dim=-1):\n"
          << "    out = []\n"
          << "    for i, t in enumerate(tensors):\n"
          << "        if t is None:\n            continue\n"
          << "        t = t.float() if t.dtype == torch.float16 else t\n"
          << "        out.append(t.sum(dim=dim) / max(1, t.shape[dim]))\n"
          << "    return torch.stack(out) if out else torch.empty(0, device=DEVICE)\n\n\n";
        break;
      case 1:
        o << "@torch.no_grad()\n"
          << "def " << fn << "(model, loader, device=DEVICE):\n"
          << "    model.eval()\n"
          << "    correct = total = 0\n"
          << "    for x, y in loader:\n"
          << "        x, y = x.to(device), y.to(device)\n"
          << "        pred = model(x).argmax(dim=1)\n"
          << "        correct += (pred == y).sum().item()\n"
          << "        total += y.numel()\n"
          << "    dists = torch.cdist(x.flatten(1), x.flatten(1))\n"
          << "    return correct / max(total, 1), dists.mean().item()\n\n\n";
        break;
      case 2:
        o << "def " << fn << "(rank, world_size, backend=\"nccl\"):\n"
          << "    os.environ.setdefault(\"MASTER_ADDR\", \"127.0.0.1\")\n"
          << "    os.environ.setdefault(\"MASTER_PORT\", \"" << 20000 + r_.Below(10000) << "\")\n"
          << "    try:\n"
          << "        torch.distributed.init_process_group(backend, rank=rank, world_size=world_size)\n"
          << "    except RuntimeError as exc:\n"
          << "        print(\"init failed:\", exc)\n"
          << "        return False\n"
          << "    torch.cuda.set_device(rank % torch.cuda.device_count())\n"
          << "    torch.backends.cudnn.benchmark = True\n"
          << "    return True\n\n\n";
        break;
      default:
        o << "def " << fn << "(x, k=" << 1 + r_.Below(16) << "):\n"
          << "    scores = {name: float(v) for name, v in zip([\"a\", \"b\", \"c\"], x.tolist()[:3])}\n"
          << "    top = sorted(scores.items(), key=lambda kv: -kv[1])[:k]\n"
          << "    weights = torch.tensor([v for _, v in top], dtype=torch.float32).cuda()\n"
          << "    return torch.nn.functional.softmax(weights, dim=0), top\n\n\n";
        break;
    }
  }

  std::string Generate(size_t target_bytes) {
    std::ostringstream o;
    Header(o);
    int k = 0;
    while (static_cast<size_t>(o.tellp()) < target_bytes) {
      ModuleClass(o, k);
      if (r_.Chance(60)) Helpers(o, k);
      ++k;
    }
    DatasetClass(o);
    TrainLoop(o);
    o << "def build_" << mod_ << "(**kwargs):\n"
      << "    cfg = dict(CONFIG_" << mod_ << ", **kwargs)\n"
      << "    return " << ClassName(pkg_, mod_, 0) << "(cfg[\"dim\"], cfg[\"heads\"], cfg[\"drop\"])\n\n\n"
      << "if __name__ == \"__main__\":\n"
      << "    train_" << mod_ << "()\n";
    (void)mods_;
    (void)pkgs_;
    return o.str();
  }

 private:
  Rng& r_;
  int pkg_, mod_, mods_, pkgs_;
  bool has_sibling_ = false;
  int sibling_ = 0;
  std::vector<std::string> layer_names_;
};

void WriteText(const fs::path& p, const std::string& s) {
  fs::create_directories(p.parent_path());
  std::ofstream f(p, std::ios::binary);
  f << s;
  if (!f) {
    std::fprintf(stderr, "analyse_bench: cannot write %s\n", p.c_str());
    std::exit(1);
  }
}

/// Writes the corpus under `root` until it holds at least `min_bytes` of Python; returns bytes.
size_t GenerateCorpus(const fs::path& root, size_t min_bytes) {
  Rng rng(0x5eed2026u);
  const int kModsPerPkg = 12;
  size_t total = 0;
  std::string helpers =
      "\"\"\"Shared helpers of the generated project.\"\"\"\nimport random\n\nimport numpy as np\n"
      "import torch\n\n\ndef seed_all(seed):\n    random.seed(seed)\n    np.random.seed(seed)\n"
      "    torch.manual_seed(seed)\n    torch.cuda.manual_seed_all(seed)\n\n\n"
      "def count_params(model):\n    return sum(p.numel() for p in model.parameters() if p.requires_grad)\n";
  WriteText(root / "common/__init__.py", "from .helpers import seed_all, count_params\n");
  WriteText(root / "common/helpers.py", helpers);
  total += helpers.size() + 46;
  for (int pkg = 0; total < min_bytes; ++pkg) {
    std::string init = "\"\"\"Package " + std::to_string(pkg) + ".\"\"\"\n";
    for (int mod = 0; mod < kModsPerPkg; ++mod) {
      ModuleGen gen(rng, pkg, mod, kModsPerPkg, 0);
      std::string text = gen.Generate(6000 + rng.Below(20000));
      WriteText(root / ("pkg_" + std::to_string(pkg)) / ("mod_" + std::to_string(mod) + ".py"), text);
      total += text.size();
      init += "from .mod_" + std::to_string(mod) + " import " + gen.ClassName(pkg, mod, 0) + "\n";
    }
    WriteText(root / ("pkg_" + std::to_string(pkg)) / "__init__.py", init);
    total += init.size();
  }
  return total;
}

// ---------------------------------------------------------------------------------------------

double Seconds(std::chrono::steady_clock::time_point a, std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

std::vector<fs::path> PythonFiles(const fs::path& root) {
  std::vector<fs::path> out;
  for (const auto& e : fs::recursive_directory_iterator(root))
    if (e.is_regular_file() && e.path().extension() == ".py") out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

std::string ReadAll(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

size_t CountLines(const fs::path& p) {
  std::string s = ReadAll(p);
  return static_cast<size_t>(std::count(s.begin(), s.end(), '\n'));
}

/// CPython ast.parse peer: returns seconds (best of reps) or a negative value when unavailable.
double PythonAstSeconds(const fs::path& root, int reps, size_t* bytes) {
  static const char* kScript =
      "import ast, os, sys, time\n"
      "root, reps = sys.argv[1], int(sys.argv[2])\n"
      "srcs = []\n"
      "for d, dirs, files in os.walk(root):\n"
      "    dirs.sort()\n"
      "    for f in sorted(files):\n"
      "        if f.endswith(\".py\"):\n"
      "            with open(os.path.join(d, f), \"rb\") as h:\n"
      "                srcs.append(h.read())\n"
      "best = float(\"inf\")\n"
      "for _ in range(reps):\n"
      "    t = time.perf_counter()\n"
      "    for s in srcs:\n"
      "        ast.parse(s)\n"
      "    best = min(best, time.perf_counter() - t)\n"
      "print(sum(map(len, srcs)), best)\n";
  std::string cmd =
      "python3 -c '" + std::string(kScript) + "' '" + root.string() + "' " + std::to_string(reps) + " 2>/dev/null";
  std::FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return -1;
  char buf[256] = {};
  size_t n = std::fread(buf, 1, sizeof(buf) - 1, p);
  int rc = ::pclose(p);
  buf[n] = 0;
  unsigned long long b = 0;
  double secs = -1;
  if (rc != 0 || std::sscanf(buf, "%llu %lf", &b, &secs) != 2) return -1;
  *bytes = static_cast<size_t>(b);
  return secs;
}

}  // namespace

int main(int argc, char** argv) {
  double mb = 6.0;
  int reps = 3;
  bool keep = false;
  std::string version = "2.1.0";
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--mb" && i + 1 < argc) mb = std::atof(argv[++i]);
    else if (a == "--reps" && i + 1 < argc) reps = std::max(1, std::atoi(argv[++i]));
    else if (a == "--version" && i + 1 < argc) version = argv[++i];
    else if (a == "--keep") keep = true;
    else {
      std::fprintf(stderr,
                   "usage: analyse_bench [--mb N (corpus size, default 6)] [--reps N (default 3)] "
                   "[--version V (torch list, default 2.1.0)] [--keep (keep the temp folder)]\n");
      return a == "-h" || a == "--help" ? 0 : 2;
    }
  }

  std::string tmpl = (fs::temp_directory_path() / "portkit_bench_XXXXXX").string();
  if (!::mkdtemp(tmpl.data())) {
    std::perror("mkdtemp");
    return 1;
  }
  fs::path work = tmpl;
  fs::path corpus = work / "corpus";
  auto t0 = std::chrono::steady_clock::now();
  size_t generated = GenerateCorpus(corpus, static_cast<size_t>(mb * 1e6));
  auto t1 = std::chrono::steady_clock::now();

  std::vector<fs::path> files = PythonFiles(corpus);
  std::vector<std::string> texts;
  size_t bytes = 0, lines = 0;
  for (const auto& f : files) {
    texts.push_back(ReadAll(f));
    bytes += texts.back().size();
    lines += static_cast<size_t>(std::count(texts.back().begin(), texts.back().end(), '\n'));
  }
  (void)generated;
  const double mbytes = static_cast<double>(bytes) / 1e6;
  std::printf("analyse_bench: corpus %s\n", corpus.c_str());
  if (std::FILE* f = std::fopen("/proc/loadavg", "r")) {
    char load[128] = {};
    if (std::fgets(load, sizeof load, f)) std::printf("  load average at start: %s", load);
    std::fclose(f);
  }
  std::printf("  %zu Python files, %.2f MB, %zu lines (generated in %.2f s); best of %d runs\n", files.size(), mbytes,
              lines, Seconds(t0, t1), reps);

  // 1. tree-sitter parse only, 1 thread, sources in memory (copies made outside the clock).
  double parse_best = 1e300;
  double traverse_best = 1e300;  // one cursor walk over every named node of the parsed trees
  size_t syntax_errors = 0;
  {
    PythonParser parser;
    for (int r = 0; r < reps; ++r) {
      std::vector<std::string> copies = texts;
      std::vector<ParsedSource> parsed;
      parsed.reserve(copies.size());
      auto a = std::chrono::steady_clock::now();
      for (auto& s : copies) parsed.push_back(parser.Parse(std::move(s)));
      auto b = std::chrono::steady_clock::now();
      parse_best = std::min(parse_best, Seconds(a, b));
      size_t nodes = 0;
      for (const auto& p : parsed)
        if (p.tree)
          portkit::analyse::ForEachNamedNode(p.root(), [&](TSNode) {
            ++nodes;
            return true;
          });
      auto c = std::chrono::steady_clock::now();
      traverse_best = std::min(traverse_best, Seconds(b, c));
      if (nodes == 0) std::fprintf(stderr, "analyse_bench: no nodes\n");
      syntax_errors = 0;
      for (const auto& p : parsed) syntax_errors += p.has_error() || !p.tree;
    }
  }

  // 2. full torch_apis analysis, 1 and 2 threads.
  fs::path data_dir = portkit::FindDataDir();
  size_t findings_rows = 0;
  auto full = [&](int jobs, const char* mode) {
    double best = 1e300;
    for (int r = 0; r < reps; ++r) {
      fs::path out = work / ("out_" + std::string(mode) + "_j" + std::to_string(jobs) + "_" + std::to_string(r));
      portkit::Logger logger(nullptr, portkit::SystemClock());
      // Unlike the CLI (which leaves the trees to the OS at exit), the repeated in-process runs free
      // everything, and the time to free it is counted: a conservative figure.
      portkit::Context ctx{logger, portkit::SystemClock(), data_dir, jobs, /*free_memory_at_end=*/true};
      portkit::analyse::AnalyseOptions opt;
      opt.input = corpus;
      opt.output = out;
      opt.version = version;
      opt.mode = *portkit::analyse::AnalyseModeByName(mode);
      auto a = std::chrono::steady_clock::now();
      auto report = portkit::analyse::RunAnalyse(opt, ctx);
      portkit::Status st = report.ok() ? portkit::render::WriteAnalyseReports(*report, {"csv", "json"}, logger).status()
                                       : report.status();
      auto b = std::chrono::steady_clock::now();
      if (!st.ok()) {
        std::fprintf(stderr, "analyse_bench: RunAnalyse failed (%s, data dir %s):\n%s", st.message().c_str(),
                     data_dir.c_str(), logger.Contents().c_str());
        std::exit(1);
      }
      best = std::min(best, Seconds(a, b));
      if (findings_rows == 0) {
        for (const char* f : {"unsupported_api.csv", "unknown_api.csv", "api_precision_advice.csv",
                              "api_performance_advice.csv", "cuda_op_list.csv"}) {
          fs::path p = out / "corpus_analysis" / f;
          if (fs::exists(p)) findings_rows += CountLines(p) - 1;
        }
      }
      std::error_code ec;
      fs::remove_all(out, ec);
    }
    return best;
  };
  double full1 = full(1, "torch_apis");
  double full2 = full(2, "torch_apis");
  double third1 = full(1, "third_party");
  double affinity1 = full(1, "affinity_apis");

  // 3. CPython ast.parse peer.
  size_t py_bytes = 0;
  double py_secs = PythonAstSeconds(corpus, reps, &py_bytes);

  const double parse_mbs = mbytes / parse_best;
  const double full1_mbs = mbytes / full1;
  const double full2_mbs = mbytes / full2;
  std::printf("  tree-sitter syntax errors: %zu files; report rows (all CSVs): %zu; data dir %s\n\n", syntax_errors,
              findings_rows, data_dir.c_str());

  std::printf("| %-48s | %8s | %-30s |\n", "what", "MB/s", "ratio");
  std::printf("|%s|%s|%s|\n", std::string(50, '-').c_str(), std::string(10, '-').c_str(), std::string(32, '-').c_str());
  auto row = [](const char* what, const std::string& mbs, const std::string& ratio) {
    std::printf("| %-48s | %8s | %-30s |\n", what, mbs.c_str(), ratio.c_str());
  };
  auto fmt = [](const char* f, double v) {
    char b[64];
    std::snprintf(b, sizeof b, f, v);
    return std::string(b);
  };
  row("tree-sitter parse only (PythonParser, 1 thread)", fmt("%.2f", parse_mbs), "1.00 (baseline)");
  const double limit_mbs = mbytes / (parse_best + traverse_best);
  row("limit: parse + one tree walk, nothing else", fmt("%.2f", limit_mbs),
      fmt("%.2f", limit_mbs / parse_mbs) + " of parse (any tree walk)");
  row("full torch_apis analysis, 1 thread", fmt("%.2f", full1_mbs),
      fmt("%.2f", full1_mbs / parse_mbs) + " of parse (goal >= 0.70)");
  row("full torch_apis analysis, 2 threads", fmt("%.2f", full2_mbs), fmt("%.2f", full2_mbs / parse_mbs) + " of parse");
  row("speed-up 2 threads / 1 thread", "-", fmt("%.2fx", full2_mbs / full1_mbs));
  row("third_party analysis, 1 thread", fmt("%.2f", mbytes / third1),
      fmt("%.2f", mbytes / third1 / parse_mbs) + " of parse (goal >= 0.50)");
  row("affinity_apis analysis, 1 thread", fmt("%.2f", mbytes / affinity1),
      fmt("%.2f", mbytes / affinity1 / parse_mbs) + " of parse (goal >= 0.50)");
  if (py_secs > 0) {
    double py_mbs = static_cast<double>(py_bytes) / 1e6 / py_secs;
    row("CPython ast.parse (peer, 1 thread)", fmt("%.2f", py_mbs), fmt("%.2f", py_mbs / parse_mbs) + " of parse");
  } else {
    row("CPython ast.parse (peer, 1 thread)", "n/a", "n/a (python3 missing)");
  }
  std::printf("\nfull(1 thread) / parse-only = %.2f -> goal >= 0.70 %s\n", full1_mbs / parse_mbs,
              full1_mbs / parse_mbs >= 0.70 ? "MET" : "NOT MET");

  if (keep) {
    std::printf("corpus kept in %s\n", work.c_str());
  } else {
    std::error_code ec;
    fs::remove_all(work, ec);
  }
  return 0;
}
