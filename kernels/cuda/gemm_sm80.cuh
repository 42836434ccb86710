// tessera: the sm80-class GEMM mainloop and fused epilogue.
//
// D[b] = act(alpha * A[b] B[b] + beta * C[b] + bias)   (aux[b] = the pre-activation)
//
// Multistage cp.async (global -> shared, 16 bytes per copy, zero-filled outside the problem),
// ldmatrix (shared -> registers), mma.sync m16n8k16 with fp32 accumulators, and an epilogue
// that goes through a per-warp fp32 scratch in shared memory so that its global accesses run
// along rows. Everything shape-dependent comes from the generated
// preamble above this file (the plan): tile sizes, warp tiling, stages, the swizzled
// shared-memory layouts smem_a_offset / smem_b_offset, the copy partitions copy_a_coord /
// copy_b_coord, the ldmatrix partitions ldsm_a_coord / ldsm_b_coord and the accumulator map
// acc_coord. Operand tiles are addressed in logical (mn, k) coordinates; the layouts decide
// where an element lives.

struct TesseraGemmParams {
  const tessera_b16* a;
  const tessera_b16* b;
  const void* c;
  void* d;
  const void* bias;
  void* aux;
  long long lda, ldb, ldc, ldd, ldaux;
  long long batch_a, batch_b, batch_c, batch_d, batch_bias, batch_aux;
  int m, n, k, tiles_m, tiles_n;
  float alpha, beta;
  int act;        // 0 none, 1 relu, 2 gelu (erf), 3 gelu (tanh)
  int bias_mode;  // 0 none, 1 one value per row of D (length M), 2 per column (length N)
  int out_dtype;  // of C, D, bias, aux: 0 bf16, 1 fp16, 2 fp32
  int flags;      // kFlag* below
};

static_assert(kWarpsM * kWarpsN * 32 == kThreads, "one warp per warp tile");
static_assert(kBM == kWarpsM * kWarpTileM && kBN == kWarpsN * kWarpTileN, "warps cover the CTA tile");
static_assert(kMmaN % 2 == 0, "B fragments are loaded two n8 atoms at a time");
static_assert(kWarpTileN == 64, "the epilogue gives each lane two of a warp tile's 64 columns");

constexpr int kFlagAVec = 1;     // A may be copied in 16-byte vectors (checked on the host)
constexpr int kFlagBVec = 2;     // B likewise
constexpr int kFlagStorePair = 4;  // D, C, aux rows may be accessed two elements at a time
constexpr int kFlagAux = 8;      // write the pre-activation to aux
constexpr int kFlagReadC = 16;   // beta != 0: read C
constexpr int kFlagStoreQuad = 32;  // D's rows may be accessed four elements at a time

// Per-thread state of one operand's global -> shared copy. The plan guarantees the copy
// partition is affine in the iteration index: iteration i of thread t copies the vector at
// (mn0 + i * kStepMN, k0 + i * kStepK), which lands at shared offset soff + i * kSmemStep.
template <int kTileMN, bool kKMajor, int kIters, int kStepMN, int kStepK, int kSmemStep>
struct TesseraCopy {
  const tessera_b16* g;  // global address of iteration 0 in k-tile 0
  long long g_iter;      // elements between iterations
  long long g_ktile;     // elements between k-tiles
  unsigned soff;         // shared byte offset of iteration 0 inside a stage
  unsigned mn_ok;        // bit i: iteration i is inside the problem along MN
  int k0;                // k of iteration 0 inside a k-tile

  __device__ __forceinline__ void init(const tessera_b16* base, long long ld, int mn_tile0,
                                       int mn_extent, int mn, int k, int soff_elems) {
    k0 = k;
    const int gmn = mn_tile0 + mn;
    g = base + (kKMajor ? gmn * ld + k : k * ld + gmn);
    g_iter = kKMajor ? kStepMN * ld + kStepK : kStepK * ld + kStepMN;
    g_ktile = kKMajor ? kBK : kBK * ld;
    soff = 2u * soff_elems;
    mn_ok = 0;
#pragma unroll
    for (int i = 0; i < kIters; ++i)
      if (gmn + i * kStepMN < mn_extent) mn_ok |= 1u << i;
  }

  // 16-byte cp.async of vector i (a constant after unrolling) of k-tile kt into the stage at
  // shared address `stage`, zero-filled outside the problem; issued only where `on`, which is
  // a predicate of the copy instruction rather than a branch, so that copies issued between
  // mma.sync instructions keep them in one basic block.
  __device__ __forceinline__ void issue(unsigned stage, int kt, int k_extent, int i,
                                        const tessera_b16* any, bool on) const {
    const int krem = k_extent - kt * kBK - k0;  // vectors with k offset below this are inside
    const bool in = ((mn_ok >> i) & 1u) && i * kStepK < krem;
    tessera_cp_async16(stage + soff + i * kSmemStep * 2, in ? g + kt * g_ktile + i * g_iter : any, in, on);
  }
};

// The k-steps of a k-tile and the copy slots among them: after each of the kMmaM rows of
// mma.sync in every k-step but the last, a thread issues the next kCopyPerSlot of its
// kCopyItersA + kCopyItersB vectors of the k-tile kStages - 1 ahead. Issued all at once, the
// copies' address arithmetic (about ten instructions a vector) would run on every warp at the
// same moment, just after the barrier, while the tensor pipe drains; spread between the mma
// rows it fills the issue slots the mma.sync stream leaves (design 025). The last k-step is left out: its
// barrier waits for the group these copies commit two k-tiles later, and the group is
// committed before it.
constexpr int kKSteps = kBK / 16;
constexpr int kCopySlots = (kKSteps > 1 ? kKSteps - 1 : 1) * kMmaM;
constexpr int kCopyPerSlot = (kCopyItersA + kCopyItersB + kCopySlots - 1) / kCopySlots;

// Unaligned operand: element-wise synchronous copy of one (kTileMN x kBK) tile, contiguous mode
// fastest, zero outside the problem.
template <int kTileMN, bool kKMajor, typename Offset>
__device__ __noinline__ void tessera_copy_slow(tessera_b16* s, const tessera_b16* g, long long ld,
                                               int mn0, int k0, int mn_extent, int k_extent,
                                               int tid, Offset offset) {
  for (int e = tid; e < kTileMN * kBK; e += kThreads) {
    const int mn = kKMajor ? e / kBK : e % kTileMN;
    const int k = kKMajor ? e % kBK : e / kTileMN;
    const int gmn = mn0 + mn, gk = k0 + k;
    tessera_b16 v = 0;
    if (gmn < mn_extent && gk < k_extent) v = g[kKMajor ? gmn * ld + gk : gk * ld + gmn];
    s[offset(mn, k)] = v;
  }
}

struct TesseraSmemA {
  __device__ __forceinline__ int operator()(int mn, int k) const { return smem_a_offset(mn, k); }
};
struct TesseraSmemB {
  __device__ __forceinline__ int operator()(int mn, int k) const { return smem_b_offset(mn, k); }
};

// One output element pair (row, col), (row, col + 1) of the fused epilogue; `b0`, `b1` are
// the bias terms of the two elements (0 without a bias).
__device__ __forceinline__ void tessera_epilogue_pair(const TesseraGemmParams& p, const void* c,
                                                      void* d, void* aux, int row, int col,
                                                      float v0, float v1, float b0, float b1) {
  const int dt = p.out_dtype;
  const bool pair = (p.flags & kFlagStorePair) && col + 1 < p.n;
  float v[2] = {p.alpha * v0 + b0, p.alpha * v1 + b1};
  if (p.flags & kFlagReadC) {
#pragma unroll
    for (int e = 0; e < 2; ++e)
      if (col + e < p.n) v[e] += p.beta * tessera_load(c, row * p.ldc + col + e, dt);
  }
  if (p.flags & kFlagAux) {
    if (pair) {
      tessera_store2(aux, row * p.ldaux + col, v[0], v[1], dt);
    } else {
      for (int e = 0; e < 2; ++e)
        if (col + e < p.n) tessera_store(aux, row * p.ldaux + col + e, v[e], dt);
    }
  }
  v[0] = tessera_activate(v[0], p.act, dt == 0);
  v[1] = tessera_activate(v[1], p.act, dt == 0);
  if (pair) {
    tessera_store2(d, row * p.ldd + col, v[0], v[1], dt);
  } else {
    for (int e = 0; e < 2; ++e)
      if (col + e < p.n) tessera_store(d, row * p.ldd + col + e, v[e], dt);
  }
}

// This CTA's tile (tile_m, tile_n) in the raster: groups of kGroupM tile-rows walk N together
// so that their A and B tiles stay in L2.
__device__ __forceinline__ void tessera_cta_tile(const TesseraGemmParams& p, int& tile_m,
                                                 int& tile_n) {
  const int bid = blockIdx.x;
  const int per_group = kGroupM * p.tiles_n;
  const int first_m = (bid / per_group) * kGroupM;
  const int rows = min(p.tiles_m - first_m, kGroupM);
  tile_m = first_m + (bid % per_group) % rows;
  tile_n = (bid % per_group) / rows;
}

// Every accumulator of a warp's tile set to zero.
__device__ __forceinline__ void tessera_zero(float (&acc)[kMmaM][kMmaN][4]) {
#pragma unroll
  for (int i = 0; i < kMmaM; ++i)
#pragma unroll
    for (int j = 0; j < kMmaN; ++j)
#pragma unroll
      for (int r = 0; r < 4; ++r) acc[i][j][r] = 0.0f;
}

// The shared-memory element offsets of this lane's ldmatrix rows at k-step 0 of atom 0 of
// warp (warp_m, warp_n)'s A and B tiles.
__device__ __forceinline__ void tessera_ldsm_lanes(int lane, int warp_m, int warp_n,
                                                   unsigned& a_lane, unsigned& b_lane) {
  int mn, k;
  ldsm_a_coord(lane, mn, k);
  a_lane = smem_a_offset(mn + warp_m * kWarpTileM, k);
  ldsm_b_coord(lane, mn, k);
  b_lane = smem_b_offset(mn + warp_n * kWarpTileN, k);
}

// With a tree epilogue its arguments are the second parameter: a launch's own copy, so launches
// of one module on several streams cannot overwrite each other's arguments.
extern "C" __global__ void __launch_bounds__(kThreads, 1) tessera_gemm(const TesseraGemmParams p
#ifdef TESSERA_EPILOGUE_TREE
                                                                       , const TesseraEpArgs tessera_ep_args
#endif
) {
  extern __shared__ __align__(128) unsigned char tessera_smem[];
  tessera_b16* sA = reinterpret_cast<tessera_b16*>(tessera_smem);
  tessera_b16* sB = sA + kStages * kSmemAElems;

  const int tid = threadIdx.x;
  const int lane = tid & 31;
  int warp_m, warp_n;
  warp_coord(tid >> 5, warp_m, warp_n);

  int tile_m, tile_n;
  tessera_cta_tile(p, tile_m, tile_n);
  const long long batch = blockIdx.z;
  const tessera_b16* A = p.a + batch * p.batch_a;
  const tessera_b16* B = p.b + batch * p.batch_b;
  const int m0 = tile_m * kBM, n0 = tile_n * kBN;
  const bool a_vec = p.flags & kFlagAVec, b_vec = p.flags & kFlagBVec;
  const int ktiles = (p.k + kBK - 1) / kBK;
  const unsigned sA_u = tessera_smem_addr(tessera_smem);
  const unsigned sB_u = sA_u + kStages * kSmemAElems * 2;

  TesseraCopy<kBM, kAKMajor, kCopyItersA, kCopyAStepMN, kCopyAStepK, kCopyASmemStep> copy_a;
  TesseraCopy<kBN, kBKMajor, kCopyItersB, kCopyBStepMN, kCopyBStepK, kCopyBSmemStep> copy_b;
  {
    int mn, k;
    copy_a_coord(tid, 0, mn, k);
    copy_a.init(A, p.lda, m0, p.m, mn, k, smem_a_offset(mn, k));
    copy_b_coord(tid, 0, mn, k);
    copy_b.init(B, p.ldb, n0, p.n, mn, k, smem_b_offset(mn, k));
  }
  // Copy slot `slot` of k-tile kt into `stage`, where `on` (both operands vectorized).
  const bool vec_ab = a_vec && b_vec;
  auto copy_slot = [&](int stage, int kt, int slot, bool on) {
#pragma unroll
    for (int v = slot * kCopyPerSlot; v < (slot + 1) * kCopyPerSlot; ++v) {
      if (v < kCopyItersA) {
        copy_a.issue(sA_u + stage * kSmemAElems * 2, kt, p.k, v, A, on);
      } else if (v < kCopyItersA + kCopyItersB) {
        copy_b.issue(sB_u + stage * kSmemBElems * 2, kt, p.k, v - kCopyItersA, B, on);
      }
    }
  };
  auto load_stage = [&](int stage, int kt) {
    if (a_vec) {
#pragma unroll
      for (int v = 0; v < kCopyItersA; ++v) copy_a.issue(sA_u + stage * kSmemAElems * 2, kt, p.k, v, A, true);
    } else {
      tessera_copy_slow<kBM, kAKMajor>(sA + stage * kSmemAElems, A, p.lda, m0, kt * kBK, p.m, p.k,
                                       tid, TesseraSmemA{});
    }
    if (b_vec) {
#pragma unroll
      for (int v = 0; v < kCopyItersB; ++v) copy_b.issue(sB_u + stage * kSmemBElems * 2, kt, p.k, v, B, true);
    } else {
      tessera_copy_slow<kBN, kBKMajor>(sB + stage * kSmemBElems, B, p.ldb, n0, kt * kBK, p.n, p.k,
                                       tid, TesseraSmemB{});
    }
  };

  // ldmatrix addresses: the plan guarantees offset(lane + step) = offset(lane) ^ offset(step)
  // for every warp, lane and (atom, k-step), so each address is one XOR with a constant.
  unsigned a_lane, b_lane;
  tessera_ldsm_lanes(lane, warp_m, warp_n, a_lane, b_lane);

  float acc[kMmaM][kMmaN][4];
  tessera_zero(acc);

  unsigned af[2][kMmaM][4];
  unsigned bf[2][kMmaN][2];
  auto load_frags = [&](int buf, unsigned a_stage, unsigned b_stage, int kk) {
#pragma unroll
    for (int i = 0; i < kMmaM; ++i) {
      const unsigned addr = a_stage + 2u * (a_lane ^ smem_a_offset(i * 16, kk));
      if (kAKMajor) {
        tessera_ldsm_x4(af[buf][i], addr);
      } else {
        tessera_ldsm_x4_trans(af[buf][i], addr);
      }
    }
#pragma unroll
    for (int j = 0; j < kMmaN; j += 2) {
      const unsigned addr = b_stage + 2u * (b_lane ^ smem_b_offset(j * 8, kk));
      unsigned r[4];
      if (kBKMajor) {
        tessera_ldsm_x4(r, addr);
      } else {
        tessera_ldsm_x4_trans(r, addr);
      }
      bf[buf][j][0] = r[0];
      bf[buf][j][1] = r[1];
      bf[buf][j + 1][0] = r[2];
      bf[buf][j + 1][1] = r[3];
    }
  };

  // Prologue: stages 0 .. kStages-2 in flight, one commit group each (possibly empty).
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < ktiles) load_stage(s, s);
    tessera_cp_async_commit();
  }
  tessera_cp_async_wait<kStages - 2>();
  __syncthreads();
  load_frags(0, sA_u, sB_u, 0);

  // Commit groups: kStages - 1 in the prologue, one per k-tile. The k-tile loop keeps
  // fragments double-buffered: step kk+1 (or step 0 of the next k-tile) is read from shared
  // memory while step kk multiplies. The next k-tile's stage is waited for, and the stage
  // refilled, behind the barrier in the last step.
  for (int kt = 0; kt < ktiles; ++kt) {
    const int stage = kt % kStages;
    const unsigned a_stage = sA_u + stage * kSmemAElems * 2;
    const unsigned b_stage = sB_u + stage * kSmemBElems * 2;
#pragma unroll
    for (int kk = 0; kk < kKSteps; ++kk) {
      if (kk + 1 < kKSteps) {
        load_frags((kk + 1) & 1, a_stage, b_stage, (kk + 1) * 16);
      } else if (kt + 1 < ktiles) {
        // Tile kt+1 has landed (groups 0..kt+1 of kStages+kt), and every warp has read its
        // last fragments of tile kt, so stage kt may be refilled from here on.
        tessera_cp_async_wait<kStages - 2>();
        __syncthreads();
        const int ns = (kt + 1) % kStages;
        load_frags((kk + 1) & 1, sA_u + ns * kSmemAElems * 2, sB_u + ns * kSmemBElems * 2, 0);
      }
      // Refill the stage read during k-tile kt-1 (every warp passed the barrier since): whole
      // at the first k-step where an operand is copied element by element, else spread over
      // the copy slots (`refill` false past the last k-tile).
      const int next = kt + kStages - 1;
      if (kk == 0 && !vec_ab) {
        if (next < ktiles) load_stage(next % kStages, next);
      }
      const bool refill = vec_ab && next < ktiles;
#pragma unroll
      for (int i = 0; i < kMmaM; ++i) {
#pragma unroll
        for (int j = 0; j < kMmaN; ++j)
          tessera_mma_16816<kElem>(acc[i][j], af[kk & 1][i], bf[kk & 1][j][0], bf[kk & 1][j][1]);
        const int slot = kk * kMmaM + i;
        if (slot < kCopySlots) copy_slot(next % kStages, next, slot, refill);
      }
      if (kk == (kKSteps > 1 ? kKSteps - 2 : 0)) tessera_cp_async_commit();
    }
  }
  // Drain the (empty) trailing groups; after the barrier the pipeline's shared memory is free.
  tessera_cp_async_wait<0>();
  __syncthreads();

  // Epilogue, 16 accumulator rows of a warp at a time: registers -> the warp's fp32 scratch
  // (through the accumulator map) -> the lanes take whole rows of it (four columns a lane on
  // the short path below, a pair of columns on the general one), so global accesses of C, D
  // and aux are contiguous along rows and the element code exists once.
  constexpr int kScratchLd = kWarpTileN + 8;  // + 8 floats: the fragment stores are conflict-free
  float* scratch = reinterpret_cast<float*>(tessera_smem) + (tid >> 5) * (16 * kScratchLd);
  const char* C = p.c ? static_cast<const char*>(p.c) + batch * p.batch_c * tessera_dtype_bytes(p.out_dtype) : nullptr;
  char* D = static_cast<char*>(p.d) + batch * p.batch_d * tessera_dtype_bytes(p.out_dtype);
  const char* bias = p.bias ? static_cast<const char*>(p.bias) + batch * p.batch_bias * tessera_dtype_bytes(p.out_dtype) : nullptr;
  char* aux = p.aux ? static_cast<char*>(p.aux) + batch * p.batch_aux * tessera_dtype_bytes(p.out_dtype) : nullptr;
#ifdef TESSERA_EPILOGUE_TREE
  // The tree epilogue (epilogue::cuda::gemm_tree_source): per-CTA reduction sums after the
  // warps' scratch when the pipeline's shared memory has room (else global atomics).
  TesseraEpCta ep_cta{};
  {
    constexpr int kScratchFloats = kThreads / 32 * 16 * kScratchLd;
    constexpr bool kFits = (kScratchFloats + tessera_ep_smem_floats(kBM, kBN)) * 4 <=
                           kStages * (kSmemAElems + kSmemBElems) * 2;
    float* ep_smem = kFits ? reinterpret_cast<float*>(tessera_smem) + kScratchFloats : nullptr;
    tessera_ep_cta_begin(ep_cta, ep_smem, m0, n0, kBM, kBN, tid, kThreads);
  }
  __syncthreads();
#endif
  // The common epilogues (no C, no aux, D on four elements) take a short path on a warp tile
  // that lies inside N: lane l handles columns 4 (l % 16) .. + 3 of rows l / 16, l / 16 + 2,
  // ... of each 16-row chunk, a warp's stores covering two whole rows of the tile at a time.
  // The general path below takes every other case element pair by element pair; its code,
  // with every type, operand and activation, is large enough that running it on every tile
  // misses the instruction cache.
  const int wcol0 = n0 + warp_n * kWarpTileN;
#ifdef TESSERA_EPILOGUE_TREE
  constexpr bool kTree = true;
#else
  constexpr bool kTree = false;
#endif
  const bool fast = !kTree && (p.flags & kFlagStoreQuad) && !(p.flags & (kFlagReadC | kFlagAux)) &&
                    wcol0 + kWarpTileN <= p.n;
  const int cq = 4 * (lane & 15);
  float fb[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  if (fast && p.bias_mode == 2) {
#pragma unroll
    for (int e = 0; e < 4; ++e) fb[e] = tessera_load(bias, wcol0 + cq + e, p.out_dtype);
  }
#pragma unroll
  for (int i = 0; i < kMmaM; ++i) {
#pragma unroll
    for (int j = 0; j < kMmaN; ++j)
#pragma unroll
      for (int r = 0; r < 4; r += 2) {
        int row, col;
        acc_coord(lane, r, row, col);
        float* q = scratch + row * kScratchLd + j * 8 + col;
        q[0] = acc[i][j][r];
        q[1] = acc[i][j][r + 1];
      }
    __syncwarp();
    const int row0 = m0 + warp_m * kWarpTileM + i * 16;
    if (fast) {
#pragma unroll 2
      for (int t = 0; t < 8; ++t) {
        const int rr = 2 * t + (lane >> 4);
        const int row = row0 + rr;
        if (row < p.m) {
          const float4 a = *reinterpret_cast<const float4*>(scratch + rr * kScratchLd + cq);
          const float rb = p.bias_mode == 1 ? tessera_load(bias, row, p.out_dtype) : 0.0f;
          float v[4] = {p.alpha * a.x + fb[0] + rb, p.alpha * a.y + fb[1] + rb,
                        p.alpha * a.z + fb[2] + rb, p.alpha * a.w + fb[3] + rb};
#pragma unroll
          for (int e = 0; e < 4; ++e) v[e] = tessera_activate(v[e], p.act, p.out_dtype == 0);
          const long long at = row * p.ldd + wcol0 + cq;
          if (p.out_dtype == 2) {
            *reinterpret_cast<float4*>(reinterpret_cast<float*>(D) + at) = make_float4(v[0], v[1], v[2], v[3]);
          } else {
            *reinterpret_cast<uint2*>(reinterpret_cast<tessera_b16*>(D) + at) =
                make_uint2(tessera_pack2(v[0], v[1], p.out_dtype), tessera_pack2(v[2], v[3], p.out_dtype));
          }
        }
      }
    } else {
      // Lane l takes columns 2l and 2l+1 of the warp tile's 64: its column bias is loaded
      // once per 16 rows; a row bias is one broadcast load per row.
      const int col = wcol0 + 2 * lane;
      float cb0 = 0.0f, cb1 = 0.0f;
      if (p.bias_mode == 2) {
        if (col < p.n) cb0 = tessera_load(bias, col, p.out_dtype);
        if (col + 1 < p.n) cb1 = tessera_load(bias, col + 1, p.out_dtype);
      }
      if (col < p.n) {
#pragma unroll 4
        for (int rr = 0; rr < 16; ++rr) {
          const int row = row0 + rr;
          if (row < p.m) {
            const float rb = p.bias_mode == 1 ? tessera_load(bias, row, p.out_dtype) : 0.0f;
#ifdef TESSERA_EPILOGUE_TREE
            tessera_ep_pair(tessera_ep_args, ep_cta, static_cast<int>(batch), row, col,
                            scratch[rr * kScratchLd + 2 * lane], scratch[rr * kScratchLd + 2 * lane + 1]);
#else
            tessera_epilogue_pair(p, C, D, aux, row, col, scratch[rr * kScratchLd + 2 * lane],
                                  scratch[rr * kScratchLd + 2 * lane + 1], cb0 + rb, cb1 + rb);
#endif
          }
        }
      }
    }
    __syncwarp();
  }
#ifdef TESSERA_EPILOGUE_TREE
  __syncthreads();
  tessera_ep_cta_end(tessera_ep_args, ep_cta, static_cast<int>(batch), tid, kThreads);
#endif
}
