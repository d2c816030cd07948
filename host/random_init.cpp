#include "host/random_init.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <numbers>
#include <vector>

#include "host/parallel_for.h"

namespace mlpc::runtime {
namespace {

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

uint64_t stream_of(uint64_t seed, const std::string& name) {
  uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a
  for (unsigned char c : name) h = (h ^ c) * 0x100000001b3ull;
  return splitmix64(seed ^ h);
}

// Uniform in (0, 1), from the top 53 bits.
double uniform(uint64_t stream, uint64_t i) {
  return (static_cast<double>(splitmix64(stream + 2 * i) >> 11) + 0.5) * 0x1.0p-53;
}

// The fan-in of a param: a [out, in] weight's in; for a bias [out], the in of a weight [out, in]
// in the same graph (the layer it belongs to), else out.
int64_t fan_in(const ir::Graph& g, const ir::Node& p) {
  if (p.type.shape.rank() >= 2) return p.type.shape.last();
  for (const ir::Node& n : g.nodes)
    if (n.op == ir::Op::Param && n.type.shape.rank() == 2 &&
        n.type.shape.dims[0] == p.type.shape.dims[0])
      return n.type.shape.dims[1];
  return p.type.shape.dims[0];
}

// What a norm starts with in PyTorch (nn.RMSNorm / nn.LayerNorm): weight 1, bias 0. Seeded
// like a Linear's, a norm weight (~0.03) would shrink everything after it, and a check would
// not see the layers behind it.
std::optional<double> norm_init(const ir::Graph& g, ir::NodeId id) {
  for (const ir::Node& n : g.nodes) {
    if (n.op != ir::Op::RmsNorm && n.op != ir::Op::LayerNorm) continue;
    if (n.operands.size() > 1 && n.operands[1] == id) return 1.0;
    if (n.operands.size() > 2 && n.operands[2] == id) return 0.0;
  }
  return std::nullopt;
}

}  // namespace

std::vector<uint8_t> random_bytes(ir::DType dtype, int64_t count, double scale, uint64_t seed) {
  const int64_t size = static_cast<int64_t>(ir::dtype_size(dtype));
  std::vector<uint8_t> out(static_cast<size_t>(std::max<int64_t>(count, 0) * size));
  constexpr int64_t kSlice = int64_t{1} << 18;  // values per task
  const int64_t slices = (count + kSlice - 1) / kSlice;
  const uint64_t stream = splitmix64(seed);
  const auto f_scale = static_cast<float>(scale);
  parallel_for(slices, [&](int64_t s) {
    const int64_t begin = s * kSlice, n = std::min(kSlice, count - begin);
    std::vector<float> v(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {  // top 24 bits: uniform in [0, 1) with float's precision
      const auto u = static_cast<float>(splitmix64(stream + static_cast<uint64_t>(begin + i)) >> 40) *
                     0x1.0p-24f;
      v[static_cast<size_t>(i)] = f_scale * (2.0f * u - 1.0f);
    }
    encode_floats(dtype, v.data(), n, out.data() + begin * size);
  });
  return out;
}

std::vector<int64_t> concrete_dims(const ir::Shape& s, int64_t batch) {
  std::vector<int64_t> d = s.dims;
  for (int64_t& x : d)
    if (x == ir::kBatchDim) x = batch;
  return d;
}

HostTensor random_param(const ir::Graph& g, ir::NodeId id, uint64_t seed) {
  const ir::Node& p = g.node(id);
  HostTensor t{p.type.dtype, concrete_dims(p.type.shape, 1), {}};
  t.data.resize(t.numel());
  if (std::optional<double> v = norm_init(g, id)) {
    std::fill(t.data.begin(), t.data.end(), *v);
    return t;
  }
  double bound = 1.0 / std::sqrt(static_cast<double>(fan_in(g, p)));
  uint64_t stream = stream_of(seed, p.name);
  for (int64_t i = 0; i < t.numel(); ++i)
    t.data[i] = round_to(t.dtype, bound * (2.0 * uniform(stream, i) - 1.0));
  return t;
}

HostTensor random_input(const ir::Graph& g, ir::NodeId id, int64_t batch, uint64_t seed) {
  const ir::Node& x = g.node(id);
  HostTensor t{x.type.dtype, concrete_dims(x.type.shape, batch), {}};
  t.data.resize(t.numel());
  uint64_t stream = stream_of(seed, x.name);
  for (int64_t i = 0; i < t.numel(); ++i) {  // Box-Muller, one normal per counter value
    double r = std::sqrt(-2.0 * std::log(uniform(stream, i)));
    t.data[i] = round_to(t.dtype, r * std::cos(2.0 * std::numbers::pi * uniform(stream, i + (1ull << 40))));
  }
  return t;
}

}  // namespace mlpc::runtime
