// tessera: sm_90a device helpers as inline PTX: mbarriers, TMA tensor loads, wgmma brackets,
// register reallocation, proxy fences. Self-contained: no <cuda.h>, no CCCL.
//
// Every shared-memory operand is a 32-bit shared-state-space address (tessera_smem_addr in
// common.cuh).

// A CUtensorMap as the driver encodes it (128 opaque bytes). Passed by value as a
// `const __grid_constant__` kernel parameter, so the TMA unit reads it from parameter space and
// no tensormap fence is needed.
struct alignas(64) TesseraTmaMap {
  unsigned long long opaque[16];
};

__device__ __forceinline__ void tessera_mbar_init(unsigned bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}

// Makes the barrier initializations visible to the async proxy (the TMA unit) and to the
// other threads once followed by __syncthreads.
__device__ __forceinline__ void tessera_fence_barrier_init() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}

// Arrives once and adds `bytes` to the transaction count the current phase waits for.
__device__ __forceinline__ void tessera_mbar_arrive_expect_tx(unsigned bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes)
               : "memory");
}

__device__ __forceinline__ void tessera_mbar_arrive(unsigned bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}

// Whether the phase of parity `parity` has completed (a freshly initialized barrier counts
// its phase of parity 1 as completed, so a producer's first wait on an empty slot passes).
__device__ __forceinline__ bool tessera_mbar_try_wait(unsigned bar, unsigned parity) {
  unsigned ok;
  asm volatile(
      "{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
      " selp.u32 %0, 1, 0, p;\n}\n"
      : "=r"(ok)
      : "r"(bar), "r"(parity)
      : "memory");
  return ok != 0;
}

__device__ __forceinline__ void tessera_mbar_wait(unsigned bar, unsigned parity) {
  while (!tessera_mbar_try_wait(bar, parity)) {
  }
}

// 16 bytes from global memory into shared memory at `dst` (through L2 only), the bytes past
// `src_bytes` (0 or 16) written as zeros: a load outside the operand reads nothing.
__device__ __forceinline__ void tessera_cp_async_16(unsigned dst, const void* src,
                                                    unsigned src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src),
               "r"(src_bytes)
               : "memory");
}

// One arrival on `bar` once every cp.async this thread issued before has landed; `.noinc`: the
// barrier's expected count includes these arrivals.
__device__ __forceinline__ void tessera_cp_async_arrive(unsigned bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(bar) : "memory");
}

// One TMA box of a 3-D tensor map (coordinates innermost first) into shared memory at `dst`;
// completion is signalled on `bar` as transaction bytes. Elements outside the tensor are
// written as zeros and still counted.
__device__ __forceinline__ void tessera_tma_load_3d(unsigned dst, const TesseraTmaMap* map,
                                                    unsigned bar, int c0, int c1, int c2) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%3, %4, %5}], [%2];\n" ::"r"(dst),
      "l"(reinterpret_cast<unsigned long long>(map)), "r"(bar), "r"(c0), "r"(c1), "r"(c2)
      : "memory");
}

// One box of a 4-D tiled tensor map (the halo load's strip of a channels-last x, {c, w, h, n};
// an epilogue tensor as {n, q, p, image}); elements outside the tensor are written as zeros
// and counted.
__device__ __forceinline__ void tessera_tma_load_4d(unsigned dst, const TesseraTmaMap* map,
                                                    unsigned bar, int c0, int c1, int c2, int c3) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%3, %4, %5, %6}], [%2];\n" ::"r"(dst),
      "l"(reinterpret_cast<unsigned long long>(map)), "r"(bar), "r"(c0), "r"(c1), "r"(c2),
      "r"(c3)
      : "memory");
}

// One box of a 5-D tiled tensor map (the window load's phase-staged x, {chunk channels,
// chunk, plane, h, n}); a box wholly or partly outside the tensor is written with zeros
// there and counted whole.
__device__ __forceinline__ void tessera_tma_load_5d(unsigned dst, const TesseraTmaMap* map,
                                                    unsigned bar, int c0, int c1, int c2, int c3,
                                                    int c4) {
  asm volatile(
      "cp.async.bulk.tensor.5d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%3, %4, %5, %6, %7}], [%2];\n" ::"r"(dst),
      "l"(reinterpret_cast<unsigned long long>(map)), "r"(bar), "r"(c0), "r"(c1), "r"(c2),
      "r"(c3), "r"(c4)
      : "memory");
}

// One TMA box of a 4-D im2col tensor map over a channels-last x, coordinates innermost first
// {c, w, h, n}: the channels from c of the pixels the map walks from the window corner (w, h)
// of image n, each at the filter tap's offset (off_w, off_h) from its corner. Taps in the
// padding are written as zeros and still counted.
__device__ __forceinline__ void tessera_tma_load_im2col_4d(unsigned dst, const TesseraTmaMap* map,
                                                           unsigned bar, int c, int w, int h, int n,
                                                           unsigned short off_w,
                                                           unsigned short off_h) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.im2col.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%3, %4, %5, %6}], [%2], {%7, %8};\n" ::"r"(dst),
      "l"(reinterpret_cast<unsigned long long>(map)), "r"(bar), "r"(c), "r"(w), "r"(h), "r"(n),
      "h"(off_w), "h"(off_h)
      : "memory");
}

// The TMA-store epilogue. A bulk tensor store of the box at shared-memory address `src` to
// coordinates {c0, c1, c2} of the map (TMA drops the elements outside the tensor), grouped
// per thread by commit; wait_group.read N returns once at most N groups may still read their
// shared memory, wait_group N once at most N are still writing global memory. Before a TMA
// (async proxy) reads what threads wrote with st.shared, the writers fence the proxies.
__device__ __forceinline__ void tessera_tma_store_3d(const TesseraTmaMap* map, unsigned src,
                                                     int c0, int c1, int c2) {
  asm volatile("cp.async.bulk.tensor.3d.global.shared::cta.bulk_group [%0, {%2, %3, %4}], [%1];\n"
               ::"l"(reinterpret_cast<unsigned long long>(map)), "r"(src), "r"(c0), "r"(c1), "r"(c2)
               : "memory");
}
// tessera_tma_store_3d for a 4-D map.
__device__ __forceinline__ void tessera_tma_store_4d(const TesseraTmaMap* map, unsigned src,
                                                     int c0, int c1, int c2, int c3) {
  asm volatile("cp.async.bulk.tensor.4d.global.shared::cta.bulk_group [%0, {%2, %3, %4, %5}], [%1];\n"
               ::"l"(reinterpret_cast<unsigned long long>(map)), "r"(src), "r"(c0), "r"(c1), "r"(c2), "r"(c3)
               : "memory");
}
// A bulk copy (no tensor map) of `bytes` bytes from shared-memory address `src` to global
// `dst`, in the same groups: both addresses and the length multiples of 16.
__device__ __forceinline__ void tessera_bulk_store(void* dst, unsigned src, unsigned bytes) {
  asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;\n"
               ::"l"(reinterpret_cast<unsigned long long>(dst)), "r"(src), "r"(bytes)
               : "memory");
}
__device__ __forceinline__ void tessera_bulk_commit() {
  asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
}
template <int N>
__device__ __forceinline__ void tessera_bulk_wait_read() {
  asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(N) : "memory");
}
template <int N>
__device__ __forceinline__ void tessera_bulk_wait() {
  asm volatile("cp.async.bulk.wait_group %0;\n" ::"n"(N) : "memory");
}
__device__ __forceinline__ void tessera_fence_proxy_async() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}
__device__ __forceinline__ void tessera_sts32(unsigned addr, unsigned v) {
  asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(addr), "r"(v) : "memory");
}
__device__ __forceinline__ void tessera_sts16(unsigned addr, unsigned v) {
  asm volatile("st.shared.b16 [%0], %1;\n" ::"r"(addr), "h"((unsigned short)v) : "memory");
}
// The stores above under a predicate, as one predicated instruction: a branch around each
// (what `if (p) tessera_sts32(...)` compiles to) splits straight-line packing code into blocks.
__device__ __forceinline__ void tessera_sts32_if(bool p, unsigned addr, unsigned v) {
  asm volatile(
      "{\n .reg .pred q;\n setp.ne.b32 q, %2, 0;\n @q st.shared.b32 [%0], %1;\n}\n" ::"r"(addr),
      "r"(v), "r"((int)p)
      : "memory");
}
__device__ __forceinline__ void tessera_sts16_if(bool p, unsigned addr, unsigned v) {
  asm volatile(
      "{\n .reg .pred q;\n setp.ne.b32 q, %2, 0;\n @q st.shared.b16 [%0], %1;\n}\n" ::"r"(addr),
      "h"((unsigned short)v), "r"((int)p)
      : "memory");
}
__device__ __forceinline__ unsigned short tessera_lds16(unsigned addr) {
  unsigned short v;
  asm volatile("ld.shared.b16 %0, [%1];\n" : "=h"(v) : "r"(addr) : "memory");
  return v;
}

// wgmma brackets: a fence before the first wgmma that touches registers written otherwise,
// a commit closing a group, a wait for all but N groups.
__device__ __forceinline__ void tessera_wgmma_fence() {
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}

__device__ __forceinline__ void tessera_wgmma_commit() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}

template <int N>
__device__ __forceinline__ void tessera_wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}

// Keeps the compiler from moving reads or writes of `r` across a wgmma wait.
__device__ __forceinline__ void tessera_fence_operand(float& r) {
  asm volatile("" : "+f"(r)::"memory");
}

// The 64-bit shared-memory matrix descriptor of wgmma: the start address (bits 0-13, in 16-byte
// units) over the constant high part (leading and stride byte offsets, swizzle mode) that the
// planner derived from the shared-memory layout.
__device__ __forceinline__ unsigned long long tessera_wgmma_desc(unsigned addr,
                                                                 unsigned long long hi) {
  return hi | (unsigned long long)((addr & 0x3FFFFu) >> 4);
}

template <int kRegs>
__device__ __forceinline__ void tessera_setmaxnreg_dec() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kRegs));
}

template <int kRegs>
__device__ __forceinline__ void tessera_setmaxnreg_inc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kRegs));
}

// Programmatic dependent launch: waits until the grids this one depends on (the kernel before
// it on the stream, where this grid was launched with programmatic stream serialization) have
// completed and their memory operations are visible; a no-op without such a grid.
__device__ __forceinline__ void tessera_grid_dependency_wait() {
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
}

// Named barrier `id` over `threads` threads (a multiple of 32); id 0 is __syncthreads'.
__device__ __forceinline__ void tessera_bar_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

// gridDim.x read where it is used (a volatile read: hoisted into a register, the producer's
// 24 spilled it).
__device__ __forceinline__ int tessera_nctaid_x() {
  int n;
  asm volatile("mov.u32 %0, %%nctaid.x;" : "=r"(n));
  return n;
}

// A flag word between CTAs (stream-K): raised with release semantics at GPU scope (the
// caller's earlier global stores, and those of the threads that passed a barrier with it
// before, are visible to whoever acquires the value), read with acquire semantics.
__device__ __forceinline__ void tessera_flag_release(int* flag, int v) {
  asm volatile("fence.acq_rel.gpu;\n st.relaxed.gpu.global.b32 [%0], %1;\n" ::"l"(flag), "r"(v) : "memory");
}
__device__ __forceinline__ int tessera_flag_acquire(const int* flag) {
  int v;
  asm volatile("ld.acquire.gpu.global.b32 %0, [%1];\n" : "=r"(v) : "l"(flag) : "memory");
  return v;
}

// ---- Clusters (used only when the plan's kCluster > 1) ----

// This CTA's rank in its cluster, the cluster's index in the grid (x) and the clusters of the
// grid (x).
__device__ __forceinline__ int tessera_cluster_ctarank() {
  unsigned r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
  return (int)r;
}

__device__ __forceinline__ int tessera_cluster_id_x() {
  unsigned r;
  asm volatile("mov.u32 %0, %%clusterid.x;\n" : "=r"(r));
  return (int)r;
}

__device__ __forceinline__ int tessera_cluster_count_x() {
  unsigned r;
  asm volatile("mov.u32 %0, %%nclusterid.x;\n" : "=r"(r));
  return (int)r;
}

// Every thread of every CTA of the cluster arrives (releasing its earlier writes, barrier
// initializations included) and waits for all the others (acquiring theirs).
__device__ __forceinline__ void tessera_cluster_sync() {
  asm volatile("barrier.cluster.arrive.release;\n" ::: "memory");
  asm volatile("barrier.cluster.wait.acquire;\n" ::: "memory");
}

// The shared::cluster address of the variable at shared::cta address `addr` in the CTA of
// rank `rank` (the same offset in that CTA's shared memory).
__device__ __forceinline__ unsigned tessera_mapa(unsigned addr, int rank) {
  unsigned r;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(r) : "r"(addr), "r"(rank));
  return r;
}

// Arrives once on the mbarrier at shared::cluster address `bar` (this CTA's or another's).
// The default semantics (release at CTA scope): the only accesses a consumer makes to a stage
// are wgmma reads, complete once wgmma.wait_group returns, so the arrival has nothing to
// publish to the other CTA. A `.release.cluster` arrive makes ptxas put a cluster-wide memory
// fence before every arrival, which the profiler showed as the pair's main stall
// (docs/design/010-cluster-pairs.md).
__device__ __forceinline__ void tessera_mbar_arrive_cluster(unsigned bar) {
  asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];\n" ::"r"(bar) : "memory");
}

// Fetches the box of `map` at (c0, c1, c2) into L2 (no shared memory, no barrier).
__device__ __forceinline__ void tessera_tma_prefetch_3d(const TesseraTmaMap* map, int c0, int c1,
                                                        int c2) {
  asm volatile("cp.async.bulk.prefetch.tensor.3d.L2.global.tile [%0, {%1, %2, %3}];\n" ::"l"(
                   reinterpret_cast<unsigned long long>(map)),
               "r"(c0), "r"(c1), "r"(c2)
               : "memory");
}

// tessera_tma_prefetch_3d for a 4-D map.
__device__ __forceinline__ void tessera_tma_prefetch_4d(const TesseraTmaMap* map, int c0, int c1,
                                                        int c2, int c3) {
  asm volatile("cp.async.bulk.prefetch.tensor.4d.L2.global.tile [%0, {%1, %2, %3, %4}];\n" ::"l"(
                   reinterpret_cast<unsigned long long>(map)),
               "r"(c0), "r"(c1), "r"(c2), "r"(c3)
               : "memory");
}

// tessera_tma_load_3d, multicast: the box is written at the same shared-memory offset `dst` in
// every CTA of the cluster whose bit is set in `cta_mask`, and each of those CTAs' mbarrier at
// offset `bar` receives the box's transaction bytes.
__device__ __forceinline__ void tessera_tma_load_3d_multicast(unsigned dst,
                                                              const TesseraTmaMap* map,
                                                              unsigned bar, int c0, int c1,
                                                              int c2, unsigned short cta_mask) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
      ".multicast::cluster [%0], [%1, {%3, %4, %5}], [%2], %6;\n" ::"r"(dst),
      "l"(reinterpret_cast<unsigned long long>(map)), "r"(bar), "r"(c0), "r"(c1), "r"(c2),
      "h"(cta_mask)
      : "memory");
}
