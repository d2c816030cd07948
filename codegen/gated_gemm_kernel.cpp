#include "codegen/gated_gemm_kernel.h"

#include <fmt/format.h>

#include <algorithm>

#include "ir/error.h"

namespace mlpc::codegen {
namespace {

constexpr int kStageBytes = (kGatedTileRows + 2 * kGatedTileRows) * kGatedTileK * 2;
constexpr int kOutBytes = kGatedTileRows * kGatedTileRows * 2;  // both warpgroups' results

// The kernel, with $-tokens filled in by generate_gated_gemm_source. Written once by hand; the
// only generated parts are the types, the ring depth, the combine function and the WGMMA
// operand list (128 accumulator registers, too long to write out).
// No #include: the kernel needs no header (its one conversion, two floats to a packed pair, is a
// cvt instruction), and parsing cuda_bf16.h/cuda_fp16.h cost ~20 ms of NVRTC's front end on the
// critical path of a cold -O2 compile, which waits for this kernel's build.
constexpr const char* kTemplate = R"(// mlpc gated GEMM: y = combine(x . wg^T, x . wu^T), sm_90a (TMA + WGMMA)

struct __align__(64) MlpcTmaDesc { unsigned long long v[16]; };

$HELPERS
__device__ __forceinline__ float mlpc_gate_combine(float g, float u) {
  $COMBINE
}

namespace {

constexpr int kStages = $STAGES;
constexpr int kRows = $ROWS;                      // tile rows of x = tile columns of y
constexpr int kK = $TILEK;                        // k per stage
constexpr int kABytes = kRows * kK * 2;           // x slice
constexpr int kBBytes = 2 * kRows * kK * 2;       // wg slice, then wu slice
constexpr int kStageBytes = kABytes + kBBytes;
constexpr int kOutRows = $OUTROWS;                // rows of y per warpgroup and store box
constexpr int kOutBoxBytes = kOutRows * 64 * 2;   // 64 columns: 128-byte swizzle rows
constexpr int kGroupM = $GROUPM;
constexpr unsigned kConsumerWarps = 8;            // arrivals that free a stage

__device__ __forceinline__ unsigned mlpc_smem_addr(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void mlpc_mbar_init(unsigned bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void mlpc_mbar_expect_tx(unsigned bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes)
               : "memory");
}
__device__ __forceinline__ void mlpc_mbar_arrive(unsigned bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
}
__device__ __forceinline__ void mlpc_mbar_wait(unsigned bar, unsigned parity) {
  unsigned done = 0;
  do {
    asm volatile(
        "{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
        " selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(bar), "r"(parity)
        : "memory");
  } while (!done);
}
// One box of a 2-D tensor (inner coordinate c0, outer c1) into shared memory at dst; completes
// its bytes on the mbarrier.
__device__ __forceinline__ void mlpc_tma_load(unsigned dst, const MlpcTmaDesc* desc, int c0, int c1,
                                              unsigned bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%2, %3}], [%4];" ::"r"(dst),
      "l"(reinterpret_cast<unsigned long long>(desc)), "r"(c0), "r"(c1), "r"(bar)
      : "memory");
}
// WGMMA shared-memory descriptor of a K-major operand in 128-byte swizzle: rows of 128 bytes,
// 8-row (1024-byte) swizzle atoms; the tile base is 1024-byte aligned, so a k offset inside
// the row is a plain byte offset of the start address.
__device__ __forceinline__ unsigned long long mlpc_wgmma_desc(unsigned addr) {
  return static_cast<unsigned long long>((addr & 0x3FFFF) >> 4) | (1ull << 16) | (64ull << 32) |
         (1ull << 62);
}
__device__ __forceinline__ void mlpc_wgmma(float* d, unsigned long long a, unsigned long long b,
                                           int accumulate) {
  asm volatile(
      "{\n .reg .pred p;\n setp.ne.b32 p, %130, 0;\n"
      " wgmma.mma_async.sync.aligned.m64n256k16.f32.$WGTYPE.$WGTYPE\n"
      " {$DREGS},\n %128, %129, p, 1, 1, 0, 0;\n}\n"
      : $DOPERANDS
      : "l"(a), "l"(b), "r"(accumulate));
}
// Keeps the compiler from moving accesses to the accumulators across the asynchronous WGMMAs.
__device__ __forceinline__ void mlpc_fence_acc(float* d) {
#pragma unroll
  for (int i = 0; i < 128; ++i) asm volatile("" : "+f"(d[i])::"memory");
}
__device__ __forceinline__ void mlpc_tile_coords(int tile, int tiles_m, int tiles_n, int& mb,
                                                 int& nb) {
  const int per_group = kGroupM * tiles_n;
  const int first = tile / per_group * kGroupM;
  const int size = min(kGroupM, tiles_m - first);
  const int r = tile % per_group;
  mb = first + r % size;
  nb = r / size;
}
// Two results as one 4-byte shared-memory store.
__device__ __forceinline__ void mlpc_store2_shared(unsigned addr, float a, float b) {
  unsigned v;  // a in the low half, b in the high half, each rounded to nearest even
  asm("cvt.rn.$PAIR.f32 %0, %2, %1;" : "=r"(v) : "f"(a), "f"(b));
  asm volatile("st.shared.b32 [%0], %1;" ::"r"(addr), "r"(v) : "memory");
}
// One box of y from shared memory at src to (inner c0, outer c1); clipped at the edges.
__device__ __forceinline__ void mlpc_tma_store(const MlpcTmaDesc* desc, int c0, int c1,
                                               unsigned src) {
  asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%1, %2}], [%3];" ::"l"(
                   reinterpret_cast<unsigned long long>(desc)),
               "r"(c0), "r"(c1), "r"(src)
               : "memory");
}
// Named barrier of one consumer warpgroup (ids 1 and 2; 0 is __syncthreads).
__device__ __forceinline__ void mlpc_wg_sync(int c) {
  asm volatile("bar.sync %0, 128;" ::"r"(c + 1) : "memory");
}

}  // namespace

extern "C" __global__ void __launch_bounds__(384, 1)
$NAME(const __grid_constant__ MlpcTmaDesc tx, const __grid_constant__ MlpcTmaDesc tg,
      const __grid_constant__ MlpcTmaDesc tu, const __grid_constant__ MlpcTmaDesc ty, int rows,
      int n, int k) {
  extern __shared__ unsigned char mlpc_dyn_smem[];
  __shared__ __align__(8) unsigned long long bars[2 * kStages];
  const unsigned base = (mlpc_smem_addr(mlpc_dyn_smem) + 1023u) & ~1023u;
  const unsigned full0 = mlpc_smem_addr(&bars[0]);
  const unsigned empty0 = mlpc_smem_addr(&bars[kStages]);
  const int wg = threadIdx.x / 128, t = threadIdx.x % 128;
  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      mlpc_mbar_init(full0 + 8 * s, 1);
      mlpc_mbar_init(empty0 + 8 * s, kConsumerWarps);
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  const int tiles_m = (rows + kRows - 1) / kRows, tiles_n = (n + kRows - 1) / kRows;
  const int tiles = tiles_m * tiles_n, ktiles = (k + kK - 1) / kK;

  if (wg == 0) {  // producer: one thread issues every TMA load
    asm volatile("setmaxnreg.dec.sync.aligned.u32 40;");
    if (t != 0) return;
    int s = 0;
    unsigned phase = 0;
    for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
      int mb, nb;
      mlpc_tile_coords(tile, tiles_m, tiles_n, mb, nb);
      for (int kt = 0; kt < ktiles; ++kt) {
        mlpc_mbar_wait(empty0 + 8 * s, phase ^ 1);
        const unsigned full = full0 + 8 * s, a = base + s * kStageBytes, b = a + kABytes;
        mlpc_mbar_expect_tx(full, kStageBytes);
        mlpc_tma_load(a, &tx, kt * kK, mb * kRows, full);
        mlpc_tma_load(b, &tg, kt * kK, nb * kRows, full);
        mlpc_tma_load(b + kBBytes / 2, &tu, kt * kK, nb * kRows, full);
        if (++s == kStages) s = 0, phase ^= 1;
      }
    }
    return;
  }

  // consumers: warpgroup c owns rows [64c, 64c + 64) of each tile
  asm volatile("setmaxnreg.inc.sync.aligned.u32 232;");
  const int c = wg - 1, lane = t % 32;
  float d[128];
  int s = 0;
  unsigned phase = 0;
  for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    int mb, nb;
    mlpc_tile_coords(tile, tiles_m, tiles_n, mb, nb);
    int prev = -1;
    for (int kt = 0; kt < ktiles; ++kt) {
      mlpc_mbar_wait(full0 + 8 * s, phase);
      const unsigned a = base + s * kStageBytes + c * (64 * kK * 2);
      const unsigned b = base + s * kStageBytes + kABytes;
      mlpc_fence_acc(d);
      asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#pragma unroll
      for (int kk = 0; kk < kK / 16; ++kk)
        mlpc_wgmma(d, mlpc_wgmma_desc(a + kk * 32), mlpc_wgmma_desc(b + kk * 32), kt > 0 || kk > 0);
      asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
      // keep one k-slice in flight: the previous slice's WGMMAs are done, so its stage is free
      asm volatile("wgmma.wait_group.sync.aligned 1;" ::: "memory");
      mlpc_fence_acc(d);
      if (prev >= 0 && lane == 0) mlpc_mbar_arrive(empty0 + 8 * prev);
      prev = s;
      if (++s == kStages) s = 0, phase ^= 1;
    }
    asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
    mlpc_fence_acc(d);
    if (prev >= 0 && lane == 0) mlpc_mbar_arrive(empty0 + 8 * prev);

    // epilogue: fragment column j*8 + 2*(lane%4) (+1) of rows lane/4 and lane/4 + 8 of this
    // warp's 16; gate columns 0..127, up columns 128..255. Results go to this warpgroup's two
    // 64 x 64 boxes, 16-byte chunk index XOR row % 8 (the 128-byte swizzle the store expects).
    const unsigned out = base + kStages * kStageBytes + c * 2 * kOutBoxBytes;
    if (t == 0) asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
    mlpc_wg_sync(c);  // the previous tile's store has read the boxes
    const int r0 = (t / 32) * 16 + lane / 4;
#pragma unroll
    for (int j = 0; j < 16; ++j) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int r = r0 + 8 * h;
        const int g = 4 * j + 2 * h, u = 4 * (j + 16) + 2 * h;
        const float v0 = mlpc_gate_combine(d[g], d[u]);
        const float v1 = mlpc_gate_combine(d[g + 1], d[u + 1]);
        const unsigned chunk = static_cast<unsigned>((j % 8) ^ (r % 8));
        mlpc_store2_shared(out + (j / 8) * kOutBoxBytes + r * 128 + chunk * 16 + (lane % 4) * 4, v0, v1);
      }
    }
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");  // visible to the TMA unit
    mlpc_wg_sync(c);
    if (t == 0) {
      const int row = mb * kRows + c * kOutRows, col = nb * kRows;
      mlpc_tma_store(&ty, col, row, out);
      mlpc_tma_store(&ty, col + 64, row, out + kOutBoxBytes);
      asm volatile("cp.async.bulk.commit_group;" ::: "memory");
    }
  }
  if (t == 0) asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
}
)";

void replace_all(std::string& s, const std::string& token, const std::string& value) {
  for (size_t at = s.find(token); at != std::string::npos; at = s.find(token, at + value.size()))
    s.replace(at, token.size(), value);
}

}  // namespace

unsigned gated_gemm_grid(int64_t rows, int64_t n, int sm_count) {
  const int64_t tiles = ((rows + kGatedTileRows - 1) / kGatedTileRows) *
                        ((n + kGatedTileRows - 1) / kGatedTileRows);
  return static_cast<unsigned>(std::clamp<int64_t>(tiles, 1, std::max(sm_count, 1)));
}

int gated_gemm_smem_bytes(const GatedGemmConfig& config) {
  return config.stages * kStageBytes + kOutBytes + 1024;
}

std::string generate_gated_gemm_source(const std::string& name, ir::DType dtype,
                                       const std::string& helpers, const std::string& combine,
                                       const GatedGemmConfig& config) {
  if (dtype != ir::DType::BF16 && dtype != ir::DType::F16)
    throw Error(fmt::format("gated GEMM {}: {} operands (WGMMA takes bf16 or f16)", name,
                            ir::dtype_name(dtype)));
  if (config.stages < 2 || gated_gemm_smem_bytes(config) > 227 * 1024)
    throw Error(fmt::format("gated GEMM {}: {} stages do not fit in shared memory", name,
                            config.stages));
  const bool bf16 = dtype == ir::DType::BF16;
  std::string regs, operands;
  for (int i = 0; i < 128; ++i) {
    regs += fmt::format("{}%{}", i ? ", " : "", i);
    operands += fmt::format("{}\"+f\"(d[{}])", i ? ", " : "", i);
  }
  std::string s = kTemplate;
  replace_all(s, "$HELPERS", helpers);
  replace_all(s, "$COMBINE", combine);
  replace_all(s, "$STAGES", std::to_string(config.stages));
  replace_all(s, "$ROWS", std::to_string(kGatedTileRows));
  replace_all(s, "$TILEK", std::to_string(kGatedTileK));
  replace_all(s, "$GROUPM", std::to_string(kGatedGroupM));
  replace_all(s, "$OUTROWS", std::to_string(kGatedStoreRows));
  replace_all(s, "$WGTYPE", bf16 ? "bf16" : "f16");
  replace_all(s, "$DREGS", regs);
  replace_all(s, "$DOPERANDS", operands);
  replace_all(s, "$PAIR", bf16 ? "bf16x2" : "f16x2");
  replace_all(s, "$NAME", name);
  return s;
}

}  // namespace mlpc::codegen
