// tessera: the sm_90a GEMM: TMA loads into an mbarrier ring, wgmma, warp specialization and a
// persistent grid.
//
// D[b] = act(alpha * A[b] B[b] + beta * C[b] + bias)   (aux[b] = the pre-activation)
//
// A is M x K and B is given as N x K, both K-major (nn.Linear's x @ w^T). The CTA has one
// producer warpgroup (one thread issues every TMA load, the others idle at a lowered register
// budget) and kConsumers consumer warpgroups, each owning 64 rows of the kBM x kBN tile with a
// 64 x kBN fp32 accumulator in registers. Stages of the ring are handed over with two
// mbarriers each: `full` (producer -> consumers, completed by the TMA transaction bytes) and
// `empty` (consumers -> producer, one arrival per consumer warp). CTAs are persistent: CTA i
// takes tiles i, i + gridDim.x, ... in the grouped order of tessera_sm90_tile, and the
// producer runs ahead into the next tile while the consumers run the epilogue.
//
// With a cluster of two CTAs (kCluster == 2, an opt-in of the plan), the pair walks the
// "cluster tiles" of the persistent order together: two tiles side by side along N that share
// their A tile (kShareA), or along M sharing B (kShareB). Stage for stage, CTA r of the pair
// loads rows [r kPartRows, (r + 1) kPartRows) of the shared tile and multicasts them into the
// same stage of both CTAs (signalling both CTAs' `full` barriers), plus its own whole tile of
// the other operand; so each `full` barrier still counts the whole stage's bytes. A stage of
// a CTA is written by both producers, so it may be refilled only when the consumers of both
// CTAs have released it: every consumer warp arrives on the `empty` barrier of both CTAs,
// whose count doubles. A cluster-wide barrier after the barriers' initialization (before any
// CTA touches its partner) and one before exit (while a partner may still write into this
// CTA's shared memory or arrive on its barriers) bracket the kernel. The cluster's code is
// under `#if TESSERA_SM90_CLUSTER > 1`, so that with a cluster of 1 the compiler sees the
// single-CTA kernel's text (a dead `if (kCluster > 1)` branch still changes its register
// allocation).
//
// Everything shape-dependent comes from the generated preamble above this file: tile sizes,
// stages, the stage sizes in bytes, the wgmma descriptors' constant parts and k-step advance
// (derived from the shared-memory layouts), the wgmma wrapper and the accumulator map
// tessera_acc_row / tessera_acc_col.

struct TesseraSm90Params {
  void* d;
  const void* c;
  const void* bias;
  void* aux;
  long long ldc, ldd, ldaux;
  long long batch_c, batch_d, batch_bias, batch_aux;
  int m, n, k, batch;
  int tiles_m, tiles_n, group_m;
  float alpha, beta;
  int act;        // 0 none, 1 relu, 2 gelu (erf), 3 gelu (tanh)
  int bias_mode;  // 0 none, 1 one value per row of D (length M), 2 per column (length N)
  int out_dtype;  // of C, D, bias, aux: 0 bf16, 1 fp16, 2 fp32
  int flags;      // kSm90Flag* below
  // Stream-K (kStreamK plans): the launch's last sk_tiles tiles are split along K over the
  // CTAs (tessera_sm90_unit); 0 runs every tile whole. sk_work holds one fp32 partial
  // accumulator per CTA and consumer warpgroup (64 x kBN floats each), sk_flags one word
  // each (0 between launches: the reader clears it).
  int sk_tiles;
  int sk_waves;  // with sk_tiles: the whole tiles of each CTA, (total - sk_tiles) / gridDim.x
  float* sk_work;
  int* sk_flags;
  // A and B for the cp.async load (kCpAsyncAB plans): K-major rows, strides in elements, the
  // same operands A's and B's tensor maps describe.
  const void* a;
  const void* b;
  long long lda, ldb, batch_a, batch_b;
  // Stream-K: the parts a tile where a single wave of whole parts is numbered part by part
  // (tessera_sm90_sk_cta), else 0.
  int sk_parts;
};

// D, C, aux rows may be accessed two elements at a time (checked on the host). The rest of
// the epilogue is compile-time (kEpi* in the preamble); act, bias_mode and out_dtype above
// repeat it for a reader of the parameter block.
constexpr int kSm90FlagStorePair = 1;

// D (and aux, when the epilogue has it) is stored by TMA from the plan's shared-memory buffers
// (kEpiTmaStore plans; the launch sets it when the addresses and strides suit TMA and passes
// the tensor maps).
constexpr int kSm90FlagTmaStore = 2;

// With kSm90FlagTmaStore: D (and aux) leave as whole rows by bulk copies instead of tensor
// stores (tessera_sm90_row_pass; the launch sets it where D's rows are off TMA's 16-byte grid
// but contiguous and within one tile column, in kernels compiled with kRowStore).
constexpr int kSm90FlagRowStore = 4;

static_assert(kThreads == 128 * (kConsumers + 1), "one producer and kConsumers consumer warpgroups");
static_assert(!kStreamK || (!kPingPong && kCluster == 1), "stream-K: cooperative schedule, no cluster");
// Stream-K: float4 loads of another CTA's partial sums in flight at once per thread, the
// largest divisor of the thread's kBN / 8 up to 16 (64 registers beside the accumulators):
// the fix-up waits one L2 round trip per chunk, and a tile's last part may add many parts.
__host__ __device__ constexpr int tessera_sm90_sk_chunk(int n) {
  int c = n < 16 ? n : 16;
  while (n % c != 0) --c;
  return c;
}
constexpr int kSkChunk = tessera_sm90_sk_chunk(kBN / 8);
static_assert(kBM == 64 * (kPingPong ? kMHalves : kConsumers),
              "cooperative: each consumer warpgroup owns 64 rows; ping-pong: all kBM");
static_assert(kAccRegs * 128 == 64 * kBN, "the accumulator covers 64 x kBN per warpgroup");
static_assert(kBN % kEpiCols == 0 && kEpiRegs * 128 == 64 * kEpiCols, "epilogue chunks");
static_assert(!kEpiTmaStore || !kEpiAux || kStoreBufs >= 2, "a TMA-store pass with aux fills two buffers");
// A bf16 D keeps 8 significant bits: GELU (tanh) may then take tanh from the hardware's one
// special-function operation (tanh.approx, error about 2^-11 of tanh: at most |x| 2^-12 in
// D), as the sm80-class path does, instead of ex2 and rcp (two special-function operations).
// fp16 (11 bits) and fp32 outputs keep the exact form. (docs/design/008-gelu-tanh-approx.md)
constexpr bool kEpiCoarse = kEpiOut == 0;
// The plan stages a tile's bias exactly when the epilogue has one (tree kernels: neither).
constexpr bool kStageBias = kBiasStage > 0;
static_assert(kStageBias == (kEpiBias != 0), "a bias stage for a bias, none without");
static_assert(!kBiasInAcc || !kStreamK, "the bias in the accumulators: whole tiles");
static_assert(!kBPanel || (!kStreamK && !kPingPong && kCluster == 1),
              "the B panel: whole tiles, cooperative (both consumers see the first tile), no cluster");
#if TESSERA_SM90_CLUSTER > 1
#define TESSERA_SM90_CLUSTER_DIMS __cluster_dims__(TESSERA_SM90_CLUSTER, 1, 1)
#else
#define TESSERA_SM90_CLUSTER_DIMS
#endif

// A debugging timeline (only when the source defines TESSERA_SM90_TIMELINE as the array's
// length; kernels/examples/sm90_timeline.rs does): the SM's clock64 at the events of every
// tile, per CTA and warpgroup, so that a reader can see whether the consumers' mainloops and
// epilogues alternate. Entry ((cta * 3 + wg) * kTlTiles + tile) * 4 + event; the consumers'
// events are 0 the tile's iteration begins (the previous epilogue is over), 1 the turn is
// taken, 2 the first stage has arrived, 3 the mainloop's wgmma are done; the producer's 0 its
// first empty-stage wait begins, 1 it ends, 2 the tile's last load is issued. A consumer's
// last event 0 (no other event in its slot) is its loop's exit; tiles past kTlTiles - 1 share
// the last slot. Without the macro the stamps compile to nothing.
#ifdef TESSERA_SM90_TIMELINE
constexpr int kTlTiles = 64;
__device__ unsigned long long tessera_timeline[TESSERA_SM90_TIMELINE];
__device__ __forceinline__ void tessera_tl(int wg, int tile, int event) {
  const long long i = (((long long)blockIdx.x * 3 + wg) * kTlTiles + min(tile, kTlTiles - 1)) * 4 + event;
  if (i < TESSERA_SM90_TIMELINE) tessera_timeline[i] = clock64();
}
#define TESSERA_TL(cond, wg, tile, event) \
  do {                                     \
    if (cond) tessera_tl(wg, tile, event); \
  } while (0)
// The TMA-store passes of each consumer's warp 0: entry ((cta * 2 + cw) * kTlPasses + seq) * 4
// + event, seq the warpgroup's running pass number; events 0 the pass's values are computed
// (tessera_sm90_store_pass is entered), 1 its buffers are free, 2 they are written and fenced,
// 3 the TMA stores are issued.
constexpr int kTlPasses = 512;
constexpr long long kTlPassLen = (long long)(TESSERA_SM90_TIMELINE) / (3 * kTlTiles * 4) * 2 * kTlPasses * 4;
__device__ unsigned long long tessera_timeline_pass[kTlPassLen];
__device__ __forceinline__ void tessera_tlp(int seq, int event) {
  const int cw = threadIdx.x / 128 - 1;
  const long long i = (((long long)blockIdx.x * 2 + cw) * kTlPasses + seq) * 4 + event;
  if (threadIdx.x % 128 == 0 && seq < kTlPasses && i < kTlPassLen) tessera_timeline_pass[i] = clock64();
}
#define TESSERA_TLP(seq, event) tessera_tlp(seq, event)
#else
#define TESSERA_TLP(seq, event) \
  do {                          \
  } while (0)
#define TESSERA_TL(cond, wg, tile, event) \
  do {                                     \
  } while (0)
#endif

#ifdef TESSERA_SM90_CLOCK
// The clock stamps (only when the source defines TESSERA_SM90_CLOCK as the array's length,
// four per CTA; sm90_timeline does, with or without the timeline above). Per CTA: the SM clock
// and the global timer (ns) when thread 0 starts, and the latest of both when a consumer
// warpgroup finishes: entry cta * 4 + {0 clock, 1 ns, 2 end clock, 3 end ns}. The ratio of the
// two spans is the SM clock the CTA ran at.
constexpr long long kTlCtaLen = TESSERA_SM90_CLOCK;
__device__ unsigned long long tessera_timeline_cta[kTlCtaLen];
__device__ __forceinline__ unsigned long long tessera_globaltimer() {
  unsigned long long ns;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(ns));
  return ns;
}
__device__ __forceinline__ void tessera_tl_cta(bool end) {
  const long long i = (long long)blockIdx.x * 4;
  if (i + 3 >= kTlCtaLen) return;
  const unsigned long long clk = clock64(), ns = tessera_globaltimer();
  if (end) {
    atomicMax(&tessera_timeline_cta[i + 2], clk);
    atomicMax(&tessera_timeline_cta[i + 3], ns);
  } else {
    tessera_timeline_cta[i] = clk;
    tessera_timeline_cta[i + 1] = ns;
  }
}
#define TESSERA_TL_CTA(cond, end) \
  do {                            \
    if (cond) tessera_tl_cta(end); \
  } while (0)
#else
#define TESSERA_TL_CTA(cond, end) \
  do {                            \
  } while (0)
#endif

static_assert(kCluster == 1 || (kCluster == 2 && kShareA != kShareB && !kPingPong),
              "a pair of CTAs shares exactly one operand, cooperative schedule");
static_assert(!kShareA || (kPartRowsA * kCluster == kBM && kPartBytesA % 1024 == 0),
              "A splits into kCluster parts on the 1024-byte swizzle period");
static_assert(!kShareB || (kPartRowsB * kCluster == kBN && kPartBytesB % 1024 == 0),
              "B splits into kCluster parts on the 1024-byte swizzle period");

// The CTA's dynamic shared memory (the launch sizes it; the kernel carves it up).
extern __shared__ unsigned char tessera_smem_raw[];

// Tile `tile` of the persistent order -> (batch, tile row, tile column). Within a batch, tile
// rows go in groups of group_m; a group is walked column by column, so consecutive tiles
// (running at the same time on neighbouring SMs) share B columns and a few A rows in L2.
__device__ __forceinline__ void tessera_sm90_tile(int tile, const TesseraSm90Params& p, int& b,
                                                  int& tm, int& tn) {
  const int per_batch = p.tiles_m * p.tiles_n;
  b = tile / per_batch;
  const int r = tile - b * per_batch;
  const int group_size = p.group_m * p.tiles_n;
  const int g = r / group_size;
  const int first_m = g * p.group_m;
  const int rows = min(p.tiles_m - first_m, p.group_m);
  const int in_group = r - g * group_size;
  tm = first_m + in_group % rows;
  tn = in_group / rows;
}

// A CTA's work: a whole tile, or a run of k-tiles of one (stream-K).
struct TesseraSm90Unit {
  int tile;    // the tile (tessera_sm90_tile decodes it)
  int kb, ke;  // its k-tiles [kb, ke)
  // 0: the whole tile. 1: a part without the tile's last k-tile, stored to the CTA's
  // workspace slot. 2: the part with the last k-tile, which adds the other parts (CTAs
  // cta - 1, cta - 2, ... while their runs reach into the tile) and runs the epilogue.
  int role;
  int t0;  // (stream-K parts) the tile's first k-tile in the concatenation
  unsigned long long kpos;  // k-tiles of the CTA's units before this one (its ring position)
};

// The stream-K split of a CTA's run: the last sk_tiles tiles' k-tiles, concatenated tile after
// tile, I = sk_tiles k_tiles of them, are cut into gridDim.x runs, CTA c taking
// [c I / G, (c + 1) I / G). The launch keeps sk_tiles below twice the grid, so a run is
// shorter than two tiles and touches at most three (from G tiles on, no run lies inside one
// tile: a tile then has at most two parts), and G I within 32 bits (64-bit divisions are
// calls that spilled the consumers' registers). Begin and end of CTA c's run:
__device__ __forceinline__ int tessera_sm90_sk_cut(const TesseraSm90Params& p, int k_tiles, int c) {
  return (int)((unsigned)c * (unsigned)(p.sk_tiles * k_tiles) / gridDim.x);
}

// This CTA's place in the stream-K run. Where the launch numbers a single wave of whole
// parts part by part (sk_parts > 0: G CTAs = sk_tiles x sk_parts, no whole tiles before the
// parts; the launch decides it, policy::stream_k_part_order), CTA c runs place
// (c % sk_tiles) sk_parts + c / sk_tiles: part c / sk_tiles of tile c % sk_tiles, so the CTAs
// that read the same k-tiles (of tiles sharing A's rows or B's columns) are numbered
// together; else place c. A bijection of [0, G): the places' partial-sum slots and flags are
// the CTAs' own, and a tile's last part is still the highest place (and CTA) of its parts,
// which wait only for lower places, all resident in the one wave.
__device__ __forceinline__ int tessera_sm90_sk_cta(const TesseraSm90Params& p) {
  const int c = blockIdx.x;
  if (p.sk_parts > 0) return (c % p.sk_tiles) * p.sk_parts + c / p.sk_tiles;
  return c;
}

// The u-th unit of this CTA (false past the last): first the whole tiles blockIdx.x,
// blockIdx.x + gridDim.x, ... below the stream-K tiles (in step with the other CTAs, as
// without stream-K), then the parts of its stream-K run, the later tile's first (a part
// without its tile's last k-tile, so every CTA stores its partial sum before it waits for
// anyone's, and waits only for CTAs of lower index). (docs/design/002-stream-k-unit-order.md)
__device__ __forceinline__ bool tessera_sm90_unit(const TesseraSm90Params& p, int total, int k_tiles, int u,
                                                  TesseraSm90Unit& w) {
  w.kb = 0;
  w.ke = k_tiles;
  w.role = 0;
  w.t0 = 0;
  w.kpos = (unsigned long long)u * k_tiles;
  // (Whole tiles without divisions: the consumers look the next unit up while the last
  // k-tile's wgmma run.)
  if (!kStreamK || p.sk_tiles == 0 || u < p.sk_waves) {
    w.tile = (int)blockIdx.x + u * (int)gridDim.x;
    return w.tile < total - (kStreamK ? p.sk_tiles : 0);
  }
  const int whole_end = total - p.sk_tiles;
  const int waves = p.sk_waves;
  const int v = u - waves;
  const int c = tessera_sm90_sk_cta(p);
  const int g0 = tessera_sm90_sk_cut(p, k_tiles, c), g1 = tessera_sm90_sk_cut(p, k_tiles, c + 1);
  const int parts = g1 > g0 ? (g1 - 1) / k_tiles - g0 / k_tiles + 1 : 0;
  if (v >= parts) return false;
  const int ti = (g1 - 1) / k_tiles - v;
  const int t0 = ti * k_tiles;
  w.tile = whole_end + ti;
  w.kb = max(g0, t0) - t0;
  w.ke = min(g1, t0 + k_tiles) - t0;
  w.role = w.ke == k_tiles ? 2 : 1;
  w.t0 = t0;
  // After the whole tiles and, for the second part, the first (which ends the run).
  w.kpos = (unsigned long long)waves * k_tiles + (v == 0 ? 0ull : (unsigned long long)(g1 - (t0 + k_tiles)));
  return true;
}

// The grid of cluster tiles: the tile grid with the paired dimension divided by kCluster,
// rounded up. When that dimension is odd, the second tile of the last pair lies outside D: it
// is loaded (TMA writes zeros for elements outside the tensor and still counts their bytes)
// and computed, and the epilogue's bounds checks drop all of its stores.
__device__ __forceinline__ int tessera_sm90_cluster_tiles_m(const TesseraSm90Params& p) {
  return kShareB ? (p.tiles_m + kCluster - 1) / kCluster : p.tiles_m;
}

__device__ __forceinline__ int tessera_sm90_cluster_tiles_n(const TesseraSm90Params& p) {
  return kShareA ? (p.tiles_n + kCluster - 1) / kCluster : p.tiles_n;
}

// Tile `tile` of the persistent order (a cluster tile when kCluster > 1) -> the (batch, tile
// row, tile column) CTA `rank` of the cluster works on.
__device__ __forceinline__ void tessera_sm90_cta_tile(int tile, int rank,
                                                      const TesseraSm90Params& p, int& b,
                                                      int& tm, int& tn) {
  // tessera_sm90_tile's grouped order over the grid of cluster tiles.
  TesseraSm90Params q = p;
  q.tiles_m = tessera_sm90_cluster_tiles_m(p);
  q.tiles_n = tessera_sm90_cluster_tiles_n(p);
  int cm, cn;
  tessera_sm90_tile(tile, q, b, cm, cn);
  tm = kShareB ? cm * kCluster + rank : cm;
  tn = kShareA ? cn * kCluster + rank : cn;
}

// The n-th unit of a consumer's CTA (tessera_sm90_unit; with a cluster, the cluster's n-th
// cluster tile, which both CTAs take together, whole); false past the last.
__device__ __forceinline__ bool tessera_sm90_unit_of(const TesseraSm90Params& p, const int& total,
                                                     const int& k_tiles, int n,
                                                     TesseraSm90Unit& w) {
#if TESSERA_SM90_CLUSTER > 1
  w.tile = (int)(tessera_cluster_id_x() + n * tessera_cluster_count_x());
  w.kb = 0;
  w.ke = k_tiles;
  w.role = 0;
  w.t0 = 0;
  w.kpos = (unsigned long long)n * k_tiles;
  return w.tile < total;
#else
  return tessera_sm90_unit(p, total, k_tiles, n, w);
#endif
}

// A unit's tile -> the (batch, tile row, tile column) this CTA works on.
__device__ __forceinline__ void tessera_sm90_decode(const TesseraSm90Params& p, int tile, int& b,
                                                    int& tm, int& tn) {
#if TESSERA_SM90_CLUSTER > 1
  tessera_sm90_cta_tile(tile, tessera_cluster_ctarank(), p, b, tm, tn);
#else
  tessera_sm90_tile(tile, p, b, tm, tn);
#endif
}

// With the halo load (TESSERA_SM90_HALO) a stage holds the strip of one filter row and
// channel block and the B k-tiles of its kHaloTaps taps: tap s reads the strip from
// kHaloTapBytes s further on (the 128-byte swizzle is a function of the address, for TMA's
// writes and wgmma's reads alike, so a start inside the swizzle atom reads what TMA wrote
// there), and its B k-tile from kBTapBytes s. Else one tap: kHaloTaps = 1.
#ifdef TESSERA_SM90_HALO
constexpr int kBTapSlots = kBPanel ? kConvCBlocks : 1;
#else
constexpr int kBTapSlots = 1;
#endif
constexpr unsigned kBTapBytes = kBTapSlots * kStageBytesB;

#ifdef TESSERA_SM90_HALO
// The halo load's virtual row v (the kernel's M) as output pixel q of row p of image n:
// q = v % kHaloPitch of output row v / kHaloPitch, kHaloPRound rows an image. Rows with
// q >= Q or p >= P are never stored (the epilogue's maps drop them).
__device__ __forceinline__ void tessera_sm90_halo_pixel(int v, int& q, int& p, int& n) {
  const int vr = v / kHaloPitch;
  q = v % kHaloPitch;
  p = vr % kHaloPRound;
  n = vr / kHaloPRound;
}
#endif

// The GEMM's k-tile of tap 0 of stage k-tile kt: with the halo load stage kt is filter row
// kt / kConvCBlocks of channel block kt % kConvCBlocks, and its tap s is GEMM k-tile
// (r kHaloTaps + s) kConvCBlocks + cb, so tap s lies kConvCBlocks k-tiles past tap 0.
__device__ __forceinline__ int tessera_sm90_ktile0(int kt) {
#ifdef TESSERA_SM90_HALO
  return kt / kConvCBlocks * kHaloTaps * kConvCBlocks + kt % kConvCBlocks;
#else
  return kt;
#endif
}

// B's slot of tap 0 of stage k-tile kt held in ring stage `stage` (the panel holds every
// k-tile in its GEMM order; the ring a stage's kHaloTaps k-tiles side by side).
__device__ __forceinline__ int tessera_sm90_b_slot(int kt, int stage) {
  return kBPanel ? tessera_sm90_ktile0(kt) : stage * kHaloTaps;
}

// A consumer's wgmma of one k-tile into acc (every tap of a halo stage), from the stage's A
// rows at a_addr and B at b_addr, as one commit group. `accumulate`: add to acc (else the
// first k-step overwrites it).
__device__ __forceinline__ void tessera_sm90_mma_ktile(float (&acc)[kMHalves][kBN / 2],
                                                       unsigned a_addr, unsigned b_addr,
                                                       bool accumulate) {
  tessera_wgmma_fence();
#ifdef TESSERA_SM90_WINDOW
  // The window load: step kk's two k-chunks are strips kWinHi[kk]'s LBO apart from
  // kWinOff[kk] (rows 16 bytes apart); the filter holds zeros past the k-tile's taps, so the
  // steps after the last tap are not issued.
  constexpr int kSteps = kWinSteps;
#else
  constexpr int kSteps = kKSteps;
#endif
#pragma unroll
  for (int tap = 0; tap < kHaloTaps; ++tap) {
#pragma unroll
    for (int kk = 0; kk < kSteps; ++kk) {
#pragma unroll
      for (int h = 0; h < kMHalves; ++h) {
#ifdef TESSERA_SM90_WINDOW
        const unsigned long long da = tessera_wgmma_desc(a_addr + h * kConsumerBytesA + kWinOff[kk], kWinHi[kk]);
#else
        const unsigned long long da = tessera_wgmma_desc(
            a_addr + tap * kHaloTapBytes + h * kConsumerBytesA + kk * kKStepBytesA, kDescHiA);
#endif
        tessera_wgmma(acc[h], da,
                      tessera_wgmma_desc(b_addr + tap * kBTapBytes + kk * kKStepBytesB, kDescHiB),
                      (accumulate || tap > 0 || kk > 0) ? 1 : 0);
      }
    }
  }
  tessera_wgmma_commit();
}

// Ping-pong: consumer warpgroup cw waits for its turn to start its local-th tile (the other
// warpgroup passes it on when the last stage of its own tile has arrived; warpgroup 1 waits
// from its first tile, warpgroup 0 from its second). A parity wait only tells the current
// phase from the one before. This warpgroup's first stage of the tile is k_tiles stages past
// the other's, possibly several phases ahead of a stage barrier; so it waits until the other
// warpgroup has seen the last stage of its tile arrive: every stage barrier is then at most
// one phase behind ours. The turn is passed on once per tile, by warp 0, but waited for by
// every warp, and the warps of a warpgroup drift apart in the epilogue (each stores its own
// rows); so all four wait for each other before warp 0 can pass this tile's turn on: until
// then the other warpgroup cannot complete the barrier's next phase, which a warp still
// behind would take for this one.
__device__ __forceinline__ void tessera_sm90_wait_turn(unsigned turns, int cw, int local) {
  if (cw == 1 || local > 0) {
    tessera_mbar_wait(turns + 8 * cw, (unsigned)((cw == 1 ? local : local - 1) & 1));
    tessera_bar_sync(1 + cw, 128);
  }
}

// The fused epilogue's bias of tile (tm, tn) of batch b, this thread's kBiasPer values (of the
// 128 threads') as raw bits: a column bias's values of the tile's kBN columns, or a row
// bias's of the warpgroup's rows (all kBM with ping-pong); zero past D.
template <int kBiasPer>
__device__ __forceinline__ void tessera_sm90_load_bias(const TesseraSm90Params& p,
                                                       unsigned (&bias_in)[kBiasPer], int b,
                                                       int tm, int tn, int cw, int t) {
#pragma unroll
  for (int i = 0; i < kBiasPer; ++i) {
    const int e = t + 128 * i;
    const int g = kEpiBias == 2 ? tn * kBN + e : tm * kBM + (kPingPong ? e : 64 * cw + e);
    const bool in = e < kBiasStage && g < (kEpiBias == 2 ? p.n : p.m);
    bias_in[i] = in ? tessera_load_raw(p.bias, (long long)b * p.batch_bias + g, kEpiOut) : 0u;
  }
}

// This thread's bias values (tessera_sm90_load_bias) converted into the tile's bias stage.
template <int kBiasPer>
__device__ __forceinline__ void tessera_sm90_write_bias(float* bias_t,
                                                        const unsigned (&bias_in)[kBiasPer],
                                                        int t) {
#pragma unroll
  for (int i = 0; i < kBiasPer; ++i) {
    if (t + 128 * i < kBiasStage) bias_t[t + 128 * i] = tessera_raw_to_f32(bias_in[i], kEpiOut);
  }
}

// A consumer warp hands stage barrier `bar` (an `empty` barrier) back: to this CTA's producer,
// or with a cluster to the producers of every CTA of the cluster (both wrote the stage).
__device__ __forceinline__ void tessera_sm90_release(unsigned bar) {
#if TESSERA_SM90_CLUSTER > 1
#pragma unroll
  for (int r = 0; r < kCluster; ++r) tessera_mbar_arrive_cluster(tessera_mapa(bar, r));
#else
  tessera_mbar_arrive(bar);
#endif
}

#if TESSERA_SM90_CLUSTER > 1
// The producer thread of CTA `rank` of a cluster: the cluster's tiles, every k-tile of each,
// into consecutive stages of the ring; its part of the shared operand multicast to the whole
// cluster, its whole tile of the other operand to itself.
__device__ __forceinline__ void tessera_sm90_produce_cluster(const TesseraTmaMap& tma_a,
                                                             const TesseraTmaMap& tma_b,
                                                             const TesseraSm90Params& p,
                                                             unsigned smem_a, unsigned smem_b,
                                                             unsigned bars, int total,
                                                             int k_tiles) {
  const int rank = tessera_cluster_ctarank();
  constexpr unsigned short kMask = (unsigned short)((1u << kCluster) - 1);
  int stage = 0;
  unsigned phase = 0;
  const int first = tessera_cluster_id_x(), step = tessera_cluster_count_x();
  int b = 0, tm = 0, tn = 0;
  if (first < total) tessera_sm90_cta_tile(first, rank, p, b, tm, tn);
  for (int tile = first; tile < total; tile += step) {
    // The next tile decoded while this one's first stage is in flight (see the producer in
    // tessera_gemm).
    int nb = 0, ntm = 0, ntn = 0;
    for (int kt = 0; kt < k_tiles; ++kt) {
      const unsigned full = bars + 8 * stage;
      // Released by the consumers of every CTA of the cluster (the partner's producer writes
      // this stage too).
      tessera_mbar_wait(bars + 8 * (kStages + stage), phase ^ 1);
      // The whole stage: the shared operand's other parts come from the partners' multicasts
      // (possibly before this expect_tx: the phase cannot complete before this arrival).
      tessera_mbar_arrive_expect_tx(full, kStageBytesA + kStageBytesB);
      if (kShareA) {
        tessera_tma_load_3d_multicast(smem_a + stage * kStageBytesA + rank * kPartBytesA, &tma_a,
                                      full, kt * kBK, tm * kBM + rank * kPartRowsA, b, kMask);
        tessera_tma_load_3d(smem_b + stage * kStageBytesB, &tma_b, full, kt * kBK, tn * kBN, b);
      } else {
        tessera_tma_load_3d(smem_a + stage * kStageBytesA, &tma_a, full, kt * kBK, tm * kBM, b);
        tessera_tma_load_3d_multicast(smem_b + stage * kStageBytesB + rank * kPartBytesB, &tma_b,
                                      full, kt * kBK, tn * kBN + rank * kPartRowsB, b, kMask);
      }
      if (kt == 0 && tile + step < total) tessera_sm90_cta_tile(tile + step, rank, p, nb, ntm, ntn);
      if (++stage == kStages) {
        stage = 0;
        phase ^= 1;
      }
    }
    b = nb;
    tm = ntm;
    tn = ntn;
  }
}
#endif

// A's box of k-tile kt of M-tile tm (batch b) into shared memory at dst. With
// TESSERA_SM90_IM2COL, A is a convolution's im2col matrix read from x itself: k-tile kt is
// 64 channels of tap (r, s) (k = (c, s, r), c fastest), and the tile's rows are the output
// pixels from m0 = tm kBM on (q fastest), whose window corners the tensor map walks.
__device__ __forceinline__ void tessera_sm90_load_a(unsigned dst, const TesseraTmaMap* map,
                                                    unsigned bar, int kt, int tm, int b) {
#if defined(TESSERA_SM90_HALO)
  static_assert(kCluster == 1 && !kStreamK && kBM == 128, "the halo load: one CTA a tile of 128 rows, whole tiles");
  // Stage kt is filter row r's strip of channel block cb: the tile's output rows' input rows
  // r dh below theirs, from column -pad_left, a {64, box W, rows, 1} box (zeros outside x).
  // The tile's first virtual row v0 = tm kBM is output pixel q0 = v0 % kHaloPitch of output
  // row v0 / kHaloPitch (image n, row p0 of kHaloPRound).
  const int cb = kt % kConvCBlocks, r = kt / kConvCBlocks;
  int q0, p0, n;
  tessera_sm90_halo_pixel(tm * kBM, q0, p0, n);
  (void)b;
  tessera_tma_load_4d(dst, map, bar, cb * kBK, q0 - kConvPl, p0 - kConvPt + r * kConvDh, n);
#elif defined(TESSERA_SM90_IM2COL)
  static_assert(kCluster == 1 && !kStreamK, "the im2col load: one CTA a tile, whole tiles");
  const int cb = kt % kConvCBlocks, tap = kt / kConvCBlocks;
  const int s = tap % kConvS, r = tap / kConvS;
  const int m0 = tm * kBM;
  const int q = m0 % kConvQ, pn = m0 / kConvQ;
  const int p = pn % kConvP, n = pn / kConvP;
  (void)b;
  tessera_tma_load_im2col_4d(dst, map, bar, cb * kBK, q * kConvSw - kConvPl, p * kConvSh - kConvPt,
                             n, (unsigned short)(s * kConvDw), (unsigned short)(r * kConvDh));
#elif defined(TESSERA_SM90_WINDOW)
  static_assert(kCluster == 1 && !kStreamK, "the window load: one CTA a tile, whole tiles");
  // Batch b is the output row (n, p); the tile's rows are its pixels from q0 = tm kBM. Per
  // filter row of the k-tile and phase plane, the strip of chunks q0 .. q0 + kWinStripRows
  // of input row h (the map's rows are 8 chunks: q0 / 8); a filter row past R, and the zero strip, load from h = -1 (outside x:
  // zeros), so their k-chunks are finite against the filter's zeros.
  const int p = b % kConvP, n = b / kConvP;
#pragma unroll
  for (int j = 0; j < kWinRows; ++j) {
    const int r = kt * kWinRows + j;
    const int h = r < kConvR ? p * kConvSh - kConvPt + r * kConvDh : -1;
#pragma unroll
    for (int ph = 0; ph < kWinPlanes; ++ph)
      tessera_tma_load_5d(dst + (j * kWinPlanes + ph) * kWinStripBytes, map, bar, 0, tm * kBM / 8, ph, h, n);
  }
  if (kWinZero) tessera_tma_load_5d(dst + kWinRows * kWinPlanes * kWinStripBytes, map, bar, 0, 0, 0, -1, 0);
#else
  tessera_tma_load_3d(dst, map, bar, kt * kBK, tm * kBM, b);
#endif
}

// The producer thread of a CTA without a cluster: the CTA's whole tiles blockIdx.x,
// blockIdx.x + gridDim.x, ... in order, every k-tile of each, then (stream-K) the parts of its
// run, into consecutive stages of the ring.
__device__ __forceinline__ void tessera_sm90_produce_single(const TesseraTmaMap& tma_a,
                                                            const TesseraTmaMap& tma_b,
                                                            const TesseraSm90Params& p,
                                                            unsigned smem_a, unsigned smem_b,
                                                            unsigned bars, int total,
                                                            int k_tiles) {
  // The whole tiles: blockIdx.x, blockIdx.x + gridDim.x, ... below the stream-K tiles.
  const int end = total - (kStreamK ? p.sk_tiles : 0);
  // (The loop counters are declared ahead of the ring position: the order of declaration
  // orders the compiled loops' registers, on which ptxas's allocation depends.)
  int tile = blockIdx.x;
  int kt;
  int t0;
  int local = 0;
  unsigned phase = 0;
  int stage = 0;
  int b = 0, tm = 0, tn = 0;
  if (blockIdx.x < end) tessera_sm90_tile(blockIdx.x, p, b, tm, tn);
  for (; tile < end; tile += tessera_nctaid_x(), ++local) {
    // The next tile's coordinates are worked out while this tile's first stage is in
    // flight: decoding a tile (four integer divisions) on this one thread, between the last
    // load of a tile and the first of the next, left the ring short at every tile boundary
    // (docs/design/001-tile-decode-placement.md).
    int nb = 0, ntm = 0, ntn = 0;
    for (kt = 0; kt < k_tiles; ++kt) {
      const unsigned full = bars + 8 * stage;
      TESSERA_TL(kt == 0, 0, local, 0);
      tessera_mbar_wait(bars + 8 * (kStages + stage), phase ^ 1);
      TESSERA_TL(kt == 0, 0, local, 1);
      // The B panel (kBPanel: one tile column, cooperative): k-tile kt of B into slot kt
      // with the CTA's first tile only, on the same barrier as its A; both consumers wait for
      // those stages before they read the panel. Otherwise B rides the ring with A.
      const bool load_b = !kBPanel || local == 0;
      tessera_mbar_arrive_expect_tx(full, kLoadBytesA + (load_b ? kHaloTaps * kStageBytesB : 0u));
      tessera_sm90_load_a(smem_a + stage * kStageBytesA, &tma_a, full, kt, tm, b);
#ifdef TESSERA_SM90_WINDOW
      // Every batch (output row) multiplies the one filter, at batch 0.
      const int bb = 0;
#else
      const int bb = b;
#endif
#ifdef TESSERA_SM90_HALO
      // The B k-tiles of the stage's taps: GEMM k-tile (r S + s) kConvCBlocks + cb.
      if (load_b) {
        const int slot = tessera_sm90_b_slot(kt, stage);
        const int g0 = tessera_sm90_ktile0(kt);
#pragma unroll
        for (int s = 0; s < kHaloTaps; ++s)
          tessera_tma_load_3d(smem_b + (slot + s * kBTapSlots) * kStageBytesB, &tma_b, full,
                              (g0 + s * kConvCBlocks) * kBK, tn * kBN, bb);
      }
#else
      if (load_b)
        tessera_tma_load_3d(smem_b + (kBPanel ? kt : stage) * kStageBytesB, &tma_b, full, kt * kBK, tn * kBN, bb);
#endif
      TESSERA_TL(kt == k_tiles - 1, 0, local, 2);
      if (kt == 0 && tile + tessera_nctaid_x() < end) tessera_sm90_tile(tile + tessera_nctaid_x(), p, nb, ntm, ntn);
      if (++stage == kStages) {
        stage = 0;
        phase ^= 1;
      }
    }
    b = nb;
    tm = ntm;
    tn = ntn;
  }
  // Stream-K: then the parts of the CTA's run (tessera_sm90_unit), each part's k-tiles.
  // (A separate loop: this thread has 24 registers, and the run's bounds kept live
  // through the loop of whole tiles spilled.)
  if (kStreamK && p.sk_tiles > 0) {
    // (The parts' bounds as tessera_sm90_unit has them, with as few values live as may be.)
    const int sc = tessera_sm90_sk_cta(p);
    const int g0 = tessera_sm90_sk_cut(p, k_tiles, sc);
    const int g1 = tessera_sm90_sk_cut(p, k_tiles, sc + 1);
    for (t0 = g1 > g0 ? (g1 - 1) / k_tiles * k_tiles : g0; t0 + k_tiles > g0 && g1 > g0; t0 -= k_tiles) {
      tessera_sm90_tile(end + t0 / k_tiles, p, b, tm, tn);
      for (kt = max(g0, t0) - t0; kt < min(g1, t0 + k_tiles) - t0; ++kt) {
        const unsigned full = bars + 8 * stage;
        tessera_mbar_wait(bars + 8 * (kStages + stage), phase ^ 1);
        tessera_mbar_arrive_expect_tx(full, kStageBytesA + kStageBytesB);
        tessera_tma_load_3d(smem_a + stage * kStageBytesA, &tma_a, full, kt * kBK, tm * kBM, b);
        tessera_tma_load_3d(smem_b + stage * kStageBytesB, &tma_b, full, kt * kBK, tn * kBN, b);
        if (++stage == kStages) {
          stage = 0;
          phase ^= 1;
        }
      }
    }
  }
}

#if TESSERA_SM90_CLUSTER == 1
// The cp.async load (kCpAsyncAB): kRows rows of one operand's k-tile (K-major, 16-bit: 8
// chunks of 16 bytes a row) from `row` (this thread's first row, its pointer at the k-tile's
// first element) into the stage at `dst`, in the layout TMA's 128-byte swizzle writes: chunk
// c of row r at r * 128 + (c ^ (r % 8)) * 16. Thread t copies chunk t % 8 of rows t / 8 + 16 j,
// so a warp reads four rows of 128 contiguous bytes each. Rows past `rows_left` and chunks
// past K are zero-filled (K is a multiple of 8: a chunk is whole or outside).
template <int kRows>
__device__ __forceinline__ void tessera_sm90_cp_ktile(unsigned dst, const char* row,
                                                      long long ld_bytes, int rows_left,
                                                      bool chunk_in, const void* safe, int t) {
  const int r0 = t >> 3, c = t & 7;
  unsigned d = dst + r0 * 128 + ((c ^ (r0 & 7)) << 4);
  int left = rows_left - r0;
  // (Rolled, the addresses stepped: unrolled, the rows' 64-bit addresses were hoisted out of
  // the k-tile loop and spilled the producer's few registers.)
#pragma unroll 1
  for (int j = 0; j < kRows / 16; ++j) {
    const bool in = chunk_in && left > 0;
    // (A zero-filled chunk reads nothing; its address is the operand's start all the same.)
    tessera_cp_async_16(d, in ? row : safe, in ? 16u : 0u);
    row += 16 * ld_bytes;
    d += 16 * 128;
    left -= 16;
  }
}

// The producer warpgroup's 128 threads under the cp.async load (kCpAsyncAB: rows of A and B
// that TMA would read off the 32-byte sector grid): the units of tessera_sm90_produce_single
// in the same order, each k-tile's A and B rows copied by every thread, whose arrival on the
// stage's `full` barrier (of 128) comes when its copies have landed.
__device__ __forceinline__ void tessera_sm90_produce_cp_async(const TesseraSm90Params& p,
                                                              unsigned smem_a, unsigned smem_b,
                                                              unsigned bars, int total,
                                                              int k_tiles, int t) {
  static_assert(!kCpAsyncAB || !kBPanel, "the cp.async load: B rides the ring");
  const long long lda = 2 * p.lda, ldb = 2 * p.ldb;
  int stage = 0;
  unsigned phase = 0;
  // Tile (b, tm, tn)'s k-tiles [kb, ke): this thread's rows of A and B, from row t / 8.
  auto unit = [&](int b, int tm, int tn, int kb, int ke) {
    const int r0 = t >> 3;
    const char* a_row = static_cast<const char*>(p.a) + 2 * ((long long)b * p.batch_a) + (tm * kBM + r0) * lda + 16 * (t & 7);
    const char* b_row = static_cast<const char*>(p.b) + 2 * ((long long)b * p.batch_b) + (tn * kBN + r0) * ldb + 16 * (t & 7);
    const int a_left = p.m - tm * kBM, b_left = p.n - tn * kBN;
#pragma unroll 1
    for (int kt = kb; kt < ke; ++kt) {
      tessera_mbar_wait(bars + 8 * (kStages + stage), phase ^ 1);
      const bool chunk_in = kt * kBK + 8 * (t & 7) < p.k;
      tessera_sm90_cp_ktile<kBM>(smem_a + stage * kStageBytesA, a_row + 2 * kt * kBK, lda, a_left, chunk_in, p.a, t);
      tessera_sm90_cp_ktile<kBN>(smem_b + stage * kStageBytesB, b_row + 2 * kt * kBK, ldb, b_left, chunk_in, p.b, t);
      tessera_cp_async_arrive(bars + 8 * stage);
      if (++stage == kStages) {
        stage = 0;
        phase ^= 1;
      }
    }
  };
  // The CTA's units in the consumers' order (tessera_sm90_unit: whole tiles, then stream-K
  // parts), through one copy of the loop: two (whole tiles, parts) spilled the producer's
  // registers.
#pragma unroll 1
  for (int u = 0;; ++u) {
    TesseraSm90Unit w;
    if (!tessera_sm90_unit(p, total, k_tiles, u, w)) break;
    int b, tm, tn;
    tessera_sm90_tile(w.tile, p, b, tm, tn);
    unit(b, tm, tn, w.kb, w.ke);
  }
  // (The thread's last copies land before it leaves.)
  asm volatile("cp.async.wait_all;\n" ::: "memory");
}
#endif

// The producer warpgroup's thread 0: every k-tile of the CTA's (or cluster's) work, in the
// order the consumers take it, into consecutive stages of the ring.
__device__ __forceinline__ void tessera_sm90_produce(const TesseraTmaMap& tma_a,
                                                     const TesseraTmaMap& tma_b,
                                                     const TesseraSm90Params& p, unsigned smem_a,
                                                     unsigned smem_b, unsigned bars, int total,
                                                     int k_tiles) {
#if TESSERA_SM90_CLUSTER > 1
  tessera_sm90_produce_cluster(tma_a, tma_b, p, smem_a, smem_b, bars, total, k_tiles);
#else
  tessera_sm90_produce_single(tma_a, tma_b, p, smem_a, smem_b, bars, total, k_tiles);
#endif
}

// Pre-activation of one element: alpha * acc + beta * C + bias. The epilogue's terms, its
// activation and the output type are compile-time constants of the plan (kEpi*), so each
// variant's code is only what it computes.
__device__ __forceinline__ float tessera_sm90_pre(const TesseraSm90Params& p, float acc, int b,
                                                  int row, int col) {
  float x = p.alpha * acc;
  if (kEpiReadC) {
    x += p.beta * tessera_load(p.c, (long long)b * p.batch_c + (long long)row * p.ldc + col,
                               kEpiOut);
  }
  if (kEpiBias == 1) {
    x += tessera_load(p.bias, (long long)b * p.batch_bias + row, kEpiOut);
  } else if (kEpiBias == 2) {
    x += tessera_load(p.bias, (long long)b * p.batch_bias + col, kEpiOut);
  }
  return x;
}

// Writes accumulator elements (row, col) and (row, col + 1) through the epilogue.
__device__ __forceinline__ void tessera_sm90_store(const TesseraSm90Params& p, int b, int row,
                                                   int col, float v0, float v1) {
  if (row >= p.m || col >= p.n) return;
  const bool second = col + 1 < p.n;
  const float x0 = tessera_sm90_pre(p, v0, b, row, col);
  const float x1 = second ? tessera_sm90_pre(p, v1, b, row, col + 1) : 0.0f;
  const long long di = (long long)b * p.batch_d + (long long)row * p.ldd + col;
  const long long ai = (long long)b * p.batch_aux + (long long)row * p.ldaux + col;
  const bool pair = second && (p.flags & kSm90FlagStorePair);
  if (kEpiAux) {
    if (pair) {
      tessera_store2(p.aux, ai, x0, x1, kEpiOut);
    } else {
      tessera_store(p.aux, ai, x0, kEpiOut);
      if (second) tessera_store(p.aux, ai + 1, x1, kEpiOut);
    }
  }
  const float y0 = tessera_activate(x0, kEpiAct, kEpiCoarse);
  const float y1 = tessera_activate(x1, kEpiAct, kEpiCoarse);
  if (pair) {
    tessera_store2(p.d, di, y0, y1, kEpiOut);
  } else {
    tessera_store(p.d, di, y0, kEpiOut);
    if (second) tessera_store(p.d, di + 1, y1, kEpiOut);
  }
}

// Registers [k0, k0 + kCount) of pass `pass` (m64 half pass / kPassesN, column block
// pass % kPassesN) of a consumer's accumulators. In an unrolled pass loop the indices are
// constants, so the copies are register names, not run-time selects.
template <int kCount>
__device__ __forceinline__ void tessera_sm90_pass_regs(const float (&acc)[kMHalves][kBN / 2],
                                                       int pass, int k0, float (&v)[kCount]) {
  constexpr int kPassesN = kBN / kEpiCols;
#pragma unroll
  for (int hh = 0; hh < kMHalves; ++hh) {
#pragma unroll
    for (int jj = 0; jj < kPassesN; ++jj) {
      if (hh * kPassesN + jj == pass) {
#pragma unroll
        for (int k = 0; k < kCount; ++k) v[k] = acc[hh][jj * kEpiRegs + k0 + k];
      }
    }
  }
}

// The epilogue's tensors (D, aux, the staged inputs) at the warp's `row` (the kernel's M) and
// column cb of batch b. With the halo load the row is virtual: output pixel row % kHaloPitch
// of output row row / kHaloPitch, and the maps are {n, Q, P, N}, dropping rows past Q or P.
__device__ __forceinline__ void tessera_sm90_store_box(const TesseraTmaMap* map, unsigned src,
                                                       int cb, int row, int b) {
#ifdef TESSERA_SM90_HALO
  int q, p, n;
  tessera_sm90_halo_pixel(row, q, p, n);
  tessera_tma_store_4d(map, src, cb, q, p, n);
#else
  tessera_tma_store_3d(map, src, cb, row, b);
#endif
}
__device__ __forceinline__ void tessera_sm90_load_box(unsigned dst, const TesseraTmaMap* map,
                                                      unsigned bar, int cb, int row, int b) {
#ifdef TESSERA_SM90_HALO
  int q, p, n;
  tessera_sm90_halo_pixel(row, q, p, n);
  tessera_tma_load_4d(dst, map, bar, cb, q, p, n);
#else
  tessera_tma_load_3d(dst, map, bar, cb, row, b);
#endif
}
__device__ __forceinline__ void tessera_sm90_prefetch_box(const TesseraTmaMap* map, int cb,
                                                          int row, int b) {
#ifdef TESSERA_SM90_HALO
  int q, p, n;
  tessera_sm90_halo_pixel(row, q, p, n);
  tessera_tma_prefetch_4d(map, cb, q, p, n);
#else
  tessera_tma_prefetch_3d(map, cb, row, b);
#endif
}

// The TMA store of one pass of the fragment-order epilogues: this thread's packed values of D
// (and, kAux, of aux) into the swizzled buffers at `bufs`, and the TMA store of this warp's
// kWarpRows rows of the 64 x kEpiCols block at launch-relative (cb, row0) of batch b, by the
// warp's first lane. Each warp writes and stores only its own rows (the plan checked the
// accumulator gives them to it, and that they are the per-warp box's layout), so only the
// warp synchronizes: no barrier across the warpgroup. The kStoreBufs buffers are a ring, one
// per store (a pass with aux fills D's buffer and the next for aux): `slot`, the ring position
// of the warp's next store, runs on over passes and tiles, and each store is a bulk group of
// its own, so before a pass writes its buffers the warp waits only until the stores that
// last used them (kStoreBufs back) have read them: kStoreBufs - outputs stores stay in
// flight while the pass is filled. `seq`, the warpgroup's running pass number, only names
// the pass in the debugging timeline. `freed()` runs after the warp's first
// synchronization, when every lane of the warp is past its shared-memory reads before the call.
// That synchronization is a named barrier of the warp alone (1 + kConsumers + the consumer
// warp's index): it waits for nothing outside the warp, like __syncwarp, but ptxas does not
// move code across it, and with __syncwarp in its place the longer trees spill (ptxas
// statistics of drelu_bgrad with C staged).
constexpr int kEpiWarps = 64 / kWarpRows;  // warps of a consumer warpgroup, kWarpRows rows each
static_assert(1 + kConsumers + kEpiWarps * kConsumers <= 16, "a named barrier per consumer warp");
template <bool kAux, typename Freed>
__device__ __forceinline__ void tessera_sm90_store_pass(unsigned bufs, int& slot, int seq, int t,
                                                        const unsigned (&dpk)[kEpiRegs / 2],
                                                        const unsigned (&apk)[kEpiRegs / 2],
                                                        const TesseraTmaMap* tma_d,
                                                        const TesseraTmaMap* tma_aux, int cb,
                                                        int row0, int b, Freed freed) {
  constexpr int kOuts = kAux ? 2 : 1;
  // (Instantiated, unused, by plans without the TMA-store epilogue: one dummy buffer.)
  static_assert(!kEpiTmaStore || kStoreBufs >= kOuts, "a pass's stores each take a buffer");
  constexpr int kInFlight = kStoreBufs > kOuts ? kStoreBufs - kOuts : 0;
  const int aslot = slot + 1 == kStoreBufs ? 0 : slot + 1;
  const unsigned buf = bufs + slot * kStoreBufBytes;
  const unsigned abuf = bufs + aslot * kStoreBufBytes;
  slot = kAux ? (aslot + 1 == kStoreBufs ? 0 : aslot + 1) : aslot;
  const int w = t / 32;
  const bool lead = t % 32 == 0;
  TESSERA_TLP(seq, 0);
  // (With the staged input in the store buffers the pass's load into this buffer already
  // waited for the store that last used it: tessera_sm90_stage_in_store.)
  if (lead && !kStagedInStore) tessera_bulk_wait_read<kInFlight>();
  // The consumer warps are warps 4 and up (warps 0-3 are the producer warpgroup's).
  tessera_bar_sync(1 + kConsumers + (int)(threadIdx.x / 32) - 4, 32);
  TESSERA_TLP(seq, 1);
  freed();
#pragma unroll
  for (int k = 0; k < kEpiRegs; k += 2) {
    const unsigned off = tessera_frag_off(t, k);
    tessera_sts32(buf + off, dpk[k / 2]);
    if (kAux) tessera_sts32(abuf + off, apk[k / 2]);
  }
  tessera_fence_proxy_async();
  __syncwarp();
  TESSERA_TLP(seq, 2);
  if (lead) {
    const unsigned part = w * kWarpStoreBytes;
    tessera_sm90_store_box(tma_d, buf + part, cb, row0 + kWarpRows * w, b);
    tessera_bulk_commit();
    if (kAux) {
      tessera_sm90_store_box(tma_aux, abuf + part, cb, row0 + kWarpRows * w, b);
      tessera_bulk_commit();
    }
  }
  TESSERA_TLP(seq, 3);
}

// The row store (kSm90FlagRowStore). Where one tile holds all of D's n columns and D's rows
// follow one another in memory (ld = n), a warp's kWarpRows rows of an m64 half are one run
// of kWarpRows n elements, and it starts on 16 bytes whatever n is (the launch checked the
// base and the batch stride; kWarpRows n 2 bytes is a multiple of 32). So a D whose rows are
// off TMA's 16-byte grid (n not a multiple of 8) still leaves through shared memory without a
// tensor map: the warp packs its rows pass by pass into its run of the store buffers (row
// pitch n elements, D's run at kWarpRows n 2 w bytes into the consumer's buffers, aux's 64 n 2
// bytes after D's: the launch checked they fit), and after the half's last pass its first
// lane copies each run out with one bulk copy of its length rounded down to 16 bytes; the
// lanes store the rest (fewer than 8 elements) themselves. The half's first pass waits until
// the copies of the warp's previous half have read the run. `run_of()`: the warp's first row
// in global memory and how many of its rows are inside D (computed only at the copy: held
// through the passes, its pointers would take registers the larger trees need).
//
// The packing is straight-line code, one 4-byte store a register pair: a pass's pairs are
// (row, column) (r + 8 ((k / 2) % 2), c + 8 (k / 4)) and the next column, c = j kEpiCols +
// 2 (lane % 4) (the planner checks this form of the fragment). Row r of the run starts at byte
// 2 n r, on 4 bytes unless n and r are both odd. A row on 4 bytes stores each pair as a word;
// with n odd its last column n - 1 (even) goes alone. A row on 2 bytes ("shifted") stores the
// words (c - 1, c): the element to the left comes from the lane to the left in the quad, and a
// quad's first lane takes it from the quad's last lane, which sends its previous column
// group's pair; the pass's first and last columns, whose neighbours belong to other passes,
// go alone.
struct TesseraSm90Run {
  char* d;
  char* aux;
  int rows;
};
template <bool kAux, typename RunOf, typename Freed>
__device__ __forceinline__ void tessera_sm90_row_pass(unsigned bufs, int j, int n, int t,
                                                      const unsigned (&dpk)[kEpiRegs / 2],
                                                      const unsigned (&apk)[kEpiRegs / 2],
                                                      RunOf run_of, Freed freed) {
  constexpr int kPassesN = kBN / kEpiCols;
  constexpr int kGroups = kEpiCols / 8;
  static_assert(kEpiRegs == 4 * kGroups, "a pass: two rows of kGroups column groups of pairs");
  const int w = t / 32;
  const int lane = t % 32;
  const int g = lane % 4;
  const unsigned pitch = 2u * (unsigned)n;
  const unsigned dbuf = bufs + (unsigned)(kWarpRows * w) * pitch;
  const unsigned aux_off = 64u * pitch;  // aux's run, 64 rows after D's
  const unsigned abuf = dbuf + aux_off;
  if (j == 0 && lane == 0) tessera_bulk_wait_read<0>();
  // (The warp's own named barrier, as in tessera_sm90_store_pass.)
  tessera_bar_sync(1 + kConsumers + (int)(threadIdx.x / 32) - 4, 32);
  freed();
  const int r = tessera_acc_row(t, 0) - kWarpRows * w;
  const int c = j * kEpiCols + 2 * g;
  const bool odd_n = (n & 1) != 0;
  const bool shifted = odd_n && (r & 1) != 0;  // rows r and r + 8 alike
  const unsigned base = dbuf + (unsigned)r * pitch + 2u * (unsigned)c - (shifted ? 2u : 0u);
  const unsigned base8 = base + 8u * pitch;
  // Group i's word is inside the row while 8 i < lim.
  const int lim = n - c - (odd_n && !shifted ? 1 : 0);
  if (!odd_n) {
#pragma unroll
    for (int k = 0; k < kEpiRegs; k += 2) {
      const unsigned at = ((k / 2) % 2 ? base8 : base) + 16u * (unsigned)(k / 4);
      const bool in = 8 * (k / 4) < lim;
      tessera_sts32_if(in, at, dpk[k / 2]);
      if (kAux) tessera_sts32_if(in, at + aux_off, apk[k / 2]);
    }
  } else {
    const int from = (lane & ~3) | ((lane + 3) & 3);
    // (left's high half, own low half) on a shifted row, else the own pair.
    const unsigned sel = shifted ? 0x5432u : 0x7654u;
#pragma unroll
    for (int k = 0; k < kEpiRegs; k += 2) {
      const int i = k / 4;
      const unsigned at = ((k / 2) % 2 ? base8 : base) + 16u * (unsigned)i;
      const int q = i > 0 ? k / 2 - 2 : k / 2;  // the pair of the previous group, same row
      const bool prev = g == 3 && i > 0;
      const unsigned dl = __shfl_sync(0xffffffffu, prev ? dpk[q] : dpk[k / 2], from);
      unsigned al = 0u;
      if (kAux) al = __shfl_sync(0xffffffffu, prev ? apk[q] : apk[k / 2], from);
      const bool first = shifted && i == 0 && g == 0;
      const bool word = 8 * i < lim && !first;
      tessera_sts32_if(word, at, __byte_perm(dl, dpk[k / 2], sel));
      if (kAux) tessera_sts32_if(word, at + aux_off, __byte_perm(al, apk[k / 2], sel));
      if (i == 0) {
        const bool alone = first && c < n;
        tessera_sts16_if(alone, at + 2u, dpk[k / 2]);
        if (kAux) tessera_sts16_if(alone, at + 2u + aux_off, apk[k / 2]);
      }
      if (i == kGroups - 1) {
        const bool alone = shifted && g == 3 && c + 8 * i + 1 < n;
        tessera_sts16_if(alone, at + 4u, dpk[k / 2] >> 16);
        if (kAux) tessera_sts16_if(alone, at + 4u + aux_off, apk[k / 2] >> 16);
      }
    }
    // A row on 4 bytes: its last column, n - 1, alone (held in this pass by one lane of the quad).
    const int last = n - 1 - c;
    const bool alone = !shifted && last >= 0 && last < kEpiCols && last % 8 == 0;
    unsigned d0 = dpk[0], d1 = dpk[1], a0 = apk[0], a1 = apk[1];
#pragma unroll
    for (int i = 1; i < kGroups; ++i) {
      const bool here = last == 8 * i;
      d0 = here ? dpk[2 * i] : d0;
      d1 = here ? dpk[2 * i + 1] : d1;
      a0 = here ? apk[2 * i] : a0;
      a1 = here ? apk[2 * i + 1] : a1;
    }
    tessera_sts16_if(alone, base + 2u * (unsigned)last, d0);
    tessera_sts16_if(alone, base8 + 2u * (unsigned)last, d1);
    if (kAux) {
      tessera_sts16_if(alone, base + 2u * (unsigned)last + aux_off, a0);
      tessera_sts16_if(alone, base8 + 2u * (unsigned)last + aux_off, a1);
    }
  }
  if (j != kPassesN - 1) return;
  const TesseraSm90Run run = run_of();
  if (run.rows > 0) {
    tessera_fence_proxy_async();
    __syncwarp();
    const unsigned bytes = (unsigned)min(run.rows, kWarpRows) * pitch;
    const unsigned bulk = bytes & ~15u;
    if (lane == 0 && bulk > 0) {
      tessera_bulk_store(run.d, dbuf, bulk);
      if (kAux) tessera_bulk_store(run.aux, abuf, bulk);
      tessera_bulk_commit();
    }
    if (2u * lane < bytes - bulk) {
      const unsigned o = bulk + 2u * lane;
      *reinterpret_cast<unsigned short*>(run.d + o) = tessera_lds16(dbuf + o);
      if (kAux) *reinterpret_cast<unsigned short*>(run.aux + o) = tessera_lds16(abuf + o);
    }
  }
}

#ifdef TESSERA_EPILOGUE_TREE
// The generated epilogue over one thread's kIters column pairs of a 64 x kEpiCols block: rows
// r + kRowsPerIter it, columns c and c + 1. kInside: the whole block is inside the launch and
// D is stored in pairs, so no bounds checks. Row sums are reduced over the row's 16 lanes per
// iteration; the aux bits of iteration it go to bits 2 it and 2 it + 1 of pass_bits. kCase:
// the block's case of tessera_ep_block_case (its hoisted select predicates as constants).
template <bool kInside, int kIters, int kRowsPerIter, int kCase>
__device__ __forceinline__ void tessera_sm90_tree_iterations(const TesseraEpArgs& a,
                                                             TesseraEpCta& cta,
                                                             const TesseraSm90Params& p, int b,
                                                             int r, int c, int t,
                                                             const float2 (&v)[kIters],
                                                             unsigned& pass_bits) {
  // The input loads may move above earlier stores (tessera_ep_ld), but only within a group of
  // kGroup iterations: the input pointers pass through an opaque step after each group's
  // stores, so the next group's loads wait for them. Without it the compiler hoists all eight
  // iterations' loads beside the 128 accumulator registers and spills.
  constexpr int kGroup = 4;
  TesseraEpArgs g = a;
  // The caller takes this path with a bit mask only when its words can be gathered: say so as
  // a constant, so that tessera_ep_store_bit compiles to the noting of the bit alone.
  if (kInside) cta.word_bits = kTesseraEpBits;
#pragma unroll
  for (int it = 0; it < kIters; ++it) {
    const int row = r + kRowsPerIter * it;
    cta.reg_row = 0.0f;
    cta.bits = 0u;
    if (kInside) {
      if (it % kGroup == 0) tessera_ep_opaque_inputs(g);
      tessera_ep_pair_inside<kCase>(g, cta, b, row, c, v[it].x, v[it].y);
    } else if (row < p.m && c < p.n) {
      tessera_ep_pair<kCase>(a, cta, b, row, c, v[it].x, v[it].y);
    }
    pass_bits |= cta.bits << (2 * it);
    if (kTesseraEpRowSum) {
      float s = cta.reg_row;
#pragma unroll
      for (int o = kEpiCols / 4; o > 0; o /= 2) s += __shfl_xor_sync(0xffffffffu, s, o);
      if (t % (kEpiCols / 2) == 0 && row < p.m) tessera_ep_flush_row(a, b, row, s);
    }
  }
}

// The iterations of a block inside the launch, in case `sc` of tessera_ep_block_case: one
// instantiation per case the tree has (1 + 2^kTesseraEpSides), each with the block's hoisted
// select predicates as constants.
template <int kIters, int kRowsPerIter>
__device__ __forceinline__ void tessera_sm90_tree_inside(int sc, const TesseraEpArgs& a,
                                                         TesseraEpCta& cta,
                                                         const TesseraSm90Params& p, int b, int r,
                                                         int c, int t, const float2 (&v)[kIters],
                                                         unsigned& pass_bits) {
  static_assert(kTesseraEpSides <= 2, "at most two hoisted predicates");
  if constexpr (kTesseraEpSides >= 1) {
    if (sc == 1) return tessera_sm90_tree_iterations<true, kIters, kRowsPerIter, 1>(a, cta, p, b, r, c, t, v, pass_bits);
    if (sc == 2) return tessera_sm90_tree_iterations<true, kIters, kRowsPerIter, 2>(a, cta, p, b, r, c, t, v, pass_bits);
  }
  if constexpr (kTesseraEpSides >= 2) {
    if (sc == 3) return tessera_sm90_tree_iterations<true, kIters, kRowsPerIter, 3>(a, cta, p, b, r, c, t, v, pass_bits);
    if (sc == 4) return tessera_sm90_tree_iterations<true, kIters, kRowsPerIter, 4>(a, cta, p, b, r, c, t, v, pass_bits);
  }
  tessera_sm90_tree_iterations<true, kIters, kRowsPerIter, 0>(a, cta, p, b, r, c, t, v, pass_bits);
}

// The inputs the fragment path stages (sm90_tree_source's kTesseraEpStage*), in slot order
// C, residual, aux_in.
constexpr int kTesseraEpStaged = int(kTesseraEpStageC) + int(kTesseraEpStageR) + int(kTesseraEpStageX);
constexpr int kTesseraEpInRows = kTesseraEpStaged > 0 ? kTesseraEpStaged : 1;
static_assert(kTesseraEpStaged <= kStagedInputs, "the plan has buffers for every staged input");
static_assert(kTesseraEpStaged == 0 || kEpiTmaStore, "inputs are staged on the fragment path");
static_assert(!kStagedInStore || (kTesseraEpStaged == 1 && !kTesseraEpAuxFull && kInBufs == kStoreBufs),
              "the staged input in the store buffers: one input, no aux output, a barrier a buffer");

// The type of staged input `i`.
__device__ __forceinline__ int tessera_sm90_in_dtype(const TesseraEpArgs& a, int i) {
  (void)a;
  if (kTesseraEpStageC && i == 0) return TESSERA_EP_DT_C;
  if (kTesseraEpStageR && i == int(kTesseraEpStageC)) return TESSERA_EP_DT_R;
  return TESSERA_EP_DT_AUX_IN;
}

// A consumer's passes of a tile: its m64 halves times the tile's column blocks.
constexpr int kTilePasses = kMHalves * (kBN / kEpiCols);

// The launch-relative origin of pass q of a consumer's part of tile (tm, tn).
__device__ __forceinline__ void tessera_sm90_pass_origin(int q, int tm, int tn, int cw, int& row0,
                                                         int& cb) {
  constexpr int kPassesN = kBN / kEpiCols;
  row0 = tm * kBM + (kPingPong ? 64 * (q / kPassesN) : 64 * cw);
  cb = tn * kBN + (q % kPassesN) * kEpiCols;
}

// Warp w's rows of the staged inputs' blocks of the pass at (row0, cb) of batch b: loaded by
// TMA into the buffers at `buf` (input i's block at buf + i kInBufs kStoreBufBytes, the warp's
// rows kWarpStoreBytes w into it, the per-warp box of the store buffers), completing barrier
// `bar`, or (kL2) only fetched into L2.
template <bool kL2>
__device__ __forceinline__ void tessera_sm90_stage_pass(const TesseraTmaMap* mc,
                                                        const TesseraTmaMap* mr,
                                                        const TesseraTmaMap* mx, unsigned buf,
                                                        unsigned bar, int row0, int cb, int b,
                                                        int w) {
  if (!kL2) tessera_mbar_arrive_expect_tx(bar, kTesseraEpStaged * kWarpStoreBytes);
  const TesseraTmaMap* maps[3] = {mc, mr, mx};
  const bool on[3] = {kTesseraEpStageC, kTesseraEpStageR, kTesseraEpStageX};
  const int row = row0 + kWarpRows * w;
  int i = 0;
#pragma unroll
  for (int m = 0; m < 3; ++m) {
    if (!on[m]) continue;
    if (kL2) {
      tessera_sm90_prefetch_box(maps[m], cb, row, b);
    } else {
      tessera_sm90_load_box(buf + i * kInBufs * kStoreBufBytes + w * kWarpStoreBytes, maps[m], bar, cb, row, b);
    }
    ++i;
  }
}

// The staged inputs of pass q of a consumer's part of tile (tm, tn) of batch b, for this
// warp's rows: loaded into the pass's buffers (q < kInBufs, completing the warp's barrier of
// the buffer at in_bar + 8 slot) or fetched into L2 (later passes, which the epilogue loads
// two passes ahead).
__device__ __forceinline__ void tessera_sm90_stage_tile_pass(
    int q, const TesseraTmaMap& tma_in_c, const TesseraTmaMap& tma_in_r,
    const TesseraTmaMap& tma_in_x, const unsigned& in_base, const unsigned& in_bar, const int& b,
    const int& tm, const int& tn, const int& cw, const int& t) {
  int row0, cb;
  tessera_sm90_pass_origin(q, tm, tn, cw, row0, cb);
  const int slot = q % kInBufs;
  if (q < kInBufs) {
    tessera_sm90_stage_pass<false>(&tma_in_c, &tma_in_r, &tma_in_x,
                                   in_base + (cw * kStagedInputs * kInBufs + slot) * kStoreBufBytes,
                                   in_bar + 8 * slot, row0, cb, b, t / 32);
  } else {
    tessera_sm90_stage_pass<true>(&tma_in_c, &tma_in_r, &tma_in_x, 0, 0, row0, cb, b, t / 32);
  }
}

// The staged input in the store buffers (kStagedInStore): pass q of the consumer's part of
// tile (tm, tn) of batch b, for this warp's rows, into the store buffer that pass stores D
// from. The warp's stores run through the buffers in order, one a pass, every tile
// kTilePasses of them: the pass's buffer is (local kTilePasses + q) mod kStoreBufs of the
// consumer's, and its barrier completes once per use of the buffer. At this tile's mainloop
// the warp has committed the stores of every earlier tile; the one that last used the buffer
// (kStoreBufs passes back) has kStoreBufs - 1 - q stores after it, so once at most that many
// are still reading, the buffer is free.
template <int kN>
__device__ __forceinline__ void tessera_sm90_wait_read_upto(int n) {
  if constexpr (kN == 0) {
    tessera_bulk_wait_read<0>();
  } else {
    if (n >= kN) {
      tessera_bulk_wait_read<kN>();
    } else {
      tessera_sm90_wait_read_upto<kN - 1>(n);
    }
  }
}
static_assert(!kStagedInStore || kTilePasses <= kStoreBufs, "every pass of a tile has a store buffer");
__device__ __forceinline__ void tessera_sm90_stage_in_store(
    int q, int local, const TesseraTmaMap& tma_in_c, const TesseraTmaMap& tma_in_r,
    const TesseraTmaMap& tma_in_x, unsigned store_base, unsigned in_bar, int b, int tm, int tn,
    int cw, int t) {
  int row0, cb;
  tessera_sm90_pass_origin(q, tm, tn, cw, row0, cb);
  const int slot = (local * kTilePasses + q) % kStoreBufs;
  tessera_sm90_wait_read_upto<kStoreBufs - 1>(kStoreBufs - 1 - q);
  tessera_sm90_stage_pass<false>(&tma_in_c, &tma_in_r, &tma_in_x,
                                 store_base + (cw * kStoreBufs + slot) * kStoreBufBytes,
                                 in_bar + 8 * slot, row0, cb, b, t / 32);
}

// The aux_in mask words of the fragment path: for each pass, the words of this thread's 2
// rows (bits cb .. cb + 31; the launch takes this path with a mask input only when the words
// are so aligned), zero past D. They are fetched into L2 at the top of the tile and loaded with
// its second k-tile, split over the 4 lanes of a quad (which share their rows): lane l loads
// passes l % 4, l % 4 + 4, ..., and a pass takes its two words from its lane of the quad.
// (Loaded a pass ahead instead, their L2 latency showed in every pass:
// docs/design/004-tree-input-staging.md.)
#ifdef TESSERA_EP_DT_STATIC
constexpr bool kTesseraEpPre = true;
#else
constexpr bool kTesseraEpPre = false;
#endif
struct TesseraSm90PassPre {
  unsigned xw[2];
};
// Words held per lane: 2 rows of every fourth pass.
constexpr int kTesseraEpTileWords = 2 * ((kTilePasses + 3) / 4);

template <bool kL2>
__device__ __forceinline__ void tessera_sm90_preload_tile(const TesseraEpArgs& a,
                                                          const TesseraSm90Params& p, int b, int tm,
                                                          int tn, int cw, int t,
                                                          unsigned (&w)[kTesseraEpTileWords]) {
  if (!kTesseraEpPre || !kTesseraEpBitsIn) return;
  // The loads' addresses are computed afresh, not kept from the prefetch (kept, they stayed
  // live through the mainloop, and drelu_bgrad with C staged spilled).
  if (!kL2) asm volatile("" : "+r"(t));
#pragma unroll
  for (int s = 0; s < kTesseraEpTileWords / 2; ++s) {
    const int q = (t & 3) + 4 * s;
    int row0 = 0, cb = 0;
    tessera_sm90_pass_origin(q, tm, tn, cw, row0, cb);
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const int row = row0 + tessera_acc_row(t, 2 * i);
      unsigned x = 0u;
      if (q < kTilePasses && row < p.m && cb < p.n) {
        const unsigned* wp = static_cast<const unsigned*>(a.aux_in) +
                             (tessera_ep_at(a.batch_aux_in, a.ld_aux_in, b, a.row0 + row, a.col0 + cb) >> 5);
        if (kL2) {
          asm volatile("prefetch.global.L2 [%0];" ::"l"(wp));
        } else {
          // Volatile: an asm without side effects may be executed ahead of the bounds check
          // above, reading past the mask's last row.
          asm volatile("ld.global.nc.u32 %0, [%1];" : "=r"(x) : "l"(wp));
        }
      }
      if (!kL2) w[2 * s + i] = x;
    }
  }
}

// Pass `pass`'s words (tessera_sm90_preload_tile) from the lane of the quad that loaded them;
// every lane of the warp takes part.
__device__ __forceinline__ TesseraSm90PassPre tessera_sm90_pass_words(
    const unsigned (&w)[kTesseraEpTileWords], int pass, int lane) {
  TesseraSm90PassPre q{};
  if (kTesseraEpPre && kTesseraEpBitsIn) {
    const int src = (lane & ~3) | (pass & 3);
    q.xw[0] = __shfl_sync(0xffffffffu, w[2 * (pass / 4)], src);
    q.xw[1] = __shfl_sync(0xffffffffu, w[2 * (pass / 4) + 1], src);
  }
  return q;
}

// The bias vectors a tree's kernel stages per tile: those the plan has room for and the tree
// reads (bias_col's kTesseraVecCols values first, then bias_row's).
constexpr int kTesseraVecRows = kTesseraEpBiasRow ? kVecRowStage : 0;
constexpr int kTesseraVecCols = kTesseraEpBiasCol ? kVecColStage : 0;
// A tree epilogue's bias vectors of tile (tm, tn) of batch b, this thread's kVecPer values
// (of the 128 threads') as raw bits: bias_col's kTesseraVecCols values of the tile's columns,
// then bias_row's of the warpgroup's rows, zero past D.
template <int kVecPer>
__device__ __forceinline__ void tessera_sm90_load_vectors(const TesseraEpArgs& a,
                                                          const TesseraSm90Params& p,
                                                          unsigned (&vec_in)[kVecPer],
                                                          const int& b, const int& tm,
                                                          const int& tn, const int& cw,
                                                          const int& t) {
  constexpr int kVecLen = kTesseraVecRows + kTesseraVecCols;
  if (kVecLen > 0) {
#pragma unroll
    for (int i = 0; i < kVecPer; ++i) {
      const int e = t + 128 * i;
      unsigned v = 0u;
      if (e < kTesseraVecCols) {
        const int col = tn * kBN + e;
        if (col < p.n) v = tessera_load_raw(a.bias_col, b * a.batch_bias_col + a.col0 + col, TESSERA_EP_DT_BIAS_COL);
      } else if (e < kVecLen) {
        const int row = tm * kBM + (kPingPong ? 0 : 64 * cw) + (e - kTesseraVecCols);
        if (row < p.m) v = tessera_load_raw(a.bias_row, b * a.batch_bias_row + a.row0 + row, TESSERA_EP_DT_BIAS_ROW);
      }
      vec_in[i] = v;
    }
  }
}

// This thread's bias vector values (tessera_sm90_load_vectors) converted into the tile's
// vector stage, which every warp of the warpgroup reads after the barrier here.
template <int kVecPer>
__device__ __forceinline__ void tessera_sm90_write_vectors(const TesseraEpArgs& a, float* vec_t,
                                                           const unsigned (&vec_in)[kVecPer],
                                                           int cw, int t) {
  (void)a;  // (the type macros name it `a`)
#pragma unroll
  for (int i = 0; i < kVecPer; ++i) {
    const int e = t + 128 * i;
    if (e < kTesseraVecRows + kTesseraVecCols) {
      vec_t[e] = tessera_raw_to_f32(vec_in[i], e < kTesseraVecCols ? TESSERA_EP_DT_BIAS_COL : TESSERA_EP_DT_BIAS_ROW);
    }
  }
  tessera_bar_sync(1 + cw, 128);
}

// An output bit mask's rows of a consumer's part of tile (tm, tn) of batch b: per m64 half,
// the first word of the tile's columns in the row of the slot lane bit 0 picks (the row this
// lane stores, when lane bit 1 is clear); null past M. (The launch takes the fragment path
// only when rows, batches and the region start on word boundaries.)
__device__ __forceinline__ void tessera_sm90_mask_rows(const TesseraEpArgs& ea,
                                                       const TesseraSm90Params& p,
                                                       unsigned* (&mask_rows)[kMHalves], int b,
                                                       int tm, int tn, int cw, int t, int lane) {
#pragma unroll
  for (int h = 0; h < kMHalves; ++h) {
    const int row = tm * kBM + (kPingPong ? 64 * h : 64 * cw) + tessera_acc_row(t, 2 * (lane & 1));
    mask_rows[h] = kTesseraEpBits && row < p.m
                       ? static_cast<unsigned*>(ea.aux) +
                             (tessera_ep_at(ea.batch_aux, ea.ldaux, b, ea.row0 + row, ea.col0 + tn * kBN) >> 5)
                       : nullptr;
  }
}

// Whether the fragment path's elements load nothing from global memory: every input the tree
// reads is staged (C only where it is read), its mask words preloaded, its bias vectors staged.
#ifdef TESSERA_EP_DT_STATIC
constexpr bool kTesseraEpCLoads = kTesseraEpLeafC && !kTesseraEpStageC && TESSERA_EP_READ_C;
#else
constexpr bool kTesseraEpCLoads = kTesseraEpLeafC && !kTesseraEpStageC;
#endif
constexpr bool kTesseraEpNoLoads =
    !kTesseraEpCLoads && (!kTesseraEpLeafR || kTesseraEpStageR) && (!kTesseraEpLeafX || kTesseraEpStageX) &&
    (!kTesseraEpBitsIn || kTesseraEpPre) && (!kTesseraEpBiasRow || kTesseraVecRows > 0) &&
    (!kTesseraEpBiasCol || kTesseraVecCols > 0);

// The fragment path of the tree epilogue (TMA-store plans): one pass, the warpgroup's
// 64 x kEpiCols block at launch-relative (row0, cb), computed where the accumulators are.
// Register k of the pass is element (row0 + tessera_acc_row(t, k), cb + tessera_acc_col(t, k))
// and the planner checked the wgmma fragment's form (epilogue::cuda::check_fragment_form):
// pair k/2 of registers (k, k + 1) is columns (c, c + 1) of row slot (k / 2) % 2 (the rows of
// registers 0 and 2) and column slots 2 (k / 4), 2 (k / 4) + 1. Out: D's and aux's values
// packed in their types (dpk, apk), the row slots' partial sums (added to rs), the column
// slots' partial sums over this thread's two rows (cs, zeroed here), and the aux bits of the
// row slots at their column's bit of the pass's word (wb, zeroed here). kInside: the block is
// inside the launch, no bounds checks; kCase: tessera_ep_block_case's case of the block.
template <bool kInside, int kCase>
__device__ __forceinline__ void tessera_sm90_tree_frag(const TesseraEpArgs& a, TesseraEpCta& cta,
                                                       const TesseraSm90Params& p, int b,
                                                       int row0, int cb, int t,
                                                       const float (&v)[kEpiRegs],
                                                       unsigned (&dpk)[kEpiRegs / 2],
                                                       unsigned (&apk)[kEpiRegs / 2],
                                                       float (&rs)[2], float (&cs)[kEpiRegs / 2],
                                                       unsigned (&wb)[2],
                                                       const unsigned char* in,
                                                       const TesseraSm90PassPre& pre,
                                                       const float* vc, const float* vr) {
  // The input loads may move above earlier stores, but only within a group of kGroup pairs
  // (as in tessera_sm90_tree_iterations: all of a pass's loads beside the accumulators spill).
  // A tree whose every input is staged or preloaded loads nothing here: one group, which
  // leaves the compiler free to schedule the pass's elements together.
  constexpr int kGroup = kTesseraEpNoLoads ? kEpiRegs / 2 : 4;
  TesseraEpArgs g = a;
  // The launch takes this path with a bit mask only when its words can be gathered.
  cta.word_bits = kTesseraEpBits;
  cta.aux_capture = true;
  // The staged inputs' values come from their blocks in shared memory: input i's at
  // in + i kInBufs kStoreBufBytes, in the order C, residual, aux_in.
  cta.staged_c = kTesseraEpStageC;
  cta.staged_r = kTesseraEpStageR;
  cta.staged_x = kTesseraEpStageX;
  cta.staged_xb = kTesseraEpPre && kTesseraEpBitsIn;
  // The bias vectors' values come from the tile's vector stage: this pass's columns at vc,
  // this m64 half's rows at vr.
  cta.staged_bc = kTesseraVecCols > 0;
  cta.staged_br = kTesseraVecRows > 0;
  constexpr int kSlotR = int(kTesseraEpStageC), kSlotX = int(kTesseraEpStageC) + int(kTesseraEpStageR);
  wb[0] = wb[1] = 0u;
  // The partial sums start from -0.0, the identity of fp32 addition (x + -0 = x for every x,
  // where x + +0 is not x for x = -0), so that the compiler can drop each sum's first addition
  // (docs/design/005-column-sum-reduction.md). The sums are the same: they end in the zeroed
  // fp32 workspace, where +0 + -0 = +0.
#pragma unroll
  for (int k = 0; k < kEpiRegs / 2; ++k) cs[k] = -0.0f;
#pragma unroll
  for (int k = 0; k < kEpiRegs; k += 2) {
    if ((k / 2) % kGroup == 0) tessera_ep_opaque_inputs(g);
    const int cc = tessera_acc_col(t, k);
    const int row = row0 + tessera_acc_row(t, k);
    // Even (fragment_pass_form: cc is 2 (lane % 4) + 8 (k / 4), cb a multiple of kEpiCols);
    // said so, the compiler knows the parity of col + e (a mask bit's place in its pair).
    const int col = (cb + cc) & ~1;
    cta.reg_row = -0.0f;
    cta.reg_col0 = -0.0f;
    cta.reg_col1 = -0.0f;
    cta.bits = 0u;
    float d0 = 0.0f, d1 = 0.0f, x0 = 0.0f, x1 = 0.0f;
    if (kInside || (row < p.m && col < p.n)) {
      // This pair's staged values (read here, not for the whole pass up front: few live
      // registers beside the accumulators).
      unsigned w[kTesseraEpInRows];
      const unsigned off = tessera_frag_off(t, k);
#pragma unroll
      for (int i = 0; i < kTesseraEpStaged; ++i) {
        w[i] = *reinterpret_cast<const unsigned*>(in + i * kInBufs * kStoreBufBytes + off);
      }
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        if (e == 1 && !kInside && col + 1 >= p.n) break;
        const auto half = [&](int i) {
          return tessera_b16_to_f32((tessera_b16)(e == 0 ? w[i] & 0xffffu : w[i] >> 16), tessera_sm90_in_dtype(a, i));
        };
        if (kTesseraEpStageC) cta.in_c = half(0);
        if (kTesseraEpStageR) cta.in_r = half(kSlotR);
        if (kTesseraEpStageX) cta.in_x = half(kSlotX);
        if (kTesseraEpPre && kTesseraEpBitsIn) cta.in_xw = pre.xw[(k / 2) % 2];
        if (kTesseraVecCols > 0) cta.in_bc = vc[cc + e];
        if (kTesseraVecRows > 0) cta.in_br = vr[tessera_acc_row(t, k)];
        const float d = tessera_ep_element<kCase>(g, cta, b, row, col + e, v[k + e]);
        (e == 0 ? d0 : d1) = d;
        (e == 0 ? x0 : x1) = cta.aux_val;
      }
    }
    dpk[k / 2] = tessera_pack2(d0, d1, TESSERA_EP_DT_D);
    if (kTesseraEpAuxFull) apk[k / 2] = tessera_pack2(x0, x1, tessera_ep_aux_dtype(g));
    rs[(k / 2) % 2] += cta.reg_row;
    cs[2 * (k / 4)] += cta.reg_col0;
    cs[2 * (k / 4) + 1] += cta.reg_col1;
    // Column cc of the pass is 2 (lane % 4) + 8 (k / 4) (fragment_pass_form): the constant
    // part here, the lane's after the loop.
    wb[(k / 2) % 2] |= cta.bits << (8 * (k / 4));
  }
  wb[0] <<= 2 * (t & 3);
  wb[1] <<= 2 * (t & 3);
}

// A fragment pass's column sums (c: the thread's column slots over its two rows; the pass's
// columns start at cbx), reduced over the 8 lanes of each column and flushed. Column slot s of
// every lane with the same lane % 4 is the same column: halve the slots per exchange (lane
// bits 4, 3, 2), each lane keeping the half its bit names, until one slot,
// s = 4 bit4 + 2 bit3 + bit2, summed over the 8 lanes. Every lane of the warp takes part.
// (Once per pass, not spread over the next pass's elements:
// docs/design/005-column-sum-reduction.md.)
__device__ __forceinline__ void tessera_sm90_reduce_cols(const TesseraEpArgs& ea,
                                                         const TesseraSm90Params& p,
                                                         float (&c)[kEpiRegs / 2], int cbx,
                                                         const int& b, const int& t,
                                                         const int& lane) {
  const int b4 = (lane >> 4) & 1, b3 = (lane >> 3) & 1, b2 = (lane >> 2) & 1;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float give = b4 ? c[i] : c[i + 4];
    c[i] = (b4 ? c[i + 4] : c[i]) + __shfl_xor_sync(0xffffffffu, give, 16);
  }
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const float give = b3 ? c[i] : c[i + 2];
    c[i] = (b3 ? c[i + 2] : c[i]) + __shfl_xor_sync(0xffffffffu, give, 8);
  }
  const float give = b2 ? c[0] : c[1];
  const float sum = (b2 ? c[1] : c[0]) + __shfl_xor_sync(0xffffffffu, give, 4);
  const int s = 4 * b4 + 2 * b3 + b2;
  const int col = cbx + tessera_acc_col(t, 4 * (s / 2) + s % 2);
  if (col < p.n) tessera_ep_flush_col(ea, b, col, sum);
}

// An output bit mask's word of fragment pass (h, j) (mask_word: the row's word, held in
// mask_held until the last pass of its group of kMaskGroup consecutive passes, which stores the
// group's words together: four words in one 16-byte store where they are aligned and inside D,
// else word by word: a word a store is a sector of its own,
// docs/design/006-output-mask-stores.md). mask_rows[h]: the row's first word of the tile's
// columns, null past M; the lanes with bit 1 clear store their row's words.
template <int kMaskGroup>
__device__ __forceinline__ void tessera_sm90_store_mask_word(unsigned (&mask_held)[kMaskGroup],
                                                             const unsigned& mask_word,
                                                             unsigned* const (&mask_rows)[kMHalves],
                                                             const int& h, const int& j,
                                                             const int& cb, const int& lane,
                                                             const TesseraSm90Params& p) {
  mask_held[j % kMaskGroup] = mask_word;
  if (j % kMaskGroup != kMaskGroup - 1) return;
  const int c0 = cb - (kMaskGroup - 1) * kEpiCols;  // the group's first column
  unsigned* wp = mask_rows[h];
  if ((lane & 2) != 0 || wp == nullptr) return;
  wp += j - (kMaskGroup - 1);
  if (kMaskGroup == 4 && c0 + 4 * kEpiCols <= p.n &&
      (reinterpret_cast<unsigned long long>(wp) & 15u) == 0) {
    *reinterpret_cast<uint4*>(wp) = make_uint4(mask_held[0], mask_held[1 % kMaskGroup],
                                               mask_held[2 % kMaskGroup], mask_held[3 % kMaskGroup]);
    return;
  }
#pragma unroll
  for (int g = 0; g < kMaskGroup; ++g) {
    const int valid = min(32, p.n - (c0 + g * kEpiCols));
    if (valid <= 0) break;
    if (valid == 32) {
      wp[g] = mask_held[g];
    } else {
      // The row's last, partial word: only its own bits.
      const unsigned mask = (1u << valid) - 1u;
      atomicAnd(wp + g, ~mask);
      atomicOr(wp + g, mask_held[g] & mask);
    }
  }
}

// tessera_sm90_tree_frag for a block inside the launch, in case `sc` of tessera_ep_block_case.
template <typename... Rest>
__device__ __forceinline__ void tessera_sm90_tree_frag_inside(int sc, const TesseraEpArgs& a,
                                                              TesseraEpCta& cta,
                                                              const TesseraSm90Params& p,
                                                              Rest&... rest) {
  static_assert(kTesseraEpSides <= 2, "at most two hoisted predicates");
  if constexpr (kTesseraEpSides >= 1) {
    if (sc == 1) return tessera_sm90_tree_frag<true, 1>(a, cta, p, rest...);
    if (sc == 2) return tessera_sm90_tree_frag<true, 2>(a, cta, p, rest...);
  }
  if constexpr (kTesseraEpSides >= 2) {
    if (sc == 3) return tessera_sm90_tree_frag<true, 3>(a, cta, p, rest...);
    if (sc == 4) return tessera_sm90_tree_frag<true, 4>(a, cta, p, rest...);
  }
  tessera_sm90_tree_frag<true, 0>(a, cta, p, rest...);
}
#endif

// The scratch path's fused epilogue, one pass: thread t's kIters column pairs v of the
// 64 x kEpiCols block at launch-relative (row0, cb) of m64 half h and column block j
// (bias_t: the tile's bias stage). `interior`: the block is inside D and pairs are aligned.
template <int kIters, int kRowsPerIter>
__device__ __forceinline__ void tessera_sm90_scratch_fused(const TesseraSm90Params& p, int b,
                                                           int row0, int cb, int h, int j, int t,
                                                           bool interior, const float* bias_t,
                                                           const float2 (&v)[kIters]) {
  // (A TMA-store plan comes here only for a D TMA cannot address: the general path.)
  if (!kEpiTmaStore && interior) {
    // Thread t covers the column pair 2 (t % 16) of rows t / 16 + 8 it: one pair of
    // column-bias values per pass; every operand is loaded before the first store.
    const int c = cb + 2 * (t % (kEpiCols / 2));
    const int r = row0 + t / (kEpiCols / 2);
    float x0[kIters], x1[kIters];
#pragma unroll
    for (int it = 0; it < kIters; ++it) {
      x0[it] = p.alpha * v[it].x;
      x1[it] = p.alpha * v[it].y;
    }
    if (kEpiReadC) {
#pragma unroll
      for (int it = 0; it < kIters; ++it) {
        const long long ci = (long long)b * p.batch_c + (long long)(r + kRowsPerIter * it) * p.ldc + c;
        x0[it] += p.beta * tessera_load(p.c, ci, kEpiOut);
        x1[it] += p.beta * tessera_load(p.c, ci + 1, kEpiOut);
      }
    }
    // The bias from the tile's stage (read after this pass's barriers).
    if (kEpiBias == 2) {
      const float2 bc = *reinterpret_cast<const float2*>(bias_t + j * kEpiCols + 2 * (t % (kEpiCols / 2)));
#pragma unroll
      for (int it = 0; it < kIters; ++it) {
        x0[it] += bc.x;
        x1[it] += bc.y;
      }
    } else if (kEpiBias == 1) {
#pragma unroll
      for (int it = 0; it < kIters; ++it) {
        const float br = bias_t[64 * h + t / (kEpiCols / 2) + kRowsPerIter * it];
        x0[it] += br;
        x1[it] += br;
      }
    }
#pragma unroll
    for (int it = 0; it < kIters; ++it) {
      const long long row = r + kRowsPerIter * it;
      if (kEpiAux) {
        tessera_store2(p.aux, (long long)b * p.batch_aux + row * p.ldaux + c, x0[it], x1[it], kEpiOut);
      }
      tessera_store2(p.d, (long long)b * p.batch_d + row * p.ldd + c, tessera_activate(x0[it], kEpiAct, kEpiCoarse),
                     tessera_activate(x1[it], kEpiAct, kEpiCoarse), kEpiOut);
    }
  } else {
#pragma unroll
    for (int it = 0; it < kIters; ++it) {
      const int e = t + 128 * it;
      tessera_sm90_store(p, b, row0 + e / (kEpiCols / 2), cb + 2 * (e % (kEpiCols / 2)),
                         v[it].x, v[it].y);
    }
  }
}

#ifdef TESSERA_EPILOGUE_TREE
// The scratch path's output bit mask of a pass, a word at a time (the caller checked the
// words can be gathered: rows, batches and the region start on word boundaries), after the
// elements (their operands dead): per iteration, each lane puts its pair's two bits
// (pass_bits: bits 2 it, 2 it + 1 for iteration it) at bits 2 l, 2 l + 1 (l its lane in the
// half-warp, whose 16 lanes hold the row's 32 columns in order), and two OR-reductions over
// the warp, one per half-warp, give the two rows' words.
template <int kIters, int kRowsPerIter>
__device__ __forceinline__ void tessera_sm90_scratch_mask_words(const TesseraEpArgs& tessera_ep_args,
                                                                const TesseraSm90Params& p, int b,
                                                                int r, int cb, int t,
                                                                unsigned pass_bits) {
  static_assert(kEpiCols == 32, "a half-warp holds the 32 columns of a row");
  const int valid = min(32, p.n - cb);
  const bool low_half = (t % 32) < 16;
  const int hl = t % 16;
  // The word of row r, column cb; the next iteration's is kRowsPerIter rows down.
  unsigned* w = static_cast<unsigned*>(tessera_ep_args.aux) +
                (tessera_ep_at(tessera_ep_args.batch_aux, tessera_ep_args.ldaux, b,
                               tessera_ep_args.row0 + r, tessera_ep_args.col0 + cb) >> 5);
  const long long step = (long long)kRowsPerIter * (tessera_ep_args.ldaux >> 5);
#pragma unroll
  for (int it = 0; it < kIters; ++it, w += step) {
    const unsigned mine = ((pass_bits >> (2 * it)) & 3u) << (2 * hl);
    const unsigned w_low = __reduce_or_sync(0xffffffffu, low_half ? mine : 0u);
    const unsigned w_high = __reduce_or_sync(0xffffffffu, low_half ? 0u : mine);
    const int row = r + kRowsPerIter * it;
    if (hl == 0 && row < p.m && valid > 0) {
      const unsigned word = low_half ? w_low : w_high;
      if (valid == 32) {
        *w = word;
      } else {
        // The row's last, partial word: only its own bits.
        const unsigned mask = (1u << valid) - 1u;
        atomicAnd(w, ~mask);
        atomicOr(w, word & mask);
      }
    }
  }
}
#endif

// Stream-K: the workspace slot of consumer warpgroup cw of CTA `cta`, its 64 x kBN partial
// sums, thread t's registers 4q .. 4q + 3 at float4 (q 128 + t), so that a warp's accesses
// are 512 contiguous bytes.
__device__ __forceinline__ float4* tessera_sm90_sk_slot(const TesseraSm90Params& p, int cta,
                                                        const int& cw) {
  return reinterpret_cast<float4*>(p.sk_work) + ((long long)cta * kConsumers + cw) * (16 * kBN);
}

// Stream-K, a part without its tile's last k-tile: the warpgroup's partial sums stored to the
// CTA's slot, then the CTA's flag raised (once every thread of the warpgroup has stored, by
// its first thread, with release semantics at GPU scope). The tile's last part adds them in.
// `live`: some row of the thread's (tessera_acc_row(t, 0) and 8 below it) is inside D; the
// others neither store nor load partial sums (with few rows, as in a decode batch, most
// threads hold none, and the fix-up moves only the rows there are).
__device__ __forceinline__ void tessera_sm90_sk_store_part(const TesseraSm90Params& p,
                                                           const float (&acc)[kMHalves][kBN / 2],
                                                           const int& cw, int t, bool live) {
  const int sc = tessera_sm90_sk_cta(p);
  float4* dst = tessera_sm90_sk_slot(p, sc, cw);
  if (live) {
#pragma unroll
    for (int q = 0; q < kBN / 8; ++q) {
      __stcg(dst + q * 128 + t, make_float4(acc[0][4 * q], acc[0][4 * q + 1], acc[0][4 * q + 2], acc[0][4 * q + 3]));
    }
  }
  tessera_bar_sync(1 + cw, 128);
  if (t == 0) tessera_flag_release(p.sk_flags + sc * kConsumers + cw, 1);
}

// Stream-K, unit w, the part with its tile's last k-tile: the parts of the CTAs before this
// one whose runs reach into the tile added into acc (each stored its part first in its run,
// so the waits are short), clearing each flag for the next launch. Every flag is waited for
// first, by one thread, so one barrier orders all the parts' loads after their stores.
__device__ __forceinline__ void tessera_sm90_sk_add_parts(const TesseraSm90Params& p,
                                                          float (&acc)[kMHalves][kBN / 2],
                                                          int k_tiles, const TesseraSm90Unit& w,
                                                          const int& cw, int t, bool live) {
  const int sc = tessera_sm90_sk_cta(p);
  // The places whose runs reach into the tile: [c0, sc) (place c's run ends at cut(c + 1)).
  int c0 = sc;
  while (c0 > 0 && tessera_sm90_sk_cut(p, k_tiles, c0) > w.t0) --c0;
  if (t == 0) {
    for (int c = c0; c < sc; ++c) {
      int* flag = p.sk_flags + c * kConsumers + cw;
      while (tessera_flag_acquire(flag) == 0) __nanosleep(64);
      *flag = 0;
    }
  }
  tessera_bar_sync(1 + cw, 128);
  if (!live) return;
  for (int c = c0; c < sc; ++c) {
    const float4* src = tessera_sm90_sk_slot(p, c, cw);
    // In chunks of kSkChunk loads, which bounds the registers they take beside the
    // accumulators.
#pragma unroll
    for (int q0 = 0; q0 < kBN / 8; q0 += kSkChunk) {
      float4 v[kSkChunk];
#pragma unroll
      for (int q = 0; q < kSkChunk; ++q) v[q] = __ldcg(src + (q0 + q) * 128 + t);
#pragma unroll
      for (int q = 0; q < kSkChunk; ++q) {
        acc[0][4 * (q0 + q)] += v[q].x;
        acc[0][4 * (q0 + q) + 1] += v[q].y;
        acc[0][4 * (q0 + q) + 2] += v[q].z;
        acc[0][4 * (q0 + q) + 3] += v[q].w;
      }
      asm volatile("" ::: "memory");
    }
  }
}

// The scratch path: fragment pass `pass`'s accumulators into the warpgroup's fp32 scratch
// (64 x kEpiCols at pitch kEpiPitch), with compile-time register indices: one predicated block
// per pass.
__device__ __forceinline__ void tessera_sm90_scratch_put(float* scratch,
                                                         const float (&acc)[kMHalves][kBN / 2],
                                                         int pass, int t) {
  constexpr int kPassesN = kBN / kEpiCols;
#pragma unroll
  for (int hh = 0; hh < kMHalves; ++hh) {
#pragma unroll
    for (int jj = 0; jj < kPassesN; ++jj) {
      if (hh * kPassesN + jj == pass) {
#pragma unroll
        for (int i = jj * kEpiRegs; i < (jj + 1) * kEpiRegs; i += 2) {
          const int o = tessera_acc_row(t, i) * kEpiPitch + tessera_acc_col(t, i) - jj * kEpiCols;
          *reinterpret_cast<float2*>(scratch + o) = make_float2(acc[hh][i], acc[hh][i + 1]);
        }
      }
    }
  }
}

// With a cluster, a barrier of every thread of its CTAs (nothing without).
__device__ __forceinline__ void tessera_sm90_cluster_barrier() {
#if TESSERA_SM90_CLUSTER > 1
  tessera_cluster_sync();
#endif
}

// The pipeline's barriers, initialized by thread 0 and visible to every thread (and, with a
// cluster, to the partner CTA) on return: per stage of the ring `full` (at bars + 8 s, one
// arrival: the producer's, with the stage's transaction bytes) and `empty` (at
// bars + 8 (kStages + s), one arrival per consumer warp that reads the stage); the ping-pong
// turns (turns, turns + 8); a barrier per staged-input buffer of each consumer warp (in_bars).
__device__ __forceinline__ void tessera_sm90_init_barriers(unsigned bars, unsigned turns,
                                                           unsigned in_bars) {
  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      // (The cp.async load: every producer thread arrives once its copies have landed.)
      tessera_mbar_init(bars + 8 * s, kCpAsyncAB ? 128 : 1);
      // Cooperative: every consumer warp reads every stage. Ping-pong: one warpgroup does.
      // With a cluster, the consumer warps of every CTA of it.
      tessera_mbar_init(bars + 8 * (kStages + s), (kPingPong ? 1 : kConsumers) * 4 * kCluster);
    }
    tessera_mbar_init(turns, 1);
    tessera_mbar_init(turns + 8, 1);
    for (int i = 0; i < kInBufs * kEpiWarps * kConsumers; ++i) tessera_mbar_init(in_bars + 8 * i, 1);
    tessera_fence_barrier_init();
  }
  __syncthreads();
  // The partner's barriers are initialized (and visible) before anyone arrives on them or
  // multicasts into this CTA.
  tessera_sm90_cluster_barrier();
}

// The length of the persistent order: tiles of every batch, or with a cluster the cluster
// tiles, which the clusters walk.
__device__ __forceinline__ int tessera_sm90_total_tiles(const TesseraSm90Params& p) {
#if TESSERA_SM90_CLUSTER > 1
  return tessera_sm90_cluster_tiles_m(p) * tessera_sm90_cluster_tiles_n(p) * p.batch;
#else
  return p.tiles_m * p.tiles_n * p.batch;
#endif
}

// The bias of a tile (the flag-driven epilogue): kBiasStage values (a column bias: the tile's
// kBN columns; a row bias: this warpgroup's 64 kMHalves rows), kSm90BiasPer per thread, loaded
// from global memory before the tile's mainloop, written to buffer (local & 1) after it and
// read by the epilogue after its first barrier. Two buffers: a thread may write the next
// tile's while another still reads this one's; every thread has passed this tile's epilogue
// barriers (so finished the tile before) when anyone writes the buffer again.
constexpr int kSm90BiasLen = kBiasStage > 0 ? kBiasStage : 1;
constexpr int kSm90BiasPer = (kSm90BiasLen + 127) / 128;
// A tree epilogue's bias vectors, likewise (the fragment path): kSm90VecPer values a thread,
// loaded with the tile's first k-tile, written to buffer (local & 1) of vec_s after the
// mainloop, read after a barrier of the warpgroup. (Loaded per element instead, their L2
// latency dominated a biased tree epilogue: docs/design/003-epilogue-vector-loads.md.)
#ifdef TESSERA_EPILOGUE_TREE
constexpr int kSm90VecRows = kTesseraVecRows, kSm90VecCols = kTesseraVecCols;
#else
constexpr int kSm90VecRows = 0, kSm90VecCols = 0;
#endif
constexpr int kSm90VecLen = kSm90VecRows + kSm90VecCols;
constexpr int kSm90VecBuf = kSm90VecLen > 0 ? kSm90VecLen : 1;
constexpr int kSm90VecPer = (kSm90VecBuf + 127) / 128;

// The tree epilogue's arguments are a kernel parameter only where the kernel has a tree
// epilogue: the role functions below take them, and pass them on, through these.
#ifdef TESSERA_EPILOGUE_TREE
#define TESSERA_SM90_EP_PARAM , const TesseraEpArgs& tessera_ep_args
#define TESSERA_SM90_EP_ARG , tessera_ep_args
#else
#define TESSERA_SM90_EP_PARAM
#define TESSERA_SM90_EP_ARG
#endif

// The kernel's shared memory, carved once: the stage ring of A and B, the barriers, the
// epilogue's scratch (which the TMA-store buffers and staged inputs share), the bias and vector
// stages. Addresses are shared-space; `raw` is the dynamic buffer's own, which pointers into it
// are offset from.
struct TesseraSm90Smem {
  unsigned raw;
  unsigned smem_a, smem_b, bars, turns, in_bars;
  unsigned scratch_base, store_base, in_base, bias_base, vec_base;
};

__device__ __forceinline__ TesseraSm90Smem tessera_sm90_smem() {
  // The 128-byte swizzle repeats every 1024 bytes and the wgmma descriptors carry no base
  // offset, so every stage starts on a 1024-byte boundary (the launch adds 1024 bytes of slack).
  const unsigned raw = tessera_smem_addr(tessera_smem_raw);
  const unsigned base = (raw + 1023u) & ~1023u;
  const unsigned smem_a = base;
  const unsigned smem_b = smem_a + kStages * kStageBytesA;
  const unsigned bars = smem_b + kBRegionBytes;
  // full[s] at bars + 8 s, empty[s] at bars + 8 (kStages + s), the ping-pong turns at
  // bars + 16 kStages + 8 w; then the epilogue scratch, kConsumers x 64 x kEpiPitch floats.
  const unsigned turns = bars + 16 * kStages;
  // The staged inputs' barriers: in_bars + 8 (kInBufs (kEpiWarps cw + w) + s), buffer s of
  // warp w of consumer cw.
  const unsigned in_bars = turns + 16;
  const unsigned scratch_base = in_bars + 8 * kInBufs * kEpiWarps * kConsumers;
  // The TMA-store buffers share the scratch's bytes, aligned for their swizzle; the staged
  // inputs' buffers follow them.
  const unsigned store_base = (scratch_base + kStoreAlign - 1) & ~(kStoreAlign - 1);
  const unsigned in_base = store_base + kConsumers * kStoreBufs * kStoreBufBytes;
  // Then the bias stage: per consumer warpgroup, two buffers of kBiasStage floats.
  const unsigned bias_base = scratch_base + kEpiRegionBytes;
  // Then a tree epilogue's vector stage: per consumer warpgroup, two buffers of kVecColStage
  // bias_col values followed by kVecRowStage bias_row values.
  const unsigned vec_base = bias_base + (kBiasStage > 0 ? kConsumers * 2 * kBiasStage * 4 : 0);
  return TesseraSm90Smem{raw,          smem_a,     smem_b,  bars,      turns,   in_bars,
                         scratch_base, store_base, in_base, bias_base, vec_base};
}

// The mainloop of one unit (a whole tile, or a stream-K part: k-tiles [w.kb, w.ke)) on this
// consumer warpgroup's accumulators: each stage waited for, its wgmma issued, the previous
// stage handed back to the producer once its group is done. `after_issue(kt)` runs after each
// k-tile's wgmma are issued: the work the warp overlaps with the tensor cores (an epilogue's
// prefetches, the next tile's coordinates). Returns the last stage, still held: the caller
// releases it after its own work behind the final wait.
template <typename AfterIssue>
__device__ __forceinline__ int tessera_sm90_mainloop(float (&acc)[kMHalves][kBN / 2],
                                                     const TesseraSm90Unit& w,
                                                     const TesseraSm90Smem& sm, int cw, int t,
                                                     int wg, int slot_tl, int k_tiles,
                                                     AfterIssue after_issue) {
  const unsigned bars = sm.bars, turns = sm.turns, smem_a = sm.smem_a, smem_b = sm.smem_b;
  const int lane = t % 32;
  (void)wg;
  (void)slot_tl;
  (void)turns;
  (void)k_tiles;
  // This unit's first k-tile is the g0-th the producer loaded (its kpos; whole tiles: n
  // k_tiles, ping-pong counting the other warpgroup's tiles between).
  const unsigned long long g0 = w.kpos;
  int stage = (int)(g0 % kStages);
  unsigned phase = (unsigned)((g0 / kStages) & 1);
  int prev = 0;
  for (int kt = w.kb; kt < w.ke; ++kt) {
    tessera_mbar_wait(bars + 8 * stage, phase);
    // The cp.async load wrote the stage through the generic proxy; wgmma reads it through
    // the async proxy.
    if (kCpAsyncAB) tessera_fence_proxy_async();
    TESSERA_TL(kt == w.kb && t == 0, wg, slot_tl, 2);

    if (kPingPong && kt == k_tiles - 1 && t == 0) tessera_mbar_arrive(turns + 8 * (1 - cw));
    const unsigned a_addr = smem_a + stage * kStageBytesA + (kPingPong ? 0 : cw * kConsumerBytesA);
    const unsigned b_addr = smem_b + tessera_sm90_b_slot(kt, stage) * kStageBytesB;
    // (With the bias in the accumulators the first k-tile adds to the values they start at.)
    tessera_sm90_mma_ktile(acc, a_addr, b_addr, kBiasInAcc || kt > w.kb);
    after_issue(kt);
    if (kt > w.kb) {
      // The group of the previous stage is done: hand that stage back to the producer.
      tessera_wgmma_wait<1>();
      if (lane == 0) tessera_sm90_release(bars + 8 * (kStages + prev));
    }
    prev = stage;
    if (++stage == kStages) {
      stage = 0;
      phase ^= 1;
    }
  }
  tessera_wgmma_wait<0>();
  return prev;
}

#ifdef TESSERA_EPILOGUE_TREE
// The tree epilogue through the TMA-store buffers (where the launch set kSm90FlagTmaStore) on
// this warpgroup's rows of tile (tm, tn) of batch b: the tile's passes in fragment order.
__device__ __forceinline__ void tessera_sm90_epilogue_tree_tma(
    float (&acc)[kMHalves][kBN / 2], const TesseraEpArgs& tessera_ep_args,
    const TesseraSm90Params& p, const TesseraSm90Smem& sm, int b, int tm, int tn, int cw, int t,
    int local, int slot_tl, unsigned in_bar, float* vec_s,
    const unsigned (&vec_in)[kSm90VecPer], const unsigned (&tile_words)[kTesseraEpTileWords],
    int& store_slot, const TesseraTmaMap& tma_d, const TesseraTmaMap& tma_aux,
    const TesseraTmaMap& tma_in_c, const TesseraTmaMap& tma_in_r,
    const TesseraTmaMap& tma_in_x) {
  const unsigned raw = sm.raw, store_base = sm.store_base, in_base = sm.in_base;
  const int lane = t % 32;
  // The tree epilogue in fragment order (the launch sets the flag when D, and a full
  // aux, suit TMA and a bit mask's words can be gathered): per pass, the generated
  // elements run on this thread's own registers (tessera_sm90_tree_frag); D and a full
  // aux go packed into the swizzled buffers and out by TMA, as in the fused epilogue
  // below. The reductions stay in registers: a row's kEpiCols columns of a pass are the
  // 4 lanes of a quad, so row sums add up over a tile's passes and leave once per row;
  // a column's 64 rows are 8 lanes of each warp, reduced per pass by a halving exchange
  // (7 shuffles for the thread's 8 column slots) to one column per lane. A ReLU mask's
  // words are OR-ed within the quad (2 shuffles for the thread's 2 rows).
  static_assert(kEpiRegs == 16 && kEpiCols == 32, "a pass is 4 column pairs of 2 rows per thread");
  static_assert(!kTesseraEpAuxFull || kStoreBufs >= 2, "a pass with aux fills two buffers");
  constexpr int kPassesN = kBN / kEpiCols;
  constexpr int kPairs = kEpiRegs / 2;
  // Passes whose output-mask words a row stores together (see store_mask_word).
  constexpr int kMaskGroup = kTesseraEpBits && kPassesN % 4 == 0 ? 4 : 1;
  const TesseraEpArgs& ea = tessera_ep_args;
  const unsigned bufs = store_base + cw * kStoreBufs * kStoreBufBytes;
  TesseraEpCta cta{};
  float rs[2] = {-0.0f, -0.0f};  // (from -0.0: see tessera_sm90_tree_frag)
  // An output mask's rows: per m64 half, the first word of the tile's columns in the row
  // of the slot lane bit 0 picks (the row this lane stores, when lane bit 1 is clear);
  // null past M. (The launch takes this path only when rows, batches and the region
  // start on word boundaries.)
  unsigned* mask_rows[kMHalves];
  tessera_sm90_mask_rows(ea, p, mask_rows, b, tm, tn, cw, t, lane);
  // This tile's vector stage: written, then read by every warp of the warpgroup.
  float* vec_t = vec_s + (local & 1) * kSm90VecBuf;
  if (kSm90VecLen > 0) tessera_sm90_write_vectors(tessera_ep_args, vec_t, vec_in, cw, t);
  // The tile's passes. `fixed` (a constant at each call, which is inlined): 0, each pass
  // block's case of tessera_ep_block_case decided at the block, with the bounds-checked
  // copy of the elements for blocks past D; else the case of every block of a tile that
  // lies inside D and fixes its select predicates throughout, compiled in alone (a
  // select's per-block dispatch among its cases' copies costs more than either branch
  // alone: docs/design/007-select-case-per-tile.md).
#if TESSERA_EP_SIDES > 0
  auto tile_passes = [&](const int fixed) {
#else
  {  // (Without a select: the passes as they were, in the kernel's own scope.)
    constexpr int fixed = 0;
#endif
    // An output mask's words of a group of kMaskGroup consecutive passes of a row, held
    // until the group's last pass, which stores them together (one 16-byte store where
    // the row's words are aligned and inside D).
    unsigned mask_held[kMaskGroup];
#pragma unroll
    for (int pass = 0; pass < kTilePasses; ++pass) {
      const TesseraSm90PassPre pre = tessera_sm90_pass_words(tile_words, pass, lane);
      const int h = pass / kPassesN;
      const int j = pass % kPassesN;
      const int row0 = tm * kBM + (kPingPong ? 64 * h : 64 * cw);
      const int cb = tn * kBN + j * kEpiCols;
      float v[kEpiRegs];
      tessera_sm90_pass_regs(acc, pass, 0, v);
      unsigned dpk[kPairs], apk[kPairs], wb[2];
      float cs[kPairs];
      if (j == 0) rs[0] = rs[1] = -0.0f;
      // This pass's staged inputs: wait for their blocks (read by the elements).
      // (In the store buffers: store_slot, the buffer this pass stores D from, is
      // (local kTilePasses + pass) mod kStoreBufs, where tessera_sm90_stage_in_store loaded it:
      // every earlier pass of the warp stored once.)
      const int slot = kStagedInStore ? store_slot : pass % kInBufs;
      const unsigned in_slot = kStagedInStore ? bufs + slot * kStoreBufBytes
                                              : in_base + (cw * kStagedInputs * kInBufs + slot) * kStoreBufBytes;
      const unsigned char* in = tessera_smem_raw + (in_slot - raw);
      if (kStagedInStore) {
        // (The store buffer's uses before: one per kStoreBufs passes of the warp's run.)
        tessera_mbar_wait(in_bar + 8 * slot, (unsigned)(((local * kTilePasses + pass) / kStoreBufs) & 1));
      } else if (kTesseraEpStaged > 0) {
        // Blocks completed on this slot's barrier before: slot_uses per earlier tile of
        // this warpgroup, and this tile's earlier passes on the slot.
        const int slot_uses = kTilePasses / kInBufs + (slot < kTilePasses % kInBufs ? 1 : 0);
        tessera_mbar_wait(in_bar + 8 * slot,
                          (unsigned)((local * slot_uses + pass / kInBufs) & 1));
      }
      const float* vc = vec_t + j * kEpiCols;
      const float* vr = vec_t + kSm90VecCols + (kPingPong ? 64 * h : 0);
      if (fixed > 0 || (row0 + 64 <= p.m && cb + kEpiCols <= p.n)) {
        const int sc = fixed > 0 ? fixed : tessera_ep_block_case(ea, b, row0, row0 + 63, cb, cb + kEpiCols - 1);
        tessera_sm90_tree_frag_inside(sc, ea, cta, p, b, row0, cb, t, v, dpk, apk, rs, cs, wb, in, pre, vc, vr);
      } else {
        tessera_sm90_tree_frag<false, 0>(ea, cta, p, b, row0, cb, t, v, dpk, apk, rs, cs, wb, in, pre, vc, vr);
      }
      // The pass's mask word (an output bit mask): gathered before the pass's stores, so
      // that the exchanges' latency overlaps the store pass, and stored after them (stored
      // before, its global store held the pass's async-proxy fence back:
      // docs/design/006-output-mask-stores.md). Lane
      // bit 0 picks the row slot: one exchange gives each lane its slot's bits of the
      // lane pair, a second those of the quad; the lanes with bit 1 clear store the row's
      // word.
      unsigned mask_word = 0u;
      if (kTesseraEpBits) {
        const int s0 = lane & 1;
        mask_word = (s0 ? wb[1] : wb[0]) | __shfl_xor_sync(0xffffffffu, s0 ? wb[0] : wb[1], 1);
        mask_word |= __shfl_xor_sync(0xffffffffu, mask_word, 2);
      }
      const auto freed = [&] {
        // The warp has read its rows of this pass's staged inputs: they take those of
        // pass + kInBufs.
        if (kTesseraEpStaged > 0 && lane == 0 && pass + kInBufs < kTilePasses) {
          const int w = t / 32;
          int r1, c1;
          tessera_sm90_pass_origin(pass + kInBufs, tm, tn, cw, r1, c1);
          tessera_sm90_stage_pass<false>(&tma_in_c, &tma_in_r, &tma_in_x, in_slot,
                                         in_bar + 8 * slot, r1, c1, b, w);
        }
      };
      if (kRowStore && (p.flags & kSm90FlagRowStore)) {
        // (One tile column: cb = j kEpiCols. The region starts at column 0, ld = n.)
        const auto run_of = [&] {
          const int r = row0 + kWarpRows * (t / 32);
          const long long e0 = (long long)b * ea.batch_d + (long long)(ea.row0 + r) * ea.ldd;
          const long long a0 = (long long)b * ea.batch_aux + (long long)(ea.row0 + r) * ea.ldaux;
          return TesseraSm90Run{static_cast<char*>(ea.d) + 2 * e0,
                                kTesseraEpAuxFull ? static_cast<char*>(ea.aux) + 2 * a0 : nullptr,
                                p.m - r};
        };
        tessera_sm90_row_pass<kTesseraEpAuxFull>(bufs, j, p.n, t, dpk, apk, run_of, freed);
      } else {
        tessera_sm90_store_pass<kTesseraEpAuxFull>(bufs, store_slot, slot_tl * kTilePasses + pass, t, dpk, apk, &tma_d, &tma_aux, cb, row0, b, freed);
      }
      if (kTesseraEpBits) tessera_sm90_store_mask_word(mask_held, mask_word, mask_rows, h, j, cb, lane, p);
      const int b0 = lane & 1;
      if (kTesseraEpColSum) tessera_sm90_reduce_cols(ea, p, cs, cb, b, t, lane);
      if (kTesseraEpRowSum && j == kPassesN - 1) {
        // The tile's row sums (all its passes of these rows): lane bit 0 picks the slot.
        float sum = (b0 ? rs[1] : rs[0]) + __shfl_xor_sync(0xffffffffu, b0 ? rs[0] : rs[1], 1);
        sum += __shfl_xor_sync(0xffffffffu, sum, 2);
        const int row = row0 + tessera_acc_row(t, 2 * b0);
        if ((lane & 2) == 0 && row < p.m) tessera_ep_flush_row(ea, b, row, sum);
      }
    }
#if TESSERA_EP_SIDES > 0
  };
  // The tile's (this warpgroup's rows of it) case, when it lies inside D.
  const int tr0 = tm * kBM + (kPingPong ? 0 : 64 * cw);
  const int tr1 = tr0 + (kPingPong ? kBM : 64) - 1;
  const int tile_case = tr1 < p.m && tn * kBN + kBN <= p.n
                            ? tessera_ep_block_case(ea, b, tr0, tr1, tn * kBN, tn * kBN + kBN - 1)
                            : 0;
  // (tessera_sm90_tree_frag_inside holds the limit of two predicates, cases 1 to 4.)
  if (tile_case == 1) {
    tile_passes(1);
  } else if (tile_case == 2) {
    tile_passes(2);
  } else if (kTesseraEpSides >= 2 && tile_case == 3) {
    tile_passes(3);
  } else if (kTesseraEpSides >= 2 && tile_case == 4) {
    tile_passes(4);
  } else {
    tile_passes(0);
  }
#else
  }
#endif
}
#endif

// The flag-driven epilogue through the TMA-store buffers (where the launch set
// kSm90FlagTmaStore) on this warpgroup's rows of tile (tm, tn) of batch b; bias_t is the
// tile's staged bias.
__device__ __forceinline__ void tessera_sm90_epilogue_fused_tma(
    float (&acc)[kMHalves][kBN / 2], const TesseraSm90Params& p, const TesseraSm90Smem& sm,
    int b, int tm, int tn, int cw, int t, int slot_tl, const float* bias_t, int& store_slot,
    const TesseraTmaMap& tma_d, const TesseraTmaMap& tma_aux) {
  const unsigned store_base = sm.store_base;
  // The TMA-store epilogue: per pass, this warpgroup's 64 x kEpiCols block is finished
  // in registers (the fragment's own rows and columns) and packed in the output type,
  // then written into a swizzled shared-memory buffer; one thread stores the buffer with
  // TMA, which clips the block to D. The passes take buffers of a ring of kStoreBufs;
  // with aux each pass fills two, D's and aux's (the pre-activation), stored with their
  // own tensor maps. Nothing waits for the stores but the reuse of a buffer, and that
  // wait comes after the pass's arithmetic.
  constexpr int kPassesN = kBN / kEpiCols;
  constexpr int kPairs = kEpiRegs / 2;
  const unsigned bufs = store_base + cw * kStoreBufs * kStoreBufBytes;
  // The bias stage written above is read before the passes' barriers: one barrier first.
  if (kStageBias) tessera_bar_sync(1 + cw, 128);
  // Unrolled: each pass names its accumulator registers directly (a rolled loop selects
  // them at run time, 8 selects per value over the 8 passes of a 256-column tile).
#pragma unroll
  for (int pass = 0; pass < kMHalves * kPassesN; ++pass) {
    const int h = pass / kPassesN;
    const int j = pass % kPassesN;
    const int row0 = tm * kBM + (kPingPong ? 64 * h : 64 * cw);
    const int cb = tn * kBN + j * kEpiCols;
    // The row bias of this thread's two rows of the pass, those of its registers 0 and 2
    // (the planner checks every register of a pass is on one of them); zero past D.
    float br0 = 0.0f, br1 = 0.0f;
    if (kEpiBias == 1) {
      br0 = bias_t[64 * h + tessera_acc_row(t, 0)];
      br1 = bias_t[64 * h + tessera_acc_row(t, 2)];
    }
    // The pass's results, packed: D's, and the pre-activation for aux.
    unsigned dpk[kPairs], apk[kPairs];
    // The pass's registers, in two halves to keep few of them live beside the
    // accumulators (named by compile-time indices: one predicated copy per pass). Register
    // k of any pass sits at (tessera_acc_row(t, k), tessera_acc_col(t, k)) of its block
    // (the planner checks the accumulator layout repeats every kEpiRegs).
#pragma unroll
    for (int q = 0; q < 2; ++q) {
      constexpr int kHalf = kEpiRegs / 2;
      float v[kHalf];
      tessera_sm90_pass_regs(acc, pass, q * kHalf, v);
#pragma unroll
      for (int kk = 0; kk < kHalf; kk += 2) {
        const int k = q * kHalf + kk;
        const int r = tessera_acc_row(t, k);
        const int c = tessera_acc_col(t, k);
        float x0 = p.alpha * v[kk];
        float x1 = p.alpha * v[kk + 1];
        if (kEpiBias == 2) {
          // The stage holds zeros past D's last column.
          const float2 bc = *reinterpret_cast<const float2*>(bias_t + j * kEpiCols + c);
          x0 += bc.x;
          x1 += bc.y;
        } else if (kEpiBias == 1) {
          const float br = r == tessera_acc_row(t, 0) ? br0 : br1;
          x0 += br;
          x1 += br;
        }
        if (kEpiAux) apk[k / 2] = tessera_pack2(x0, x1, kEpiOut);
        dpk[k / 2] = tessera_pack2(tessera_activate(x0, kEpiAct, kEpiCoarse), tessera_activate(x1, kEpiAct, kEpiCoarse), kEpiOut);
      }
    }
    if (kRowStore && (p.flags & kSm90FlagRowStore)) {
      const auto run_of = [&] {
        const int r = row0 + kWarpRows * (t / 32);
        return TesseraSm90Run{
            static_cast<char*>(p.d) + 2 * ((long long)b * p.batch_d + (long long)r * p.ldd),
            kEpiAux ? static_cast<char*>(p.aux) + 2 * ((long long)b * p.batch_aux + (long long)r * p.ldaux) : nullptr,
            p.m - r};
      };
      tessera_sm90_row_pass<kEpiAux>(bufs, j, p.n, t, dpk, apk, run_of, [] {});
    } else {
      tessera_sm90_store_pass<kEpiAux>(bufs, store_slot, slot_tl * kMHalves * kPassesN + pass, t, dpk, apk, &tma_d, &tma_aux, cb, row0, b, [] {});
    }
  }
}

// The epilogue through this warpgroup's fp32 scratch (the flag-driven one, or the generated
// tree a column pair at a time) on its rows of tile (tm, tn) of batch b; bias_t is the
// flag-driven epilogue's staged bias of the tile.
__device__ __forceinline__ void tessera_sm90_epilogue_scratch(float (&acc)[kMHalves][kBN / 2],
                                                              const TesseraSm90Params& p, int b,
                                                              int tm, int tn, int cw, int t,
                                                              float* scratch,
                                                              const float* bias_t
                                                                  TESSERA_SM90_EP_PARAM) {
  const int lane = t % 32;
  (void)lane;
  (void)bias_t;
  // Epilogue, 64 rows x kEpiCols columns per pass through this warpgroup's fp32 scratch:
  // the fragment goes to shared memory with compile-time register indices, then a compact
  // loop reads it back two columns per thread, 16 threads per row, and applies the
  // epilogue with coalesced global accesses. The pass loop is not unrolled, so its body
  // (the epilogue proper) exists once in the machine code; only the staging is, one
  // predicated block per pass, because registers are named by compile-time indices.
  constexpr int kPassesN = kBN / kEpiCols;
  const int col0 = tn * kBN;
#pragma unroll 1
  for (int pass = 0; pass < kMHalves * kPassesN; ++pass) {
    const int h = pass / kPassesN;
    const int j = pass % kPassesN;
    const int row0 = tm * kBM + (kPingPong ? 64 * h : 64 * cw);
    tessera_sm90_scratch_put(scratch, acc, pass, t);
    tessera_bar_sync(1 + cw, 128);
    // The whole 64 x kEpiCols block is inside D and pairs are aligned: no predicates.
    const int cb = col0 + j * kEpiCols;
    const bool interior =
        (p.flags & kSm90FlagStorePair) && row0 + 64 <= p.m && cb + kEpiCols <= p.n;
    constexpr int kIters = 64 * (kEpiCols / 2) / 128;
    constexpr int kRowsPerIter = 128 / (kEpiCols / 2);
    float2 v[kIters];
#pragma unroll
    for (int it = 0; it < kIters; ++it) {
      const int e = t + 128 * it;
      v[it] = *reinterpret_cast<const float2*>(scratch + (e / (kEpiCols / 2)) * kEpiPitch +
                                               2 * (e % (kEpiCols / 2)));
    }
    // Everyone has read the scratch: the next pass may overwrite it while these stores go.
    tessera_bar_sync(1 + cw, 128);
#ifdef TESSERA_EPILOGUE_TREE
    // The generated epilogue, one column pair of one row per call. Coordinates are
    // launch-relative (the plan's problem is the launch's region). Its reductions are
    // summed in registers (TESSERA_EP_REG_SUMS): a row's 16 threads are lanes 0-15 or
    // 16-31 of one warp, a column pair's two threads in a warp are lanes l and l ^ 16; the
    // shuffles run in every lane, outside the bounds checks.
    (void)interior;
    {
      const int c = cb + 2 * (t % (kEpiCols / 2));
      const int r = row0 + t / (kEpiCols / 2);
      TesseraEpCta cta{};
      // A ReLU bit mask a word at a time: a row's 32 columns of the pass are the bits of
      // one word (the 16 lanes of a half-warp, two each) when rows and batches start on
      // word boundaries; else each bit by itself (tessera_ep_store_bit's atomics).
      cta.word_bits = kTesseraEpBits && tessera_ep_args.ldaux % 32 == 0 &&
                        tessera_ep_args.batch_aux % 32 == 0 && tessera_ep_args.col0 % 32 == 0;
      unsigned pass_bits = 0u;  // bits 2 it, 2 it + 1: this thread's pair of iteration it
      // The block's iterations; in a block inside the launch with D stored in pairs, with no
      // bounds checks, so that nothing but data separates one pair's stores from the next
      // pair's loads (non-coherent, free to move above them: tessera_ep_ld).
      // (That path compiles the bit mask's word gathering in: it also needs the alignment.)
      // Select predicates on one coordinate are decided once for the block when they are
      // uniform over it (tessera_ep_block_case), and compiled in as constants: no branch
      // per element, so the iterations' code interleaves as without the select.
      if (tessera_ep_args.d_pair && row0 + 64 <= p.m && cb + kEpiCols <= p.n &&
          (!kTesseraEpBits || cta.word_bits)) {
        const int sc = tessera_ep_block_case(tessera_ep_args, b, row0, row0 + 63, cb, cb + kEpiCols - 1);
        tessera_sm90_tree_inside<kIters, kRowsPerIter>(sc, tessera_ep_args, cta, p, b, r, c, t, v, pass_bits);
      } else {
        tessera_sm90_tree_iterations<false, kIters, kRowsPerIter, 0>(tessera_ep_args, cta, p, b, r, c, t, v, pass_bits);
      }
      if (kTesseraEpBits && cta.word_bits) {
        tessera_sm90_scratch_mask_words<kIters, kRowsPerIter>(tessera_ep_args, p, b, r, cb, t, pass_bits);
      }
      if (kTesseraEpColSum) {
        static_assert(kEpiCols == 32, "a warp holds two rows of a pass");
        const float s0 = cta.reg_col0 + __shfl_xor_sync(0xffffffffu, cta.reg_col0, 16);
        const float s1 = cta.reg_col1 + __shfl_xor_sync(0xffffffffu, cta.reg_col1, 16);
        if (lane < 16 && c < p.n) {
          tessera_ep_flush_col(tessera_ep_args, b, c, s0);
          if (c + 1 < p.n) tessera_ep_flush_col(tessera_ep_args, b, c + 1, s1);
        }
      }
    }
#else
    tessera_sm90_scratch_fused<kIters, kRowsPerIter>(p, b, row0, cb, h, j, t, interior, bias_t, v);
#endif
  }
}

#ifdef TESSERA_EPILOGUE_TREE
// The bias in the accumulators (kBiasInAcc, Sm90Plan::bias_in_acc): this thread's accumulator
// registers' column biases, zero past N. The plan takes it with one tile column and one batch
// only, so every tile of the CTA starts from these values: loaded once, before the first tile.
__device__ __forceinline__ void tessera_sm90_load_bias_acc(const TesseraEpArgs& a,
                                                           const TesseraSm90Params& p,
                                                           float (&bias)[kBN / 2], int t) {
#pragma unroll
  for (int i = 0; i < kBN / 2; ++i) {
    const int col = tessera_acc_col(t, i);
    bias[i] = col < p.n ? tessera_raw_to_f32(tessera_load_raw(a.bias_col, a.col0 + col, TESSERA_EP_DT_BIAS_COL),
                                             TESSERA_EP_DT_BIAS_COL)
                        : 0.0f;
  }
}
#endif

// Consumer warpgroup `cw` = wg - 1. Cooperative: rows [64 cw, 64 cw + 64) of every tile of
// the CTA. Ping-pong: all kBM rows (kMHalves m64 halves) of every other tile of the CTA, so
// that one warpgroup's epilogue runs while the other's wgmma keep the tensor cores busy. Per
// unit: the epilogue's inputs fetched, the mainloop, stream-K's fix-up, then the epilogue.
__device__ __forceinline__ void tessera_sm90_consume(
    const TesseraTmaMap& tma_d, const TesseraTmaMap& tma_aux, const TesseraTmaMap& tma_in_c,
    const TesseraTmaMap& tma_in_r, const TesseraTmaMap& tma_in_x, const TesseraSm90Params& p,
    const TesseraSm90Smem& sm, int wg, int t, int total, int k_tiles TESSERA_SM90_EP_PARAM) {
  const unsigned in_bars = sm.in_bars, turns = sm.turns, scratch_base = sm.scratch_base,
                 bias_base = sm.bias_base, vec_base = sm.vec_base, in_base = sm.in_base;
  (void)in_base;
  (void)turns;
  const unsigned raw = sm.raw;
  const int cw = wg - 1;
  const int lane = t % 32;
  // This warp's staged-input barriers: in_bar + 8 s for buffer s.
  const unsigned in_bar = in_bars + 8 * kInBufs * (kEpiWarps * cw + t / 32);
  float acc[kMHalves][kBN / 2];
#ifdef TESSERA_EPILOGUE_TREE
  // (Unused, and so compiled away, without the bias in the accumulators.)
  float bias_acc[kBN / 2];
  if (kBiasInAcc) tessera_sm90_load_bias_acc(tessera_ep_args, p, bias_acc, t);
#endif
  float* scratch = reinterpret_cast<float*>(tessera_smem_raw + (scratch_base - raw)) + cw * 64 * kEpiPitch;
  float* bias_s = reinterpret_cast<float*>(tessera_smem_raw + (bias_base - raw)) + cw * 2 * kSm90BiasLen;
  float* vec_s = reinterpret_cast<float*>(tessera_smem_raw + (vec_base - raw)) + cw * 2 * kSm90VecBuf;
  (void)vec_s;
  const int step = kPingPong ? 2 : 1;
  int local = 0;  // tiles this warpgroup has started
  int store_slot = 0;  // the TMA-store ring's next buffer (tessera_sm90_store_pass)
  // This CTA's n-th unit and a unit's tile coordinates (tessera_sm90_unit_of, _decode).
  auto unit_of = [&](int n, TesseraSm90Unit& w) { return tessera_sm90_unit_of(p, total, k_tiles, n, w); };
  auto decode = [&](int tile, int& b, int& tm, int& tn) { tessera_sm90_decode(p, tile, b, tm, tn); };
  // Cooperative: a tile's coordinates are decoded at the end of the previous tile's mainloop
  // (the first tile's here): at the top of the loop, the four integer divisions stood
  // between every epilogue and the next mainloop. Ping-pong: at the top of the loop, before
  // the turn wait, which they do not depend on and which lasts the other warpgroup's
  // mainloop (decoded during the last k-tile there, the plain GEMM ran slower).
  // (docs/design/001-tile-decode-placement.md)
  const int n0 = kPingPong ? cw : 0;
  int nb = 0, ntm = 0, ntn = 0;
  // Whether unit n exists (then nb, ntm, ntn are its tile's coordinates): looked up ahead.
  bool more = true;
  if (!kPingPong) {
    TesseraSm90Unit w0;
    more = unit_of(n0, w0);
    if (more) decode(w0.tile, nb, ntm, ntn);
  }
  // `local` counts the units with an epilogue (all but stream-K parts without their tile's
  // last k-tile): the epilogues' buffers and barriers alternate by it. The timeline's slots
  // are units (n; ping-pong: local).
  for (int n = n0;; n += step, ++local) {
    const int slot_tl = kPingPong ? local : n;
    (void)slot_tl;
    TESSERA_TL(t == 0, wg, slot_tl, 0);
    TesseraSm90Unit w;
    if (kPingPong) {
      more = unit_of(n, w);
      if (more) decode(w.tile, nb, ntm, ntn);
    }
    if (!more) break;
    if (!kPingPong) unit_of(n, w);
    const int b = nb, tm = ntm, tn = ntn;
    const bool epi_unit = !kStreamK || w.ke == k_tiles;
#ifdef TESSERA_EPILOGUE_TREE
    // The vector stage's values, as raw bits, converted after the mainloop (converted on
    // arrival, the warp would wait for the load). A load outstanding in the mainloop holds
    // the next k-tile's wgmma back until it arrives, so on ping-pong (kEarly below) they are
    // loaded before the turn wait, which lasts the other warpgroup's mainloop; else with the
    // first k-tile, after its wgmma are issued (at the top of the tile they held the first
    // wgmma back). (docs/design/003-epilogue-vector-loads.md)
    unsigned vec_in[kSm90VecPer];
    auto load_tile_vectors = [&] { tessera_sm90_load_vectors(tessera_ep_args, p, vec_in, b, tm, tn, cw, t); };
    // A bit-mask input's words of the tile (tessera_sm90_preload_tile), likewise: loaded
    // here where the vectors are; else fetched into L2 at the top of the tile and loaded
    // with the second k-tile, after its wgmma. Not where the epilogue stores a bit mask:
    // there the early load takes fewer cycles but more time (the kernel runs at a lower
    // clock), docs/design/003-epilogue-vector-loads.md.
    unsigned tile_words[kTesseraEpTileWords];
    constexpr bool kEarly = kPingPong && !kTesseraEpBits;
    if (kEarly) {
      load_tile_vectors();
      tessera_sm90_preload_tile<false>(tessera_ep_args, p, b, tm, tn, cw, t, tile_words);
    }
#endif
    if (kPingPong) tessera_sm90_wait_turn(turns, cw, local);
    TESSERA_TL(t == 0, wg, slot_tl, 1);
#ifdef TESSERA_EPILOGUE_TREE
    // The tile's epilogue inputs, fetched while its mainloop runs, from the mainloop's first
    // k-tiles after each one's wgmma are issued (issued at the top of the tile, the staged
    // inputs' TMA issues held the first wgmma back: docs/design/004-tree-input-staging.md).
    // Staged inputs: pass q's blocks loaded (q < kInBufs) or fetched into L2 (the later
    // passes, which the epilogue loads two passes ahead), one pass per k-tile, by each
    // warp's first lane for the warp's own rows (what K leaves is issued after the loop).
    const bool stage_in = kTesseraEpStaged > 0 && (p.flags & kSm90FlagTmaStore) && t % 32 == 0;
    auto stage_tile_pass = [&](int q) {
      if (kStagedInStore) {
        tessera_sm90_stage_in_store(q, local, tma_in_c, tma_in_r, tma_in_x, sm.store_base, in_bar, b, tm, tn, cw, t);
      } else {
        tessera_sm90_stage_tile_pass(q, tma_in_c, tma_in_r, tma_in_x, in_base, in_bar, b, tm, tn, cw, t);
      }
    };
#endif
#ifndef TESSERA_EPILOGUE_TREE
    // (Raw bits, converted after the mainloop, as the tree path's vectors above.)
    unsigned bias_in[kSm90BiasPer];
    if (kStageBias) tessera_sm90_load_bias(p, bias_in, b, tm, tn, cw, t);
#endif
#ifdef TESSERA_EPILOGUE_TREE
    // Unless loaded before the turn wait (kEarly): the mask words of an aux_in_bits input
    // for every pass, fetched into L2 here, loaded with the second k-tile, after its wgmma.
    // (Loaded from DRAM with the first k-tile, they held the next k-tile's wgmma back: its
    // fence waits for the warp's outstanding loads. Loaded here, the trees with C staged
    // spilled. docs/design/004-tree-input-staging.md)
    if (!kEarly && epi_unit) tessera_sm90_preload_tile<true>(tessera_ep_args, p, b, tm, tn, cw, t, tile_words);
    // The bias in the accumulators: the tile's mainloop adds to it.
    if (kBiasInAcc) {
#pragma unroll
      for (int h = 0; h < kMHalves; ++h) {
#pragma unroll
        for (int i = 0; i < kBN / 2; ++i) acc[h][i] = bias_acc[i];
      }
    }
#endif
    // This unit's mainloop; after each k-tile's wgmma are issued, the epilogue's prefetches
    // and (cooperative, during the last) the next tile's coordinates.
    const int prev = tessera_sm90_mainloop(acc, w, sm, cw, t, wg, slot_tl, k_tiles, [&](int kt) {
#ifdef TESSERA_EPILOGUE_TREE
      // (Relative to the unit: a stream-K part with the tile's last k-tile starts inside K.)
      if (epi_unit) {
        const int kq = kt - w.kb;
        if (!kEarly && kq == 0) load_tile_vectors();
        if (!kEarly && kq == (w.ke - w.kb > 1 ? 1 : 0)) tessera_sm90_preload_tile<false>(tessera_ep_args, p, b, tm, tn, cw, t, tile_words);
        if (stage_in && kq < kTilePasses) stage_tile_pass(kq);
      }
#endif
      // Cooperative: the next tile's coordinates, while the last k-tile's wgmma run: the
      // warp would wait for them next anyway. (During the first k-tile the decode held the
      // second k-tile's wgmma back.)
      if (!kPingPong && kt == w.ke - 1) {
        TesseraSm90Unit nw;
        more = unit_of(n + step, nw);
        if (more) decode(nw.tile, nb, ntm, ntn);
      }
    });
    TESSERA_TL(t == 0, wg, slot_tl, 3);
#ifdef TESSERA_EPILOGUE_TREE
    if (stage_in && epi_unit) {
#pragma unroll 1
      for (int q = w.ke - w.kb; q < kTilePasses; ++q) stage_tile_pass(q);
    }
#endif
    if (lane == 0) tessera_sm90_release(sm.bars + 8 * (kStages + prev));
    // (Ping-pong: the other warpgroup's turn was passed on when the last stage arrived.)
#pragma unroll
    for (int h = 0; h < kMHalves; ++h) {
#pragma unroll
      for (int i = 0; i < kBN / 2; ++i) tessera_fence_operand(acc[h][i]);
    }
    // (The unit is looked up again where its role and origin are needed, not kept live
    // through the mainloop.)
    if (kStreamK) unit_of(n, w);
    if (kStreamK && w.role != 0) {
      // (Stream-K runs cooperative: the warpgroup's rows of the tile start 64 cw down.)
      const bool live = tm * kBM + 64 * cw + tessera_acc_row(t, 0) < p.m;
      if (w.role == 1) {
        tessera_sm90_sk_store_part(p, acc, cw, t, live);
        --local;  // no epilogue
        continue;
      }
      tessera_sm90_sk_add_parts(p, acc, k_tiles, w, cw, t, live);
    }

#ifdef TESSERA_EPILOGUE_TREE
    if (kEpiTmaStore && (p.flags & kSm90FlagTmaStore)) {
      tessera_sm90_epilogue_tree_tma(acc, tessera_ep_args, p, sm, b, tm, tn, cw, t, local, slot_tl,
                                     in_bar, vec_s, vec_in, tile_words, store_slot, tma_d, tma_aux,
                                     tma_in_c, tma_in_r, tma_in_x);
      continue;
    }
    tessera_sm90_epilogue_scratch(acc, p, b, tm, tn, cw, t, scratch, nullptr, tessera_ep_args);
#else
    // This tile's bias buffer (read after the epilogue's first barrier).
    float* bias_t = bias_s + (local & 1) * kSm90BiasLen;
    if (kStageBias) tessera_sm90_write_bias(bias_t, bias_in, t);
    if (kEpiTmaStore && (p.flags & kSm90FlagTmaStore)) {
      tessera_sm90_epilogue_fused_tma(acc, p, sm, b, tm, tn, cw, t, slot_tl, bias_t, store_slot,
                                      tma_d, tma_aux);
      continue;
    }
    tessera_sm90_epilogue_scratch(acc, p, b, tm, tn, cw, t, scratch, bias_t);
#endif
  }
}

extern "C" __global__ void __launch_bounds__(kThreads, 1) TESSERA_SM90_CLUSTER_DIMS
    tessera_gemm(const __grid_constant__ TesseraTmaMap tma_a,
                 const __grid_constant__ TesseraTmaMap tma_b,
                 const __grid_constant__ TesseraTmaMap tma_d,
                 const __grid_constant__ TesseraTmaMap tma_aux,
                 // The tree epilogue's staged inputs (C, the residual, aux_in); else unused.
                 const __grid_constant__ TesseraTmaMap tma_in_c,
                 const __grid_constant__ TesseraTmaMap tma_in_r,
                 const __grid_constant__ TesseraTmaMap tma_in_x, const TesseraSm90Params p
#ifdef TESSERA_EPILOGUE_TREE
                 // The tree epilogue's tensors and scalars (epilogue::cuda::sm90_tree_source).
                 , const TesseraEpArgs tessera_ep_args
#endif
                 ) {
  const TesseraSm90Smem sm = tessera_sm90_smem();
  const int wg = threadIdx.x / 128;
  const int t = threadIdx.x % 128;
#ifdef TESSERA_SM90_HALO
  // The halo stages' rows past the strip's box are read only by rows never stored; zeroed
  // once (TMA never writes them) so that those rows compute on finite values. The barrier
  // initialization's __syncthreads orders these writes before any wgmma, and the proxy fence
  // makes them visible to its (async proxy) reads.
  for (unsigned i = threadIdx.x; i < kStages * (kHaloSlackBytes / 16); i += kThreads) {
    const unsigned st = i / (kHaloSlackBytes / 16), j = i % (kHaloSlackBytes / 16);
    const unsigned a = sm.smem_a + st * kStageBytesA + kLoadBytesA + 16 * j;
    asm volatile("st.shared.v4.b32 [%0], {%1, %1, %1, %1};\n" ::"r"(a), "r"(0u) : "memory");
  }
  tessera_fence_proxy_async();
#endif
  tessera_sm90_init_barriers(sm.bars, sm.turns, sm.in_bars);
  // Launched as a programmatic dependent of the kernel before it on the stream (the launch
  // attribute of Sm90Kernel::launch_raw), this CTA may start before that kernel's writes are
  // visible. Invariant: no thread reads or writes global memory (operands, workspace, flags,
  // the timeline) before this wait, which returns once that kernel has completed and its
  // writes are visible; launched without the attribute it returns at once. Only shared memory
  // and the kernel's parameters are touched above. The kernel never signals its own
  // dependents early (griddepcontrol.launch_dependents): the next kernel is launched when
  // this one completes, which measured faster than any earlier signal (design 018).
  tessera_grid_dependency_wait();
  TESSERA_TL_CTA(threadIdx.x == 0, false);
  // (With the halo load a k-tile of the ring is a filter row's kHaloTaps taps.)
  const int k_tiles = (p.k + kBK - 1) / kBK / kHaloTaps;
  const int total = tessera_sm90_total_tiles(p);

  if (wg == 0) {
    // Producer warpgroup: the CTA's tiles blockIdx.x, blockIdx.x + gridDim.x, ... in order,
    // every k-tile of each, into consecutive stages of the ring.
    tessera_setmaxnreg_dec<kProducerRegs>();
#if TESSERA_SM90_CLUSTER == 1
    if (kCpAsyncAB) {
      tessera_sm90_produce_cp_async(p, sm.smem_a, sm.smem_b, sm.bars, total, k_tiles, t);
    } else
#endif
    if (t == 0) tessera_sm90_produce(tma_a, tma_b, p, sm.smem_a, sm.smem_b, sm.bars, total, k_tiles);
  } else {
    tessera_setmaxnreg_inc<kConsumerRegs>();
    tessera_sm90_consume(tma_d, tma_aux, tma_in_c, tma_in_r, tma_in_x, p, sm, wg, t, total,
                         k_tiles TESSERA_SM90_EP_ARG);
  }
  // The last TMA stores have finished (reading the buffers and writing D) before the CTA
  // leaves. (Only the threads that issued stores have groups to wait for.)
  if (kEpiTmaStore) tessera_bulk_wait<0>();
  TESSERA_TL_CTA(wg > 0 && t == 0, true);
  // No CTA of a cluster leaves while its partner may still multicast into its shared memory or
  // arrive on its barriers: all of that happens before the partner arrives here.
  tessera_sm90_cluster_barrier();
}