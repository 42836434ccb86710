//! Staging of a K-major operand into the workspace ([`crate::plan::gemm::Plan::staged_k`]):
//! where K makes rows TMA cannot address, A and B are copied into rows of a padded length
//! before the Hopper kernel reads them.

use cudarc::driver::{CudaFunction, CudaStream};

use crate::codegen::{stage_rows_source, STAGE_ROWS_KERNEL};
use crate::error::Result;
use crate::launch::mem::{launch_kernel, param};
use crate::launch::runtime::Runtime;

/// One operand's copy: `batch` matrices of `rows` x `cols` elements, rows `src_ld` and
/// matrices `src_bs` elements apart, into rows `dst_ld` apart (matrices `rows * dst_ld`),
/// each destination row written up to column `fill` (zeros past `cols`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct StageCopy {
    pub rows: i64,
    pub cols: i64,
    pub batch: i64,
    pub src_ld: i64,
    pub src_bs: i64,
    pub dst_ld: i64,
    pub fill: i64,
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
    /// # Safety
    /// `src` must address every element `c` reads and `dst` the `batch * rows * dst_ld`
    /// elements it writes; `dst` 16-byte aligned, `dst_ld` a multiple of 8 and
    /// `cols <= fill <= dst_ld`; both valid on `stream` until the kernel has run.
    pub unsafe fn launch(
        &self,
        stream: &CudaStream,
        c: &StageCopy,
        src: u64,
        dst: u64,
        sms: i64,
    ) -> Result<()> {
        debug_assert!(dst % 16 == 0 && c.dst_ld % 8 == 0);
        debug_assert!(c.cols <= c.fill && c.fill <= c.dst_ld);
        let chunks = c.batch * c.rows * ((c.fill + 7) / 8);
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
        ];
        launch_kernel(
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
