// A whole fp32 MLP (codegen/fused_mlp_spec.h) as one kernel on the CUDA cores, IEEE fp32
// throughout (fmaf accumulation, no TF32), for decode-sized batches where the per-layer plan's
// time is launches and memory round trips, not FLOPs.
//
// Why clusters: one block per row tile would read every weight (a 256-wide layer is 256 KB)
// serially and alone. Instead each layer is spread over a thread-block cluster (sm_90): block q
// of the cluster computes its slice of every layer's columns for all rows of the cluster's tile,
// reading only its slice of each weight (from L2, once), and stores those outputs into the
// shared memory of every block of the cluster (distributed shared memory), so after one cluster
// barrier each block holds the whole layer output as the next layer's input. Hidden activations
// never leave the chip; tiles are independent, so there is no grid-wide barrier, no counter to
// reset and no co-residency to assume: any number of rows runs, as clusters of one tile each.
// A grid barrier over global memory (the portable alternative, which would also run on sm_80)
// costs a round trip through L2 per layer where the cluster barrier is on chip.
//
// Shape: warp w of block q owns columns (w * cluster + q) * C .. + C - 1 of every layer (C =
// 32 / rows_per_tile) and computes their rows_per_tile x C outputs; each lane sums its 16-byte
// chunks of K (lane, lane + 32, ...) for all 32 outputs, then the warp halves the 32 sums five
// times across lanes, leaving lane l the whole sum of output l. At the start every block copies
// its slice of every layer's weights into shared memory with cp.async, a group per layer, so all
// of them are in flight at once and a layer waits only for its own (weights loaded into
// registers instead had their loads moved past the cluster barrier by ptxas, one memory round
// trip per layer). The layer's input and output alternate between two shared-memory buffers:
// the barrier that publishes a layer's output also tells that every block is done reading the
// buffer the next layer overwrites.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "codegen/fused_mlp_spec.h"
#include "codegen/plan.h"

namespace mlpc::codegen {

// Blocks a cluster may have without opting in (cudaFuncAttributeNonPortableClusterSizeAllowed),
// and with it on sm_90.
inline constexpr int kPortableClusterSize = 8;
inline constexpr int kMaxClusterSize = 16;
// The shared memory a block may opt in to on sm_90: x's rows, a hidden layer's rows and every
// layer's weight slice must fit.
inline constexpr int64_t kFusedMlpSimtMaxSmemBytes = 227 * 1024;
// Layers are unrolled into the kernel: NVRTC's build time grows with each.
inline constexpr size_t kFusedMlpSimtMaxLayers = 16;

struct FusedMlpSimtConfig {
  int rows_per_tile = 8;  // 4, 8 or 16: rows x columns of a warp's outputs is 32
  int warps = 4;          // per block: 2, 4 or 8
  bool operator==(const FusedMlpSimtConfig&) const = default;
};

// Whether this kernel computes `spec` on `arch` ("sm_90"); if not, why (in *why_not): the dtype
// is not f32, a width is not a multiple of 4, no layers or more than kFusedMlpSimtMaxLayers, an
// activation it has no expression for, a residual whose width is not x's, a layer wider than
// kMaxClusterSize blocks' columns (256 by default), more than kFusedMlpSimtMaxSmemBytes of shared
// memory, or an arch before sm_90 (no clusters). Rows never refuse: any count runs.
bool fused_mlp_simt_fits(const FusedMlpSpec& spec, std::string_view arch,
                         std::string* why_not = nullptr, const FusedMlpSimtConfig& config = {});

// The kernel `name` for `spec` (nullopt where fused_mlp_simt_fits refuses it on sm_90). Its
// inputs and output are numbered as its parameters (x 0, then each layer's weight and bias, y
// last): the plan that adds it renumbers them to its buffers. ir_nodes are the caller's too.
std::optional<KernelStep> generate_fused_mlp_simt_kernel(const FusedMlpSpec& spec,
                                                         const std::string& name,
                                                         const FusedMlpSimtConfig& config = {});

// A cluster of f.cluster blocks per tile of rows_per_tile rows of the output's `numel` elements
// (its rows: numel / k.row_len); the cluster dims are compiled into the kernel, and it takes
// f.smem_bytes of dynamic shared memory.
LaunchDims launch_dims(const FusedMlpSimt& f, const KernelStep& k, int64_t numel);

}  // namespace mlpc::codegen
