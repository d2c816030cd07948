#include "codegen/gated_gemm_kernel.h"

#include <fmt/format.h>

#include <algorithm>

#include "ir/error.h"

namespace mlpc::codegen {
namespace {

constexpr int kStageBytes = (kGatedTileRows + 2 * kGatedTileRows) * kGatedTileK * 2;
constexpr int kOutBytes = kGatedTileRows * kGatedTileRows * 2;  // one 16-bit [128, 128] tile

// The kernel, with $-tokens filled in by generate_gated_gemm_source. Written once by hand; the
// only generated parts are the types, the ring depth, the combine function and the WGMMA
// operand list (128 accumulator registers, too long to write out).
// No #include: the kernel needs no header (its one conversion, two floats to a packed pair, is a
// cvt instruction), and parsing cuda_bf16.h/cuda_fp16.h lengthens NVRTC's front end on the
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
constexpr unsigned kConsumerThreads = 256;
constexpr int kTileBytes = kRows * kRows * 2;     // a 16-bit [kRows, kRows] tile in 4 store boxes
// Epilogue workers: the producer warpgroup's warps 1-3 combine g and u, which the consumers
// hand over through shared memory as 16-bit values, while the consumers go on to the next tile.
// A block's last tile has no next tile to overlap: its consumers combine it themselves from the
// same shared-memory copy, 256 threads instead of 96, which comes close to combining in
// registers (docs/benchmarks.md). A second, unrolled register epilogue in the same kernel would
// lengthen NVRTC's build by a fifth, on the critical path of a cold compile.
// Every thread arrives on the hand-over barriers (raw_full, raw_empty), so each one's shared-
// memory writes are ordered before the other side's accesses by its own arrive.
constexpr bool kWorkers = $WORKERS;
constexpr int kWorkerThreads = 96;
constexpr int kCounterFloats = $COUNTERS;         // the workspace's tail-tile counters
// Tail tiles split along k (GatedGemmConfig::split_tail). Off where this kernel's K never splits
// (gated_gemm_max_splits): the partial-sum code is left out, and the build is shorter.
constexpr bool kSplitTail = $SPLITTAIL;
// Blocks per cluster, along M (GatedGemmConfig::cluster_m): the blocks of a cluster work on
// tiles of the same columns in adjacent row blocks, in step; each loads its own x rows and one
// part of the weight slice, which TMA multicasts to every block of the cluster.
constexpr int kCluster = $CLUSTER;

__device__ __forceinline__ int mlpc_cta_rank() {
  if (kCluster == 1) return 0;
  unsigned r;
  asm("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return static_cast<int>(r);
}

// A cluster's work units (a unit names a cluster tile: kCluster tiles of the same columns, one
// per block): whole tiles c, c + clusters, ... (c the cluster's index), then, when the last round
// would leave most blocks idle, one k-range of a tail tile (each tail tile split into `splits`
// ranges, one per block, at most max_splits: the last split to finish reads the others' partial
// sums, so more splits cost it more reads).
struct MlpcUnit {
  int tile, k0, k1, split, splits;
};
struct MlpcWork {
  int tiles, ktiles, splits, tail_first;
  __device__ MlpcWork(int tiles_, int ktiles_, int max_splits) : tiles(tiles_), ktiles(ktiles_) {
    const int clusters = gridDim.x / kCluster;
    const int tail = tiles % clusters;
    splits = tail ? min(clusters / tail, max_splits) : 1;
    if (splits < 2) splits = 1;
    tail_first = splits > 1 ? tiles - tail : tiles;
  }
  __device__ bool unit(int i, MlpcUnit& u) const {
    const int t = blockIdx.x / kCluster + i * (gridDim.x / kCluster);
    if (t < tail_first) {
      u = {t, 0, ktiles, 0, 1};
      return true;
    }
    const int v = t - tail_first;  // the cluster's index in the round after the whole tiles
    if (splits == 1 || v >= (tiles - tail_first) * splits) return false;
    u.tile = tail_first + v / splits;
    u.split = v % splits;
    u.splits = splits;
    u.k0 = u.split * ktiles / splits;
    u.k1 = (u.split + 1) * ktiles / splits;
    return true;
  }
  // Where split `split` of this block's tail tile keeps its partial sums in the workspace.
  __device__ int slot(const MlpcUnit& u, int split) const {
    return ((u.tile - tail_first) * splits + split) * kCluster + mlpc_cta_rank();
  }
  // This block's tail tile's counter of finished splits.
  __device__ int counter(const MlpcUnit& u) const {
    return (u.tile - tail_first) * kCluster + mlpc_cta_rank();
  }
};

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
// The same box into shared memory at dst of every block of the cluster, completing its bytes on
// each one's mbarrier at bar (the same offsets in every block).
__device__ __forceinline__ void mlpc_tma_load_all(unsigned dst, const MlpcTmaDesc* desc, int c0,
                                                  int c1, unsigned bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
      ".multicast::cluster [%0], [%1, {%2, %3}], [%4], %5;" ::"r"(dst),
      "l"(reinterpret_cast<unsigned long long>(desc)), "r"(c0), "r"(c1), "r"(bar),
      "h"(static_cast<unsigned short>((1u << kCluster) - 1))
      : "memory");
}
// Frees a stage: arrives on its empty barrier in every block of the cluster, since each block's
// producer writes a part of the stage in all of them.
__device__ __forceinline__ void mlpc_release_stage(unsigned bar) {
#pragma unroll
  for (int r = 0; r < kCluster; ++r) {
    if (kCluster == 1) {
      mlpc_mbar_arrive(bar);
    } else {
      unsigned remote;
      asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(bar), "r"(r));
      // release at CTA scope, as for a local arrive: the stage's readers are this block's
      // WGMMAs, done by now. At cluster scope (.release.cluster) the kernel ran twice as slow.
      asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];" ::"r"(remote) : "memory");
    }
  }
}
// Every thread of every block of the cluster: a block's barriers are initialized before the
// others use them.
__device__ __forceinline__ void mlpc_block_sync() {
  if (kCluster == 1) {
    __syncthreads();
  } else {
    asm volatile("barrier.cluster.arrive.release.aligned;" ::: "memory");
    asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory");
  }
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
// This block's row block mb and column block nb of cluster tile `tile`, of tiles_mc cluster
// row blocks (kCluster row blocks each) by tiles_n: kGroupM row blocks walked together.
__device__ __forceinline__ void mlpc_tile_coords(int tile, int tiles_mc, int tiles_n, int& mb,
                                                 int& nb) {
  constexpr int group = kGroupM / kCluster;
  const int per_group = group * tiles_n;
  const int first = tile / per_group * group;
  const int size = min(group, tiles_mc - first);
  const int r = tile % per_group;
  mb = (first + r % size) * kCluster + mlpc_cta_rank();
  nb = r / size;
}
// Where consumer warpgroup c's fragment columns j*8 + 2*(lane%4) (+1) of its row r go in a
// tile's four 64 x 64 boxes: box c * 2 + j / 8, 16-byte chunk j % 8 XOR r % 8 (the 128-byte
// swizzle the TMA store expects).
__device__ __forceinline__ unsigned mlpc_fragment_offset(int c, int j, int r, int lane) {
  const unsigned chunk = static_cast<unsigned>((j % 8) ^ (r % 8));
  return (c * 2 + j / 8) * kOutBoxBytes + r * 128 + chunk * 16 + (lane % 4) * 4;
}
// f(offset, g, u) for each pair of fragment columns of consumer warpgroup c's rows r0 and r0 + 8:
// the accumulator indices of the pair's gate values (g, g + 1) and up values (u, u + 1), and
// where their two results go (mlpc_fragment_offset).
template <class F>
__device__ __forceinline__ void mlpc_each_fragment_pair(int c, int r0, int lane, F f) {
#pragma unroll
  for (int j = 0; j < 16; ++j) {
#pragma unroll
    for (int h = 0; h < 2; ++h)
      f(mlpc_fragment_offset(c, j, r0 + 8 * h, lane), 4 * j + 2 * h, 4 * (j + 16) + 2 * h);
  }
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
// Named barrier of one consumer warpgroup (ids 1 and 2; 0 is __syncthreads; 3 the workers').
__device__ __forceinline__ void mlpc_wg_sync(int c) {
  asm volatile("bar.sync %0, 128;" ::"r"(c + 1) : "memory");
}
// Named barrier of both consumer warpgroups.
__device__ __forceinline__ void mlpc_consumers_sync() {
  asm volatile("bar.sync 4, 256;" ::: "memory");
}
// The two 16-bit halves of a shared-memory word, as floats.
__device__ __forceinline__ void mlpc_unpack2(unsigned v, float& a, float& b) {
  asm("{\n .reg .b16 lo, hi;\n mov.b32 {lo, hi}, %2;\n cvt.f32.$WGTYPE %0, lo;\n"
      " cvt.f32.$WGTYPE %1, hi;\n}\n"
      : "=f"(a), "=f"(b)
      : "r"(v));
}
__device__ __forceinline__ unsigned mlpc_pack2(float a, float b) {
  unsigned v;
  asm("cvt.rn.$PAIR.f32 %0, %2, %1;" : "=r"(v) : "f"(a), "f"(b));
  return v;
}
__device__ __forceinline__ unsigned mlpc_combine2(unsigned g, unsigned u) {
  float g0, g1, u0, u1;
  mlpc_unpack2(g, g0, g1);
  mlpc_unpack2(u, u0, u1);
  return mlpc_pack2(mlpc_gate_combine(g0, u0), mlpc_gate_combine(g1, u1));
}
// combine(g, u) over a handed-over tile, in place (g's boxes become the results), by `count`
// threads of which this is `first`: g and u of an element sit at the same offset of their boxes.
__device__ __forceinline__ void mlpc_combine_tile(unsigned graw, unsigned uraw, int first,
                                                  int count) {
#pragma unroll 1
  for (int q = first; q < kTileBytes / 16; q += count) {
    unsigned g0, g1, g2, g3, u0, u1, u2, u3;
    asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(g0), "=r"(g1), "=r"(g2), "=r"(g3) : "r"(graw + q * 16) : "memory");
    asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(u0), "=r"(u1), "=r"(u2), "=r"(u3) : "r"(uraw + q * 16) : "memory");
    asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};" ::"r"(graw + q * 16),
                 "r"(mlpc_combine2(g0, u0)), "r"(mlpc_combine2(g1, u1)),
                 "r"(mlpc_combine2(g2, u2)), "r"(mlpc_combine2(g3, u3))
                 : "memory");
  }
}
// Stores a [kRows, kRows] tile from shared memory at src (four 64 x 64 boxes, row block-major)
// to rows mb * kRows and columns nb * kRows of y, and waits until the boxes have been read.
__device__ __forceinline__ void mlpc_store_tile(const MlpcTmaDesc* desc, int mb, int nb,
                                                unsigned src) {
#pragma unroll
  for (int b = 0; b < 4; ++b)
    mlpc_tma_store(desc, nb * kRows + (b % 2) * 64, mb * kRows + (b / 2) * kOutRows,
                   src + b * kOutBoxBytes);
  asm volatile("cp.async.bulk.commit_group;" ::: "memory");
  asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
}

}  // namespace

extern "C" __global__ void __launch_bounds__(384, 1) $CLUSTERDIMS
$NAME(const __grid_constant__ MlpcTmaDesc tx, const __grid_constant__ MlpcTmaDesc tg,
      const __grid_constant__ MlpcTmaDesc tu, const __grid_constant__ MlpcTmaDesc ty, int rows,
      int n, int k, int max_splits, float* ws) {
  extern __shared__ unsigned char mlpc_dyn_smem[];
  __shared__ __align__(8) unsigned long long bars[2 * kStages + 2];
  __shared__ int handed_mb, handed_nb, split_last;
  const unsigned base = (mlpc_smem_addr(mlpc_dyn_smem) + 1023u) & ~1023u;
  const unsigned full0 = mlpc_smem_addr(&bars[0]);
  const unsigned empty0 = mlpc_smem_addr(&bars[kStages]);
  // the handed-over tile: g's boxes (then the results, in place), u's boxes
  const unsigned graw = base + kStages * kStageBytes, uraw = graw + kTileBytes;
  const unsigned raw_full = mlpc_smem_addr(&bars[2 * kStages]);
  const unsigned raw_empty = mlpc_smem_addr(&bars[2 * kStages + 1]);
  const int wg = threadIdx.x / 128, t = threadIdx.x % 128;
  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      mlpc_mbar_init(full0 + 8 * s, 1);
      mlpc_mbar_init(empty0 + 8 * s, kConsumerWarps * kCluster);
    }
    mlpc_mbar_init(raw_full, kConsumerThreads);
    mlpc_mbar_init(raw_empty, kWorkerThreads);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  mlpc_block_sync();
  const int tiles_m = (rows + kRows - 1) / kRows, tiles_n = (n + kRows - 1) / kRows;
  // cluster tiles: a block whose row block lies past the last computes zeros (TMA fills them)
  // that its store leaves out, since its cluster's other blocks need its part of the weights
  const int tiles_mc = (tiles_m + kCluster - 1) / kCluster;
  const int tiles = tiles_mc * tiles_n, ktiles = (k + kK - 1) / kK;
  const MlpcWork work(tiles, ktiles, kSplitTail ? max_splits : 1);

  if (wg == 0) {  // producer: one thread issues every TMA load
    asm volatile("setmaxnreg.dec.sync.aligned.u32 40;");
    if (kWorkers && t >= 32) {  // epilogue workers: store each tile the consumers hand over
      const int w = t - 32;
      for (unsigned phase = 0;; phase ^= 1) {
        mlpc_mbar_wait(raw_full, phase);
        const int mb = handed_mb, nb = handed_nb;
        if (mb < 0) break;  // the consumers have no more tiles
        mlpc_combine_tile(graw, uraw, w, kWorkerThreads);
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");  // visible to the TMA unit
        asm volatile("bar.sync 3, %0;" ::"n"(kWorkerThreads) : "memory");
        if (w == 0) mlpc_store_tile(&ty, mb, nb, graw);
        asm volatile("bar.sync 3, %0;" ::"n"(kWorkerThreads) : "memory");  // the boxes were read
        mlpc_mbar_arrive(raw_empty);  // free for the next hand-over
      }
      if (w == 0) asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
      return;
    }
    if (t != 0) return;
    int s = 0;
    unsigned phase = 0;
    MlpcUnit unit;
    for (int i = 0; work.unit(i, unit); ++i) {
      int mb, nb;
      mlpc_tile_coords(unit.tile, tiles_mc, tiles_n, mb, nb);
      for (int kt = unit.k0; kt < unit.k1; ++kt) {
        mlpc_mbar_wait(empty0 + 8 * s, phase ^ 1);
        const unsigned full = full0 + 8 * s, a = base + s * kStageBytes, b = a + kABytes;
        mlpc_mbar_expect_tx(full, kStageBytes);
        mlpc_tma_load(a, &tx, kt * kK, mb * kRows, full);
        if (kCluster == 1) {
          mlpc_tma_load(b, &tg, kt * kK, nb * kRows, full);
          mlpc_tma_load(b + kBBytes / 2, &tu, kt * kK, nb * kRows, full);
        } else {  // block 0 loads wg's slice for both blocks, block 1 wu's
          const int r = mlpc_cta_rank();
          mlpc_tma_load_all(b + r * (kBBytes / 2), r ? &tu : &tg, kt * kK, nb * kRows, full);
        }
        if (++s == kStages) s = 0, phase ^= 1;
      }
    }
    // The other blocks' consumers arrive on this block's barriers: it stays until every stage
    // is free, so that none arrives after the block is gone.
    if (kCluster > 1)
      for (int i = 0; i < kStages; ++i) {
        mlpc_mbar_wait(empty0 + 8 * s, phase ^ 1);
        if (++s == kStages) s = 0, phase ^= 1;
      }
    return;
  }

  // consumers: warpgroup c owns rows [64c, 64c + 64) of each tile
  asm volatile("setmaxnreg.inc.sync.aligned.u32 232;");
  const int c = wg - 1, lane = t % 32, ct = threadIdx.x - 128;
  float d[128];
  int s = 0;
  unsigned phase = 0, raw_phase = 0;
  MlpcUnit unit;
  for (int i = 0; work.unit(i, unit); ++i) {
    int mb, nb;
    mlpc_tile_coords(unit.tile, tiles_mc, tiles_n, mb, nb);
    int prev = -1;
    for (int kt = unit.k0; kt < unit.k1; ++kt) {
      mlpc_mbar_wait(full0 + 8 * s, phase);
      const unsigned a = base + s * kStageBytes + c * (64 * kK * 2);
      const unsigned b = base + s * kStageBytes + kABytes;
      mlpc_fence_acc(d);
      asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#pragma unroll
      for (int kk = 0; kk < kK / 16; ++kk)
        mlpc_wgmma(d, mlpc_wgmma_desc(a + kk * 32), mlpc_wgmma_desc(b + kk * 32), kt > unit.k0 || kk > 0);
      asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
      // keep one k-slice in flight: the previous slice's WGMMAs are done, so its stage is free
      asm volatile("wgmma.wait_group.sync.aligned 1;" ::: "memory");
      mlpc_fence_acc(d);
      if (prev >= 0 && lane == 0) mlpc_release_stage(empty0 + 8 * prev);
      prev = s;
      if (++s == kStages) s = 0, phase ^= 1;
    }
    asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
    mlpc_fence_acc(d);
    if (prev >= 0 && lane == 0) mlpc_release_stage(empty0 + 8 * prev);

    if (kSplitTail && unit.splits > 1) {
      // A k-range of a tail tile: every split writes its partial sums; the last to finish adds
      // the others' to its own and goes on to the epilogue. Nobody waits for anybody.
      float4* parts = reinterpret_cast<float4*>(ws + kCounterFloats);
      unsigned* counters = reinterpret_cast<unsigned*>(ws);
      const int slot = work.slot(unit, unit.split);
#pragma unroll
      for (int q = 0; q < 32; ++q)
        __stcg(&parts[(static_cast<size_t>(slot) * 32 + q) * 256 + ct],
               make_float4(d[4 * q], d[4 * q + 1], d[4 * q + 2], d[4 * q + 3]));
      __threadfence();
      mlpc_consumers_sync();
      if (ct == 0) {
        const unsigned done = atomicAdd(&counters[work.counter(unit)], 1u);
        split_last = done == static_cast<unsigned>(unit.splits - 1);
        if (split_last) counters[work.counter(unit)] = 0;  // ready for the next launch
      }
      mlpc_consumers_sync();
      if (!split_last) continue;
      __threadfence();
      // Summed in split order from the workspace, its own partial sums included, whichever
      // split finishes last: results repeat bit for bit.
      const float4* part = parts + static_cast<size_t>(work.slot(unit, 0)) * 32 * 256 + ct;
#pragma unroll
      for (int q = 0; q < 32; ++q) {
        const float4 p = __ldcg(&part[q * 256]);
        d[4 * q] = p.x, d[4 * q + 1] = p.y, d[4 * q + 2] = p.z, d[4 * q + 3] = p.w;
      }
      for (int other = 1; other < unit.splits; ++other) {
        part += kCluster * 32 * 256;  // the next split's slot
#pragma unroll
        for (int q = 0; q < 32; ++q) {
          const float4 p = __ldcg(&part[q * 256]);
          d[4 * q] += p.x, d[4 * q + 1] += p.y, d[4 * q + 2] += p.z, d[4 * q + 3] += p.w;
        }
      }
    }

    // epilogue: fragment column j*8 + 2*(lane%4) (+1) of rows lane/4 and lane/4 + 8 of this
    // warp's 16; gate columns 0..127, up columns 128..255. Results go to this warpgroup's two
    // 64 x 64 boxes (mlpc_fragment_offset).
    const int r0 = (t / 32) * 16 + lane / 4;
    if (kWorkers) {  // g and u to shared memory as 16-bit values
      mlpc_mbar_wait(raw_empty, raw_phase ^ 1);  // the workers are done with the boxes
      mlpc_each_fragment_pair(c, r0, lane, [&](unsigned at, int g, int u) {
        mlpc_store2_shared(graw + at, d[g], d[g + 1]);
        mlpc_store2_shared(uraw + at, d[u], d[u + 1]);
      });
      MlpcUnit later;
      if (work.unit(i + 1, later)) {  // the workers combine and store it
        raw_phase ^= 1;
        if (ct == 0) handed_mb = mb, handed_nb = nb;
        mlpc_mbar_arrive(raw_full);
        continue;
      }
      // the block's last tile: nothing to overlap with, so all 256 consumers combine it
      mlpc_consumers_sync();
      mlpc_combine_tile(graw, uraw, ct, kConsumerThreads);
      asm volatile("fence.proxy.async.shared::cta;" ::: "memory");  // visible to the TMA unit
      mlpc_consumers_sync();
      if (ct == 0) mlpc_store_tile(&ty, mb, nb, graw);
      continue;
    }
    const unsigned out = graw + c * 2 * kOutBoxBytes;  // this warpgroup's two boxes
    if (t == 0) asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
    mlpc_wg_sync(c);  // the previous tile's store has read the boxes
    mlpc_each_fragment_pair(c, r0, lane, [&](unsigned at, int g, int u) {
      mlpc_store2_shared(graw + at, mlpc_gate_combine(d[g], d[u]),
                         mlpc_gate_combine(d[g + 1], d[u + 1]));
    });
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");  // visible to the TMA unit
    mlpc_wg_sync(c);
    if (t == 0) {
      const int row = mb * kRows + c * kOutRows, col = nb * kRows;
      mlpc_tma_store(&ty, col, row, out);
      mlpc_tma_store(&ty, col + 64, row, out + kOutBoxBytes);
      asm volatile("cp.async.bulk.commit_group;" ::: "memory");
    }
  }
  if (kWorkers) {  // tell the workers there is nothing more
    mlpc_mbar_wait(raw_empty, raw_phase ^ 1);
    if (ct == 0) handed_mb = -1;
    mlpc_mbar_arrive(raw_full);
  }
  if (t == 0) asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
}
)";

void replace_all(std::string& s, const std::string& token, const std::string& value) {
  for (size_t at = s.find(token); at != std::string::npos; at = s.find(token, at + value.size()))
    s.replace(at, token.size(), value);
}

}  // namespace

int gated_gemm_max_splits(int64_t k) {
  // A split in s k-ranges saves the last round (ktiles - ktiles / s) slices and costs each range
  // a 128 KiB partial-sum write and the last finisher s - 1 reads, together about four slices'
  // time per range: at most s with s * s * 4 <= ktiles (Llama's K = 4096: 4). The article's
  // K = 768 (12 slices) does not split: in 2 it measured slower at 16 and 1000 rows
  // (bench/gated_gemm_probe; docs/benchmarks.md).
  const int64_t ktiles = (k + kGatedTileK - 1) / kGatedTileK;
  int splits = 1;
  while (int64_t(splits + 1) * (splits + 1) * 4 <= ktiles) ++splits;
  return splits;
}

unsigned gated_gemm_grid(int64_t rows, int64_t n, int max_splits, int sm_count, int cluster_m) {
  cluster_m = std::max(cluster_m, 1);
  const int64_t cluster_tiles = ((rows + kGatedTileRows * cluster_m - 1) / (kGatedTileRows * cluster_m)) *
                                ((n + kGatedTileRows - 1) / kGatedTileRows);
  const int64_t clusters = std::clamp<int64_t>(cluster_tiles * std::max(max_splits, 1), 1,
                                               std::max(sm_count / cluster_m, 1));
  return static_cast<unsigned>(clusters * cluster_m);
}

size_t gated_gemm_workspace_bytes(int sm_count) {
  return kGatedCounterBytes + size_t(std::max(sm_count, 1)) * kGatedTileRows * 2 * kGatedTileRows * 4;
}

int gated_gemm_smem_bytes(const GatedGemmConfig& config) {
  return config.stages * kStageBytes + (config.epilogue_workers ? 2 : 1) * kOutBytes + 1024;
}

std::string generate_gated_gemm_source(const std::string& name, ir::DType dtype,
                                       const std::string& helpers, const std::string& combine,
                                       const GatedGemmConfig& config) {
  if (dtype != ir::DType::BF16 && dtype != ir::DType::F16)
    throw Error(fmt::format("gated GEMM {}: {} operands (WGMMA takes bf16 or f16)", name,
                            ir::dtype_name(dtype)));
  if (config.cluster_m != 1 && config.cluster_m != 2)
    throw Error(fmt::format("gated GEMM {}: clusters of {} blocks (1 or 2)", name, config.cluster_m));
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
  replace_all(s, "$WORKERS", config.epilogue_workers ? "true" : "false");
  replace_all(s, "$SPLITTAIL", config.split_tail ? "true" : "false");
  replace_all(s, "$CLUSTERDIMS",
              config.cluster_m > 1 ? fmt::format("__cluster_dims__({}, 1, 1)", config.cluster_m) : "");
  replace_all(s, "$CLUSTER", std::to_string(config.cluster_m));
  replace_all(s, "$COUNTERS", std::to_string(kGatedCounterBytes / 4));
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
