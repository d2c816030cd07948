#include "compiler/levels.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <initializer_list>

#include "ir/error.h"

namespace mlpc {
namespace {

void check_choice(const char* what, const std::string& v, std::initializer_list<const char*> ok) {
  if (v.empty()) return;
  for (const char* o : ok)
    if (v == o) return;
  throw Error(fmt::format("{} '{}': expected one of {}", what, v, fmt::join(ok, ", ")));
}

}  // namespace

CompileOptions options_for_level(int level, const LevelOverrides& ov) {
  if (level < 0 || level > 2)
    throw Error(fmt::format("optimization level {}: expected 0, 1 or 2", level));
  check_choice("merge_gemms", ov.merge_gemms, {"auto", "on", "off"});
  check_choice("small_gemms", ov.small_gemms, {"auto", "on", "off", "mma"});
  check_choice("gated_gemms", ov.gated_gemms, {"auto", "on", "off", "mma"});
  check_choice("fp32_gemms", ov.fp32_gemms, {"auto", "ieee", "tf32x3"});
  check_choice("transposed_x", ov.transposed_x, {"auto", "on", "off"});
  check_choice("fused_mlp", ov.fused_mlp, {"auto", "on", "off"});
  const bool fusion = !ov.no_fusion && level >= 1;
  CompileOptions o{.fusion = fusion, .epilogues = fusion && level >= 2};
  const std::string level_default = level >= 2 ? "auto" : "off";
  auto pick = [&](const std::string& asked) { return asked.empty() ? level_default : asked; };
  const std::string merge = pick(ov.merge_gemms);
  o.merge_gemms = merge == "on"     ? MergeGemms::On
                  : merge == "auto" ? MergeGemms::Measure
                                    : MergeGemms::Off;
  const std::string small = pick(ov.small_gemms);
  o.small_gemms = small == "on"     ? SmallGemms::On
                  : small == "auto" ? SmallGemms::Measure
                  : small == "mma"  ? SmallGemms::Mma
                                    : SmallGemms::Off;
  const std::string gated = pick(ov.gated_gemms);
  o.gated_gemms = gated == "on"     ? GatedGemms::On
                  : gated == "auto" ? GatedGemms::Measure
                  : gated == "mma"  ? GatedGemms::Mma
                                    : GatedGemms::Off;
  if (!fusion) o.gated_gemms = GatedGemms::Off;  // eager: one kernel per op
  // Never a level's default: 3xTF32 changes fp32 results (codegen/tf32x3.h), so it is asked for.
  const std::string fp32 = ov.fp32_gemms.empty() ? "ieee" : ov.fp32_gemms;
  o.fp32_gemms = fp32 == "tf32x3" ? Fp32Gemms::Tf32x3
                 : fp32 == "auto" ? Fp32Gemms::Measure
                                  : Fp32Gemms::Ieee;
  if (!fusion) o.fp32_gemms = Fp32Gemms::Ieee;  // eager: PyTorch's eager GEMMs
  const std::string transposed = pick(ov.transposed_x);
  o.transposed_x = transposed == "on"     ? TransposedX::On
                   : transposed == "auto" ? TransposedX::Measure
                                          : TransposedX::Off;
  if (!fusion) o.transposed_x = TransposedX::Off;  // eager: PyTorch's layouts
  const std::string fused_mlp = pick(ov.fused_mlp);
  o.fused_mlps = fused_mlp == "on"     ? FusedMlps::On
                 : fused_mlp == "auto" ? FusedMlps::Measure
                                       : FusedMlps::Off;
  if (!fusion) o.fused_mlps = FusedMlps::Off;  // eager: one kernel per op
  return o;
}

}  // namespace mlpc
