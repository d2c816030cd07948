// Codegen's side of a whole MLP in one kernel: the spec a chain of matmuls computes, its kernel
// (tensor-core mma.sync for f16 and bf16, CUDA-core clusters for f32), the fused-MLP rewrite
// sites kernel selection decides over, and the lowering of a fused.mlp region.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "codegen/fused_mlp_spec.h"
#include "codegen/plan.h"
#include "codegen/rewrite_site.h"
#include "ir/graph.h"
#include "passes/fuse_mlp.h"

namespace mlpc::codegen {

// What `layers` of `g` (a chain: passes/fuse_mlp.h) compute.
FusedMlpSpec fused_mlp_spec(const ir::Graph& g, const std::vector<passes::MlpLayer>& layers);

// Whether a fused-MLP kernel (by dtype) computes `spec`; if not, why, in `why_not`.
bool fused_mlp_kernel_fits(const FusedMlpSpec& spec, std::string* why_not = nullptr);

// The kernel `symbol` for `spec`, or nullopt with the reason in `why_not`. Its inputs and output
// are the caller's to set: x, then each layer's weight and bias, then y.
std::optional<KernelStep> generate_fused_mlp_kernel(const FusedMlpSpec& spec,
                                                    const std::string& symbol,
                                                    std::string* why_not = nullptr);

// The kernel of fused.mlp region `n`, reading `operand_buffers` (its operands', in order) and
// writing `output`.
KernelStep lower_fused_mlp(const ir::Node& n, const std::vector<int>& operand_buffers, int output);

// Each chain of `g` (passes::find_mlp_chains) cut into the longest runs of two or more layers
// the kernel takes, a site each: its option is one kernel for the run's layers in place of their
// steps. The record's detail names the layers it takes and why the run stops there.
void apply_fused_mlps(Plan& plan, const ir::Graph& g, const Lowering& lowering);

}  // namespace mlpc::codegen
