//! The named smem atoms: bijections onto their storage, conflict-free for the reads they
//! exist for, equal to the hardware's byte-level definition, and invertible.

mod common;

use tessera_layout::{composition, IntTuple, Layout};
use tessera_swizzle::atoms::{
    all_atoms, k_sw128, k_sw32, k_sw64, ldmatrix_atom_sm80, mn_sw128, mn_sw32, mn_sw64, smem_atom,
    smem_atom_bytes, Major,
};
use tessera_swizzle::{algebra, bank_conflicts, is_bijective, F2Map, Swizzle, SwizzledLayout};

#[test]
fn atoms_by_hand() {
    // Element-unit forms of the hardware modes (byte swizzle Sw<B,4,3>, M lowered by
    // log2(element bytes)), over 8 rows of W bytes.
    let table = [
        (k_sw128(2), "Sw<3,3,3> o 0 o (8,64):(64,1)"),
        (k_sw64(2), "Sw<2,3,3> o 0 o (8,32):(32,1)"),
        (k_sw32(2), "Sw<1,3,3> o 0 o (8,16):(16,1)"),
        (k_sw128(1), "Sw<3,4,3> o 0 o (8,128):(128,1)"),
        (k_sw128(4), "Sw<3,2,3> o 0 o (8,32):(32,1)"),
        (mn_sw128(2), "Sw<3,3,3> o 0 o (64,8):(1,64)"),
        (mn_sw64(1), "Sw<2,4,3> o 0 o (64,8):(1,64)"),
        (mn_sw32(2), "Sw<1,3,3> o 0 o (16,8):(1,16)"),
        (smem_atom(Major::K, 16, 2), "Sw<0,3,3> o 0 o (8,8):(8,1)"),
    ];
    for (atom, want) in table {
        assert_eq!(atom.unwrap().to_string(), want);
    }
    assert_eq!(
        smem_atom_bytes(Major::K, 128).unwrap().to_string(),
        "Sw<3,4,3> o 0 o (8,128):(128,1)"
    );
    assert!(smem_atom(Major::K, 256, 2).is_err());
    assert!(smem_atom(Major::K, 128, 3).is_err());
}

#[test]
fn every_atom_is_a_bijection_onto_its_storage() {
    let atoms = all_atoms();
    assert_eq!(atoms.len(), 2 * 4 * 3);
    for (name, a) in atoms {
        let size = a.size();
        assert!(is_bijective(&a).unwrap(), "{name}: {a}");
        assert_eq!(a.image_bounds().unwrap(), (0, size - 1), "{name}");
        assert_eq!(
            a.cosize().unwrap(),
            a.cosize_inner(),
            "{name}: C++ agrees on atoms"
        );
        // independently: the sorted offsets are 0..size
        let mut offs = common::ref_offsets(&a);
        offs.sort_unstable();
        assert_eq!(offs, (0..size).collect::<Vec<_>>(), "{name}");
        // and the F2 view is a permutation of the aligned block
        let f = F2Map::of(&a).unwrap();
        assert!(f.is_bijective(), "{name}");
        let inv = f.inverse().unwrap();
        for i in 0..size {
            assert_eq!(inv.apply(a.call(i).unwrap()), i, "{name}");
        }
    }
}

#[test]
fn atoms_in_bytes_are_the_hardware_definition() {
    for (name, a) in all_atoms() {
        let e = if name.ends_with(" 8-bit") {
            1
        } else if name.ends_with("16-bit") {
            2
        } else {
            4
        };
        let major = if name.starts_with("K-") {
            Major::K
        } else {
            Major::MN
        };
        let w: i64 = name
            .split("SW")
            .nth(1)
            .unwrap()
            .split(' ')
            .next()
            .unwrap()
            .parse()
            .unwrap();
        let bytes = algebra::downcast(&a, e).unwrap();
        let hw = smem_atom_bytes(major, w).unwrap();
        // same function on bytes: both map the byte coordinates alike
        assert_eq!(
            common::ref_offsets(&bytes),
            common::ref_offsets(&hw),
            "{name}"
        );
    }
}

/// The read an atom is for: 8 lanes, lane r reading the 16-byte chunk `c` of row (K-major)
/// or column (MN-major) r, built with the algebra: the atom composed with the access's
/// coordinates, and chunk `c`'s first element as the offset inside the swizzle.
fn chunk_read(atom: &SwizzledLayout, major: Major, c: i64, e: i64) -> SwizzledLayout {
    let v = 16 / e; // elements per chunk
    let rows = 8;
    let (m0, m1) = (
        atom.inner.mode(0).unwrap().size(),
        atom.inner.mode(1).unwrap().size(),
    );
    // (lane, j) -> atom index of coordinate (lane, j) (K-major) or (j, lane) (MN-major)
    let access = match major {
        Major::K => Layout::new(IntTuple::flat([rows, v]), IntTuple::flat([1, m0])).unwrap(),
        Major::MN => Layout::new(IntTuple::flat([rows, v]), IntTuple::flat([m0, 1])).unwrap(),
    };
    let inner = composition(&atom.inner, &access).unwrap();
    let start = match major {
        Major::K => atom.inner.eval(&IntTuple::flat([0, c * v])).unwrap(),
        Major::MN => atom.inner.eval(&IntTuple::flat([c * v, 0])).unwrap(),
    };
    assert!(c * v < if major == Major::K { m1 } else { m0 });
    SwizzledLayout::new(atom.swizzle, atom.offset + start, inner)
}

#[test]
fn chunk_reads_are_conflict_free_and_would_not_be_without_the_swizzle() {
    for major in [Major::K, Major::MN] {
        for w in [16, 32, 64, 128] {
            for e in [1, 2, 4] {
                let atom = smem_atom(major, w, e).unwrap();
                for c in 0..w / 16 {
                    let read = chunk_read(&atom, major, c, e);
                    let b = bank_conflicts(&read, e).unwrap();
                    assert_eq!(b.to_string(), "1/1", "{major} SW{w} e{e} chunk {c}: {read}");
                    // the same read without the swizzle: 128/W rows of W bytes share each
                    // 128-byte line, so each 16-byte bank group is hit by 8/(128/W) = W/16
                    // rows.
                    let plain =
                        SwizzledLayout::new(Swizzle::identity(), read.offset, read.inner.clone());
                    let want = (w / 16).max(1);
                    assert_eq!(
                        bank_conflicts(&plain, e).unwrap().wavefronts,
                        want,
                        "{major} SW{w} e{e}"
                    );
                }
            }
        }
    }
}

#[test]
fn the_ldmatrix_atom_is_the_k_major_atom() {
    for row in [32, 64, 128] {
        for e in [1, 2, 4] {
            assert_eq!(
                ldmatrix_atom_sm80(row, e).unwrap(),
                smem_atom(Major::K, row, e).unwrap()
            );
        }
    }
    assert!(ldmatrix_atom_sm80(16, 2).is_err());
}

#[test]
fn a_tile_of_atoms_stays_a_bijection_and_inverts() {
    let atom = k_sw128(2).unwrap();
    let tile = algebra::tile_to_shape(&atom, &"(64,128)".parse().unwrap(), None).unwrap();
    assert_eq!(tile.size(), 64 * 128);
    assert!(is_bijective(&tile).unwrap());
    let r = algebra::right_inverse(&atom).unwrap();
    for i in 0..r.size() {
        assert_eq!(atom.call(r.call(i).unwrap()).unwrap(), i);
    }
    let l = algebra::left_inverse(&atom).unwrap();
    for i in 0..atom.size() {
        assert_eq!(l.call(atom.call(i).unwrap()).unwrap(), i);
    }
}
