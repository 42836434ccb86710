//! The host cost of `Gemm::launch` against a bare `cuLaunchKernel` of the same kernel (256³
//! by default), the heap allocations of a launch, and what building a `Gemm` cost (NVRTC or
//! the disk cache: run twice with `TESSERA_CACHE_DIR` set to see the second process find the
//! kernel without compiling).
//!
//! `cargo run --release --features cuda --example launch_overhead [M N K]`

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

/// The system allocator, counting allocations.
struct Counting;
static ALLOCS: AtomicUsize = AtomicUsize::new(0);
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        System.alloc(l)
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        System.dealloc(p, l)
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        System.realloc(p, l, n)
    }
}
#[global_allocator]
static GLOBAL: Counting = Counting;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    use tessera_kernels::{Context, Gemm, GemmSpec, Major, Operands};
    let a: Vec<i64> = std::env::args()
        .skip(1)
        .filter_map(|s| s.parse().ok())
        .collect();
    let (m, n, k) = match a[..] {
        [m, n, k] => (m, n, k),
        _ => (256, 256, 256),
    };
    let ctx = Context::new(0)?;
    println!(
        "device {} ({}), cache dir {:?}",
        ctx.device_name(),
        ctx.arch(),
        std::env::var("TESSERA_CACHE_DIR").ok()
    );
    let t0 = std::time::Instant::now();
    let spec = GemmSpec::new(m, n, k).b(Major::Col);
    let gemm = Gemm::new(&ctx, &spec)?;
    let s = gemm.build_stats();
    println!(
        "Gemm::new {m}x{n}x{k}: {:.1} ms wall; NVRTC compiles {} ({:.1} ms), disk-cache hits {}",
        t0.elapsed().as_secs_f64() * 1e3,
        s.compiled,
        s.compile_seconds * 1e3,
        s.disk_hits
    );
    // Allocations of launches (after a warm-up launch).
    let stream = ctx.cudarc().default_stream();
    let x = stream.alloc_zeros::<half::bf16>((m * k) as usize)?;
    let w = stream.alloc_zeros::<half::bf16>((n * k) as usize)?;
    let mut d = stream.alloc_zeros::<half::bf16>((m * n) as usize)?;
    gemm.launch(&stream, &x, &w, &mut d, Operands::new())?;
    stream.synchronize()?;
    let calls = 1000;
    let before = ALLOCS.load(Ordering::Relaxed);
    for _ in 0..calls {
        gemm.launch(&stream, &x, &w, &mut d, Operands::new())?;
    }
    let allocs = ALLOCS.load(Ordering::Relaxed) - before;
    stream.synchronize()?;
    println!("heap allocations in {calls} launches: {allocs}");
    let o = tessera_kernels::bench::overhead::launch_overhead(&ctx, (m, n, k), 50, 40)?;
    println!(
        "host time per call over {} calls, median (mean) us: Gemm::launch {:.2} ({:.2}), bare cuLaunchKernel {:.2} ({:.2}), difference {:.2}",
        o.calls, o.gemm_median_us, o.gemm_mean_us, o.raw_median_us, o.raw_mean_us, o.gemm_median_us - o.raw_median_us
    );
    Ok(())
}
