//! The timeline of one launch of the Hopper GEMM: whether the consumer warpgroups' mainloops
//! keep the tensor cores busy, and whether (ping-pong) one's epilogue runs under the other's
//! mainloop. `sm90_timeline M N K [--schedule cooperative|pingpong] [--epilogue LIST]
//! [--tree TEXT] [--tile BMxBN] [--stages S] [--group-m G] [--stream-k on|off] [--cta C]
//! [--sustain MS] [--clock-only] [--define NAME[=VALUE]]...`; `--tree` runs a tree epilogue
//! (`parse_epilogue`: the generated fragment path) instead; each `--define` adds a macro to the
//! compiled source (for experiments guarded by `#ifdef` in a working copy of the kernel).
//!
//! The kernel is compiled with `TESSERA_SM90_TIMELINE` defined (see `sm90_gemm.cuh`): every
//! consumer warpgroup's first thread writes the SM's clock at four events of each tile (its
//! iteration begins, the turn is taken, the first stage has arrived, the last wgmma is done),
//! and the producer at its first stage wait and its last load. The program launches it
//! (warm-up first), reads the stamps back and prints, over all CTAs: the mean time a tile spends
//! waiting for its turn, waiting for its first stage, in its mainloop and in its epilogue; the
//! fraction of a CTA's span in which some consumer's mainloop runs (the tensor cores' share);
//! and, for ping-pong, the fraction of each epilogue that another warpgroup's mainloop covers.
//! `--sustain MS` launches the kernel back to back for MS milliseconds before the timed
//! launches, so that they run at the clock sustained load settles to. `--clock-only` compiles
//! only the two clock stamps of each CTA, not the per-tile ones, and prints only the launch's
//! times and clock. The stamped launch also prints its span on the global timer and the SM
//! clock each CTA ran at (its clock cycles over its nanoseconds), so a slower launch with the
//! same cycles shows as a lower clock. Then CTA `C`'s (default 0) events, one line a tile.
//! Times are in thousands of SM clocks.
fn main() {
    if let Err(e) = tessera_kernels::bench::timeline::run() {
        eprintln!("sm90_timeline: {e}");
        std::process::exit(1);
    }
}
