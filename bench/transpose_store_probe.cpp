// How fast a pointwise kernel can store its result transposed (codegen/transposed_x_plan.h: the
// GELU kernels of mlp3 writing h as [N, rows] for an SGEMM that reads it faster so), against the
// same kernel storing row-major: y = gelu(x) over f32 [ROWS, N], the transposed store at several
// tile heights, each output checked bit for bit against the row-major one transposed.
// Usage: transpose_store_probe [ROWS,N,K ...]   (K unused; default: mlp3's [8192, 4096])
#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <vector>

#include "bench/probe_main.h"
#include "codegen/pointwise_kernel.h"
#include "ir/parser.h"
#include "passes/pipeline.h"
#include "runtime/device/device.h"

using namespace mlpc;

namespace {

void probe(const bench::Shape& s, runtime::GemmBench&, int) {
  const ir::Graph g =
      passes::run_pipeline(ir::parse(fmt::format("func @p(%x: f32[M, {0}]) -> f32[M, {0}] {{\n"
                                                 "  %y = gelu %x : f32[M, {0}]\n  return %y\n}}\n",
                                                 s.n),
                                     "probe.mlp"),
                           {})
          .graph;
  const auto region = std::find_if(g.nodes.begin(), g.nodes.end(), [](const ir::Node& n) {
    return n.op == ir::Op::FusedPointwise;
  });
  MLPC_ASSERT(region != g.nodes.end(), "no fused region");
  const long long n = static_cast<long long>(s.rows) * s.n;
  const size_t bytes = static_cast<size_t>(n) * sizeof(float);
  std::vector<float> host(static_cast<size_t>(n));
  std::mt19937 rng(5);
  std::normal_distribution<float> normal;
  for (float& v : host) v = normal(rng);
  void *x, *y;
  MLPC_CUDA(cudaMalloc(&x, bytes));
  MLPC_CUDA(cudaMalloc(&y, bytes));
  MLPC_CUDA(cudaMemcpy(x, host.data(), bytes, cudaMemcpyHostToDevice));
  const std::string arch = runtime::device_arch();

  // time and output of one kernel variant
  auto run = [&](const codegen::KernelStep& k, std::vector<float>* out) {
    const bench::BuiltKernel built(k.source, k.name, arch);
    const codegen::LaunchDims d =
        codegen::launch_dims(std::get<codegen::Elementwise>(k.kind), k, n);
    void* args[] = {&x, &y, const_cast<long long*>(&n)};
    auto launch = [&] {
      MLPC_CUDA(cudaLaunchKernel(built.func(), dim3(d.grid), dim3(d.block), args, 0, nullptr));
    };
    *out = bench::output_of_one_launch<float>(launch, y, static_cast<size_t>(n));
    cudaFuncAttributes attr{};
    MLPC_CUDA(cudaFuncGetAttributes(&attr, built.func()));
    int blocks = 0;
    MLPC_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, built.func(),
                                                            static_cast<int>(d.block), 0));
    fmt::print("    ({} threads a block, {} registers, {} blocks per SM)\n", d.block, attr.numRegs,
               blocks);
    return bench::median_launch_us(launch);
  };
  std::vector<float> row_major, transposed;
  const double base = run(codegen::generate_pointwise_kernel(g, *region), &row_major);
  fmt::print("gelu f32 [{}, {}]: row-major store {:.1f} us ({:.2f} TB/s)\n", s.rows, s.n, base,
             2.0 * bytes / base / 1e6);
  const codegen::TransposeTile tiles[] = {{32, 1}, {8, 4}, {16, 4}, {32, 4}, {64, 4}};
  // The generated tile order walks a row of tiles first (consecutive blocks read the same rows);
  // "columns first" rewrites it so consecutive blocks write the same output rows instead.
  const std::string row_order = "r0 = t / kColTiles * kRows, c0 = t % kColTiles * kCols;";
  const std::string column_order =
      "r0 = t % ((rows + kRows - 1) / kRows) * kRows, c0 = t / ((rows + kRows - 1) / kRows) * "
      "kCols;";
  for (const codegen::TransposeTile tile : tiles) {
    for (bool columns_first : {false, true}) {
      codegen::KernelStep k = codegen::generate_pointwise_kernel(
          g, *region, {.store = codegen::Store::Transposed, .transposed_tile = tile});
      if (columns_first) {
        const size_t at = k.source.find(row_order);
        MLPC_ASSERT(at != std::string::npos, "tile order not found in the kernel");
        k.source.replace(at, row_order.size(), column_order);
      }
      const double us = run(k, &transposed);
      size_t wrong = 0;
      for (long long r = 0; r < s.rows; ++r)
        for (long long c = 0; c < s.n; ++c)
          wrong += std::memcmp(&row_major[r * s.n + c], &transposed[c * s.rows + r], 4) != 0;
      fmt::print(
          "  transposed, tiles of {:3} x {:3}, {}: {:.1f} us ({:.2f} TB/s, {:.2f}x "
          "row-major), {} elements differ\n",
          tile.rows, tile.cols(), columns_first ? "columns first" : "rows first   ", us,
          2.0 * bytes / us / 1e6, us / base, wrong);
    }
  }
  cudaFree(x);
  cudaFree(y);
}

}  // namespace

int main(int argc, char** argv) {
  return bench::probe_main(argc, argv, "transpose_store_probe", {{8192, 4096, 0}}, probe);
}
