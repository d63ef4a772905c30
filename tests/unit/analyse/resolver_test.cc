// Name resolution and receiver typing: every import form, shadowing, star and relative imports,
// re-exports, decorators, base classes, typed receivers.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "analyse/module_summary.h"
#include "analyse/project_index.h"
#include "analyse/walker.h"

namespace portkit::analyse {
namespace {

struct Use {
  std::string file;
  uint32_t line;
  std::string name;
  bool operator<(const Use& o) const { return std::tie(file, line, name) < std::tie(o.file, o.line, o.name); }
};

class Recorder : public EventSink {
 public:
  Recorder(std::string file, std::set<Use>& out, std::set<Use>& unknown)
      : file_(std::move(file)), out_(out), unknown_(unknown) {}
  void OnCall(const CallEvent& ev) override {
    if (!ev.lookup.empty()) out_.insert({file_, StartLine(ev.node), ev.lookup.front()});
    if (ev.receiver_unknown) unknown_.insert({file_, StartLine(ev.node), std::string(ev.method)});
  }
  void OnAttribute(const AttributeEvent& ev) override { out_.insert({file_, StartLine(ev.node), ev.qname}); }
  void OnString(const StringEvent&) override {}

 private:
  std::string file_;
  std::set<Use>& out_;
  std::set<Use>& unknown_;
};

using Files = std::map<std::string, std::string>;

/// Analyses an in-memory project: path → source.
class Project {
 public:
  explicit Project(std::map<std::string, std::string> files, std::vector<std::string> module_self_methods = {}) {
    index_.SetModuleSelfMethods(std::move(module_self_methods));
    PythonParser parser;
    for (auto& [path, text] : files) {
      std::string mod = path.substr(0, path.size() - 3);
      std::replace(mod.begin(), mod.end(), '/', '.');
      bool pkg = false;
      if (mod.size() >= 8 && mod.compare(mod.size() - 8, 8, "__init__") == 0) {
        pkg = true;
        mod = mod.size() > 9 ? mod.substr(0, mod.size() - 9) : "";
      }
      parsed_[path] = parser.Parse(text);
      auto summary = std::make_unique<ModuleSummary>(SummariseModule(syn_, parsed_[path], mod, pkg));
      summaries_[path] = summary.get();
      index_.Add(std::move(summary));
    }
    index_.Freeze();
    for (auto& [path, parsed] : parsed_) {
      Recorder rec(path, uses_, unknown_);
      FileWalker(
          syn_, parsed, *summaries_[path], index_,
          [](const std::string& q) { return q == "torch.cdist" || q == "torch.randn"; }, rec)
          .Run();
    }
  }
  bool Has(const std::string& file, uint32_t line, const std::string& name) const {
    return uses_.count({file, line, name}) > 0;
  }
  bool AnyOnLine(const std::string& file, uint32_t line) const {
    for (const auto& u : uses_)
      if (u.file == file && u.line == line) return true;
    return false;
  }
  bool UnknownReceiver(const std::string& file, uint32_t line, const std::string& method) const {
    return unknown_.count({file, line, method}) > 0;
  }
  std::string Dump() const {
    std::string s;
    for (const auto& u : uses_) s += u.file + ":" + std::to_string(u.line) + " " + u.name + "\n";
    return s;
  }

 private:
  PySyntax syn_;
  std::map<std::string, ParsedSource> parsed_;
  std::map<std::string, ModuleSummary*> summaries_;
  ProjectIndex index_;
  std::set<Use> uses_, unknown_;
};

TEST(Resolver, TargetDeviceMethodReturnsTheModule) {
  Files files{{"m.py",
               "import torch\n"               // 1
               "m = torch.nn.Linear(2, 2)\n"  // 2
               "def f():\n"                   // 3
               "    a = m.xpu()\n"            // 4
               "    a.cuda()\n"}};            // 5
  Project with(files, {"xpu"});
  EXPECT_TRUE(with.Has("m.py", 5, "torch.nn.Linear.cuda")) << with.Dump();
  Project without(files);
  EXPECT_FALSE(without.Has("m.py", 5, "torch.nn.Linear.cuda")) << without.Dump();
}

TEST(Resolver, ImportForms) {
  Project p(Files{{"m.py",
                   "import torch\n"                               // 1
                   "import torch as t\n"                          // 2
                   "import torch.nn as nn\n"                      // 3
                   "from torch import nn as nn2\n"                // 4
                   "from torch.nn import functional as F\n"       // 5
                   "from torch.nn.functional import relu as r\n"  // 6
                   "import torch.nn.functional\n"                 // 7
                   "torch.cdist(a, b)\n"                          // 8
                   "t.cdist(a, b)\n"                              // 9
                   "nn.Linear(2, 2)\n"                            // 10
                   "nn2.Conv2d(1, 1, 3)\n"                        // 11
                   "F.gelu(x)\n"                                  // 12
                   "r(x)\n"                                       // 13
                   "torch.nn.functional.softplus(x)\n"}});        // 14
  EXPECT_TRUE(p.Has("m.py", 8, "torch.cdist")) << p.Dump();
  EXPECT_TRUE(p.Has("m.py", 9, "torch.cdist"));
  EXPECT_TRUE(p.Has("m.py", 10, "torch.nn.Linear"));
  EXPECT_TRUE(p.Has("m.py", 11, "torch.nn.Conv2d"));
  EXPECT_TRUE(p.Has("m.py", 12, "torch.nn.functional.gelu"));
  EXPECT_TRUE(p.Has("m.py", 13, "torch.nn.functional.relu"));
  EXPECT_TRUE(p.Has("m.py", 14, "torch.nn.functional.softplus"));
}

TEST(Resolver, ShadowingByParameterLocalLoopAndClassAttribute) {
  Project p(Files{{"s.py",
                   "import torch\n"                          // 1
                   "from torch.nn import functional as F\n"  // 2
                   "def f(torch):\n"                         // 3
                   "    return torch.cdist(a, b)\n"          // 4
                   "def g():\n"                              // 5
                   "    torch.cdist(a, b)\n"                 // 6: local assigned below → not torch
                   "    torch = None\n"                      // 7
                   "def h(items):\n"                         // 8
                   "    for F in items:\n"                   // 9
                   "        F.relu(x)\n"                     // 10
                   "class C:\n"                              // 11
                   "    torch = object()\n"                  // 12
                   "    def m(self):\n"                      // 13
                   "        return torch.cdist(a, b)\n"      // 14: class scope invisible → module torch
                   "def k():\n"                              // 15
                   "    return torch.cdist(a, b)\n"}});      // 16
  EXPECT_FALSE(p.AnyOnLine("s.py", 4)) << p.Dump();
  EXPECT_FALSE(p.AnyOnLine("s.py", 6));
  EXPECT_FALSE(p.AnyOnLine("s.py", 10));
  EXPECT_TRUE(p.Has("s.py", 14, "torch.cdist"));
  EXPECT_TRUE(p.Has("s.py", 16, "torch.cdist"));
}

TEST(Resolver, RelativeImportsReExportsAndStarImports) {
  Project p(Files{
      {"app/__init__.py", "from .impl import cdist_wrapper\n"},
      {"app/impl.py", "from torch import cdist as cdist_wrapper\nimport torch\n"},
      {"app/helpers.py", "import torch\ndef make():\n    return torch.randn(3)\n_private = 1\n"},
      {"app/star_all.py", "import torch.nn.functional as F\n__all__ = ['F']\nhidden = F\n"},
      {"app/star_noall.py", "from torch import var_mean\n_secret = var_mean\n"},
      {"app/pkg/__init__.py", ""},
      {"app/pkg/mod.py", "from torch import heaviside\n"},
      {"app/sub/__init__.py", ""},
      {"app/sub/deep.py",
       "from ..pkg import mod\n"          // 1
       "from .. import helpers\n"         // 2
       "from ..star_all import *\n"       // 3
       "from ..star_noall import *\n"     // 4
       "from app import cdist_wrapper\n"  // 5
       "mod.heaviside(x, y)\n"            // 6
       "helpers.make().cuda()\n"          // 7
       "F.relu(x)\n"                      // 8
       "var_mean(x)\n"                    // 9
       "cdist_wrapper(a, b)\n"            // 10
       "hidden(x)\n"                      // 11: not in __all__
       "_secret(x)\n"},                   // 12: private, no __all__
  });
  EXPECT_TRUE(p.Has("app/sub/deep.py", 6, "torch.heaviside")) << p.Dump();
  EXPECT_FALSE(p.AnyOnLine("app/sub/deep.py", 7));  // project function: return type not tracked
  EXPECT_TRUE(p.Has("app/sub/deep.py", 8, "torch.nn.functional.relu"));
  EXPECT_TRUE(p.Has("app/sub/deep.py", 9, "torch.var_mean"));
  EXPECT_TRUE(p.Has("app/sub/deep.py", 10, "torch.cdist"));
  EXPECT_FALSE(p.AnyOnLine("app/sub/deep.py", 11));
  EXPECT_FALSE(p.AnyOnLine("app/sub/deep.py", 12));
}

TEST(Resolver, ExternalStarImportUsesKnownNames) {
  Project p(Files{{"m.py", "from torch import *\ncdist(a, b)\nunknown_thing(a)\n"}});
  EXPECT_TRUE(p.Has("m.py", 2, "torch.cdist")) << p.Dump();
  EXPECT_FALSE(p.AnyOnLine("m.py", 3));
}

TEST(Resolver, DecoratorsAndBaseClasses) {
  Project p(Files{{"d.py",
                   "import torch\n"
                   "from torch import nn\n"
                   "@torch.jit.script\n"  // 3
                   "def f(x):\n"
                   "    return x\n"
                   "@torch.no_grad()\n"  // 6
                   "def g(x):\n"
                   "    return x\n"
                   "class Net(nn.Module):\n"}});  // 9
  EXPECT_TRUE(p.Has("d.py", 3, "torch.jit.script")) << p.Dump();
  EXPECT_TRUE(p.Has("d.py", 6, "torch.no_grad"));
  EXPECT_TRUE(p.Has("d.py", 9, "torch.nn.Module"));
}

TEST(Resolver, ReceiverTyping) {
  Project p(Files{{"r.py",
                   "import torch\n"                                         // 1
                   "import torch.nn as nn\n"                                // 2
                   "x = torch.randn(3)\n"                                   // 3
                   "x.cuda()\n"                                             // 4
                   "def typed(t: torch.Tensor):\n"                          // 5
                   "    t.pin_memory()\n"                                   // 6
                   "def untyped(y):\n"                                      // 7
                   "    y.cuda()\n"                                         // 8
                   "class Net(nn.Module):\n"                                // 9
                   "    def __init__(self):\n"                              // 10
                   "        super().__init__()\n"                           // 11
                   "        self.w = nn.Parameter(torch.zeros(2))\n"        // 12
                   "        self.register_buffer('buf', torch.zeros(1))\n"  // 13
                   "        self.fc = nn.Linear(2, 2)\n"                    // 14
                   "    def forward(self, x):\n"                            // 15
                   "        self.w.cuda()\n"                                // 16
                   "        self.buf.cuda()\n"                              // 17
                   "        self.fc.cuda()\n"                               // 18
                   "        x.pin_memory()\n"                               // 19
                   "        self.cuda()\n"                                  // 20
                   "        return self.fc(x).relu()\n"                     // 21
                   "net = Net()\n"                                          // 22
                   "net.half()\n"                                           // 23
                   "net(x).softmax(-1)\n"                                   // 24
                   "a, b = x.chunk(2)\n"                                    // 25
                   "a.view(-1)\n"}});                                       // 26
  EXPECT_TRUE(p.Has("r.py", 4, "torch.Tensor.cuda")) << p.Dump();
  EXPECT_TRUE(p.Has("r.py", 6, "torch.Tensor.pin_memory"));
  EXPECT_TRUE(p.UnknownReceiver("r.py", 8, "cuda"));
  EXPECT_TRUE(p.Has("r.py", 16, "torch.Tensor.cuda"));
  EXPECT_TRUE(p.Has("r.py", 17, "torch.Tensor.cuda"));
  EXPECT_TRUE(p.Has("r.py", 18, "torch.nn.Linear.cuda"));
  EXPECT_TRUE(p.Has("r.py", 19, "torch.Tensor.pin_memory"));
  EXPECT_TRUE(p.Has("r.py", 20, "torch.nn.Module.cuda"));
  EXPECT_TRUE(p.Has("r.py", 21, "torch.Tensor.relu"));
  EXPECT_TRUE(p.Has("r.py", 23, "torch.nn.Module.half"));
  EXPECT_TRUE(p.Has("r.py", 24, "torch.Tensor.softmax"));
  EXPECT_TRUE(p.Has("r.py", 26, "torch.Tensor.view"));
}

TEST(Resolver, ClassFromAnotherModuleKeepsItsTorchBaseAndAttributes) {
  Project p(Files{
      {"models/__init__.py", "from .net import Net\n"},
      {"models/net.py",
       "import torch.nn as nn\n"
       "class Base(nn.Module):\n    pass\n"
       "class Net(Base):\n"
       "    def __init__(self):\n        super().__init__()\n        self.head = nn.Linear(2, 2)\n"},
      {"train.py", "from models import Net\nm = Net()\nm.cuda()\nm.head.cuda()\n"},
  });
  EXPECT_TRUE(p.Has("train.py", 3, "torch.nn.Module.cuda")) << p.Dump();
  EXPECT_TRUE(p.Has("train.py", 4, "torch.nn.Linear.cuda"));
}

TEST(Resolver, ImportCycleDoesNotHang) {
  Project p(Files{{"a.py", "from b import x\n"}, {"b.py", "from a import x\nx()\n"}});
  EXPECT_FALSE(p.AnyOnLine("b.py", 2));
}

TEST(RelativeModule, Levels) {
  EXPECT_EQ(ResolveRelativeModule("app.sub.deep", false, 1, "x"), "app.sub.x");
  EXPECT_EQ(ResolveRelativeModule("app.sub.deep", false, 2, "pkg"), "app.pkg");
  EXPECT_EQ(ResolveRelativeModule("app.sub", true, 1, "deep"), "app.sub.deep");
  EXPECT_EQ(ResolveRelativeModule("app", true, 1, ""), "app");
  EXPECT_EQ(ResolveRelativeModule("m", false, 3, "x"), "");
}

TEST(Parser, FirstSyntaxErrorLocation) {
  PythonParser parser;
  ParsedSource src = parser.Parse("import torch\n\nx = max(a,, a)\ntorch.cdist(a, b)\n");
  ASSERT_TRUE(src.has_error());
  EXPECT_EQ(src.error_line, 3u);
  EXPECT_GE(src.error_col, 9u);
}

}  // namespace
}  // namespace portkit::analyse
