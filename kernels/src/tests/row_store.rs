//! When a launch takes the Hopper kernel's row store (`launch::sm90::row_storable`): D's rows
//! contiguous, within one tile, the start and the batches on 16 bytes, the rows' blocks inside
//! the store buffers, and only in a kernel compiled with the path.
#![cfg(feature = "cuda")]

use crate::launch::sm90::row_storable;
use crate::plan::{GemmProblem, Sm90Plan};

#[test]
fn the_row_store_takes_contiguous_rows_on_16_bytes_within_one_tile() {
    let plan = Sm90Plan::new(&GemmProblem::new(200704, 124, 1152)).unwrap();
    assert!(plan.row_store());
    let rows = |ptr: u64, ld: i64, bs: i64, n: i64, batch: i64, eb: u64, outs: i64| {
        row_storable(&plan, (ptr, ld, bs), (n, batch), eb, outs)
    };
    assert!(rows(0x1000, 124, 0, 124, 1, 2, 1));
    // Padded rows are not one run; a start on 8 bytes puts the runs off the grid.
    assert!(!rows(0x1000, 128, 0, 124, 1, 2, 1));
    assert!(!rows(0x1008, 124, 0, 124, 1, 2, 1));
    // Batches of 1000 rows start on 16 bytes (248000 B apart), of 1001 rows on 8.
    assert!(rows(0x1000, 124, 124 * 1000, 124, 2, 2, 1));
    assert!(!rows(0x1000, 124, 124 * 1001, 124, 2, 2, 1));
    // More columns than the tile holds; 4-byte elements.
    assert!(!rows(0x1000, 300, 0, 300, 1, 2, 1));
    assert!(!rows(0x1000, 124, 0, 124, 1, 4, 1));
    // The plan's buffers hold 64 rows of D, not of D and aux.
    let st = plan.store.as_ref().unwrap();
    assert!(st.buffers * st.tma.bytes >= 64 * 124 * 2);
    assert!(st.buffers * st.tma.bytes < 2 * 64 * 124 * 2);
    assert!(!rows(0x1000, 124, 0, 124, 1, 2, 2));
    // A kernel compiled without the path (N on the grid) never takes it.
    let on_grid = Sm90Plan::new(&GemmProblem::new(200704, 128, 1152)).unwrap();
    assert!(!on_grid.row_store());
    assert!(!row_storable(&on_grid, (0x1000, 124, 0), (124, 1), 2, 1));
}
