//! Staging of a K-major operand into the workspace ([`crate::plan::gemm::Plan::staged_k`]):
//! where K makes rows TMA cannot address, A and B are copied into rows of a padded length
//! before the Hopper kernel reads them.

use cudarc::driver::{CudaFunction, CudaStream};

use crate::codegen::{stage_rows_source, STAGE_ROWS_KERNEL};
use crate::error::Result;
use crate::launch::mem::{launch_kernel_as, param};
use crate::launch::runtime::Runtime;

/// One operand's copy: `batch` matrices of `rows` x `cols` elements, rows `src_ld` and
/// matrices `src_bs` elements apart, into rows `dst_ld` apart (matrices `rows * dst_ld`),
/// each destination row written up to column `fill` (zeros past `cols`); the source holds the
/// first `src_batch` matrices, the rest are written as zeros.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct StageCopy {
    pub rows: i64,
    pub cols: i64,
    pub batch: i64,
    pub src_ld: i64,
    pub src_bs: i64,
    pub dst_ld: i64,
    pub fill: i64,
    pub src_batch: i64,
}

impl StageCopy {
    /// Elements the kernel reads at a time from `src`: the largest of 8, 4, 2 and 1 that
    /// divides the source's address in elements, its row and matrix strides and `cols`, so
    /// that every read is one aligned vector wholly before or past `cols` (a 200-byte pixel
    /// of 100 channels is read in 8-byte pieces, an odd channel count element by element).
    pub fn source_vector(&self, src: u64) -> i32 {
        let strides = [
            (src / 2) as i64,
            self.src_ld,
            if self.batch > 1 { self.src_bs } else { 0 },
            self.cols,
        ];
        [8, 4, 2]
            .into_iter()
            .find(|&v| src % 2 == 0 && strides.iter().all(|&s| s % v == 0))
            .unwrap_or(1) as i32
    }
}

/// The compiled staging kernel.
pub(crate) struct StageRows {
    func: CudaFunction,
}

impl StageRows {
    /// Compiles (or finds in the context's cache) the kernel.
    pub fn new(rt: &Runtime) -> Result<StageRows> {
        let src = stage_rows_source();
        Ok(StageRows {
            func: rt.function(&src, STAGE_ROWS_KERNEL, STAGE_ROWS_KERNEL, 0)?,
        })
    }

    /// Queues the copy `c` from `src` to `dst` on `stream`, with a grid of at most 16 CTAs
    /// of 256 threads per SM (enough resident warps to keep the copy at memory speed).
    ///
    /// `copy_next`: the next kernel on the stream is another copy launched with
    /// `after_copy`, which this grid lets start early. With `after_copy`, a programmatic
    /// dependent launch: the grid may start while the kernel before it on the stream, itself
    /// a staging copy launched in stream order with `copy_next`, is still running; it waits
    /// for that copy only at its end (so that a GEMM after it, waiting for this grid, finds
    /// both copies done).
    ///
    /// # Safety
    /// `src` must address every element `c` reads and `dst` the `batch * rows * dst_ld`
    /// elements it writes; `dst` 16-byte aligned, `dst_ld` a multiple of 8 and
    /// `cols <= fill <= dst_ld`; both valid on `stream` until the kernel has run. With
    /// `after_copy`, the kernel before this one on the stream must be a staging copy launched
    /// without it, that neither reads `dst` nor writes `src`: this grid's reads and writes are
    /// then ordered after everything before that copy, which is all they need.
    pub unsafe fn launch(
        &self,
        stream: &CudaStream,
        c: &StageCopy,
        (src, dst): (u64, u64),
        sms: i64,
        (copy_next, after_copy): (bool, bool),
    ) -> Result<()> {
        debug_assert!(dst % 16 == 0 && c.dst_ld % 8 == 0);
        debug_assert!(c.cols <= c.fill && c.fill <= c.dst_ld);
        debug_assert!(0 <= c.src_batch && c.src_batch <= c.batch);
        let chunks = c.batch * c.rows * ((c.fill + 7) / 8);
        let vec = c.source_vector(src);
        let signal = i32::from(copy_next);
        let blocks = ((chunks + 255) / 256).clamp(1, (16 * sms).max(1));
        let mut params = [
            param(&src),
            param(&dst),
            param(&c.rows),
            param(&c.cols),
            param(&c.batch),
            param(&c.src_ld),
            param(&c.src_bs),
            param(&c.dst_ld),
            param(&c.fill),
            param(&c.src_batch),
            param(&vec),
            param(&signal),
        ];
        launch_kernel_as(
            after_copy,
            &self.func,
            stream,
            (blocks as u32, 1, 1),
            (256, 1, 1),
            0,
            &mut params,
            "launch tessera_stage_rows",
        )
    }
}

#[cfg(test)]
mod tests {
    use super::StageCopy;

    fn copy(cols: i64, src_ld: i64, batch: i64, src_bs: i64) -> StageCopy {
        StageCopy {
            rows: 10,
            cols,
            batch,
            src_ld,
            src_bs,
            dst_ld: 128,
            fill: 128,
            src_batch: batch,
        }
    }

    #[test]
    fn source_vectors_follow_every_stride_and_the_address() {
        // x of 100 channels a pixel: 200-byte rows, read 4 elements (8 bytes) at a time.
        assert_eq!(copy(100, 100, 1, 0).source_vector(0x1000), 4);
        // 124 channels: 248 bytes, also 8-byte pieces; 127: element by element.
        assert_eq!(copy(124, 124, 1, 0).source_vector(0x1000), 4);
        assert_eq!(copy(127, 127, 1, 0).source_vector(0x1000), 1);
        // 16-byte rows at a 16-byte address: whole chunks; the address alone can lower it.
        assert_eq!(copy(64, 64, 1, 0).source_vector(0x1000), 8);
        assert_eq!(copy(64, 64, 1, 0).source_vector(0x1004), 2);
        assert_eq!(copy(64, 64, 1, 0).source_vector(0x1001), 1);
        // A batch's stride counts only where there is more than one matrix.
        assert_eq!(copy(8, 8, 3, 90).source_vector(0x1000), 2);
        assert_eq!(copy(8, 8, 1, 90).source_vector(0x1000), 8);
        // cols decides too: a run never straddles the last column.
        assert_eq!(copy(6, 8, 1, 0).source_vector(0x1000), 2);
    }
}
