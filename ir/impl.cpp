#include "ir/impl.h"

#include <array>
#include <utility>

namespace mlpc::ir {
namespace {

constexpr std::array<std::pair<Impl, std::string_view>, 10> kNames = {{
    {Impl::Auto, "auto"},
    {Impl::Cublaslt, "cublaslt"},
    {Impl::CublasltXt, "cublaslt_xt"},
    {Impl::CublasltXtWt, "cublaslt_xt_wt"},
    {Impl::Tf32x3, "tf32x3"},
    {Impl::Simt, "simt"},
    {Impl::Mma, "mma"},
    {Impl::GatedWgmma, "gated_wgmma"},
    {Impl::GatedMma, "gated_mma"},
    {Impl::FusedMlp, "fused_mlp"},
}};

}  // namespace

std::string_view impl_name(Impl impl) {
  for (const auto& [i, name] : kNames)
    if (i == impl) return name;
  return "auto";
}

std::optional<Impl> parse_impl(std::string_view name) {
  for (const auto& [i, n] : kNames)
    if (n == name) return i;
  return std::nullopt;
}

}  // namespace mlpc::ir
