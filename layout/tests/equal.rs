//! `equal` and `canonical` against brute force on every small layout: ranks 1 to 3, extents
//! 1 to 4, strides -4 to 8 (flat, and nested for a sample). The offsets are computed here
//! from the definition (colexicographic coordinates times strides), not by the library.

use std::collections::HashMap;

use tessera_layout::algebra::check;
use tessera_layout::{canonical, equal, IntTuple, Layout};

const EXTENTS: std::ops::RangeInclusive<i64> = 1..=4;
const STRIDES: std::ops::RangeInclusive<i64> = -4..=8;

/// `L(i)` for `i < size` from the flat modes: split `i` colexicographically.
fn brute_offsets(modes: &[(i64, i64)]) -> Vec<i64> {
    let size: i64 = modes.iter().map(|m| m.0).product();
    (0..size)
        .map(|i| {
            let mut rest = i;
            modes.iter().fold(0, |acc, &(s, d)| {
                let c = rest % s;
                rest /= s;
                acc + c * d
            })
        })
        .collect()
}

/// Every flat mode list of rank `rank`.
fn all_modes(rank: usize) -> Vec<Vec<(i64, i64)>> {
    let one: Vec<(i64, i64)> = EXTENTS.flat_map(|s| STRIDES.map(move |d| (s, d))).collect();
    let mut out: Vec<Vec<(i64, i64)>> = vec![vec![]];
    for _ in 0..rank {
        out = out
            .iter()
            .flat_map(|p| {
                one.iter().map(move |m| {
                    let mut q = p.clone();
                    q.push(*m);
                    q
                })
            })
            .collect();
    }
    out
}

/// The text of a rank-3 layout with its first two modes nested.
fn nested(modes: &[(i64, i64)]) -> String {
    let s: Vec<String> = modes.iter().map(|m| m.0.to_string()).collect();
    let d: Vec<String> = modes.iter().map(|m| m.1.to_string()).collect();
    format!(
        "(({},{}),{}):(({},{}),{})",
        s[0], s[1], s[2], d[0], d[1], d[2]
    )
}

fn build(modes: &[(i64, i64)]) -> Layout {
    if let [(s, d)] = modes {
        return Layout::int(*s, *d).unwrap();
    }
    Layout::new(
        IntTuple::flat(modes.iter().map(|m| m.0)),
        IntTuple::flat(modes.iter().map(|m| m.1)),
    )
    .unwrap()
}

struct Case {
    layout: Layout,
    leaves: usize,
    offsets: Vec<i64>,
}

/// Every case, built once for all tests.
fn cases() -> &'static [Case] {
    static ALL: std::sync::OnceLock<Vec<Case>> = std::sync::OnceLock::new();
    ALL.get_or_init(build_cases)
}

fn build_cases() -> Vec<Case> {
    let mut out = Vec::new();
    for rank in 1..=3 {
        for (k, modes) in all_modes(rank).into_iter().enumerate() {
            let offsets = brute_offsets(&modes);
            let nest = rank == 3 && k % 5 == 0;
            out.push(Case {
                layout: build(&modes),
                leaves: rank,
                offsets: offsets.clone(),
            });
            if nest {
                out.push(Case {
                    layout: nested(&modes).parse().unwrap(),
                    leaves: rank,
                    offsets,
                });
            }
        }
    }
    out
}

/// `canonical(L)` is canonical with L's function for every small layout, and it is the same
/// layout exactly for the layouts with the same offsets: the map from functions to canonical
/// forms is well defined and one-to-one.
#[test]
fn canonical_is_a_normal_form_on_every_small_layout() {
    let all = cases();
    assert_eq!(
        all.len(),
        52 + 52 * 52 + 52 * 52 * 52 + (52 * 52 * 52usize).div_ceil(5)
    );
    let mut by_function: HashMap<&[i64], Layout> = HashMap::new();
    let mut by_form: HashMap<Layout, &[i64]> = HashMap::new();
    for (k, c) in all.iter().enumerate() {
        let r = canonical(&c.layout);
        // The library's checker on a sample (it evaluates through the library); the
        // definition, checked here on every case, does not.
        if k % 97 == 0 {
            if let Err(e) = check::canonical(&c.layout, &r) {
                panic!("canonical({}) = {r}: {e}", c.layout);
            }
        }
        let (s, d) = (r.shape().leaves(), r.stride().leaves());
        let canonical_form = if c.offsets.len() == 1 {
            s[..] == [1] && d[..] == [0] && r.is_int()
        } else {
            r.depth() <= 1
                && r.is_int() == (s.len() == 1)
                && s.iter().all(|&x| x >= 2)
                && (1..s.len()).all(|k| d[k] != s[k - 1] * d[k - 1])
        };
        assert!(
            canonical_form,
            "canonical({}) = {r} is not canonical",
            c.layout
        );
        let got = brute_offsets(
            &r.shape()
                .leaves()
                .iter()
                .copied()
                .zip(r.stride().leaves().iter().copied())
                .collect::<Vec<_>>(),
        );
        assert_eq!(got, c.offsets, "canonical({}) = {r}", c.layout);
        let seen = by_function.entry(&c.offsets).or_insert_with(|| r.clone());
        assert_eq!(*seen, r, "two forms for the function of {}", c.layout);
        let f = by_form.entry(r.clone()).or_insert(&c.offsets);
        assert_eq!(*f, &c.offsets[..], "{r} stands for two functions");
    }
    assert_eq!(by_function.len(), by_form.len());
}

/// `equal(A, B)` is `offsets(A) == offsets(B)` for every pair of small layouts of rank up to 2
/// and equal size, and, for every rank-3 layout, with the first layout of its function and with
/// a layout of another function of the same size; layouts of different sizes are never equal.
#[test]
fn equal_agrees_with_offsets() {
    let all = cases();
    let mut by_size: HashMap<usize, Vec<&Case>> = HashMap::new();
    for c in all {
        by_size.entry(c.offsets.len()).or_default().push(c);
    }
    let mut pairs = 0u64;
    for group in by_size.values() {
        let small: Vec<&&Case> = group.iter().filter(|c| c.leaves <= 2).collect();
        for a in &small {
            for b in &small {
                assert_eq!(
                    equal(&a.layout, &b.layout),
                    a.offsets == b.offsets,
                    "{} vs {}",
                    a.layout,
                    b.layout
                );
                pairs += 1;
            }
        }
    }
    let mut first: HashMap<&[i64], &Layout> = HashMap::new();
    for c in all {
        first.entry(&c.offsets).or_insert(&c.layout);
    }
    for (k, c) in all.iter().enumerate().filter(|(_, c)| c.leaves == 3) {
        assert!(equal(&c.layout, first[&c.offsets[..]]), "{}", c.layout);
        let peers = &by_size[&c.offsets.len()];
        let other = peers[(k * 7919) % peers.len()];
        assert_eq!(
            equal(&c.layout, &other.layout),
            c.offsets == other.offsets,
            "{} vs {}",
            c.layout,
            other.layout
        );
        let stranger = &all[(k * 104_729) % all.len()];
        if stranger.offsets.len() != c.offsets.len() {
            assert!(!equal(&c.layout, &stranger.layout));
        }
        pairs += 3;
    }
    assert!(pairs > 500_000, "{pairs} pairs");
}

/// Layouts too large to enumerate are decided all the same.
#[test]
fn equal_on_huge_layouts() {
    let p = |s: &str| s.parse::<Layout>().unwrap();
    let big = p("((65536,65536),(65536,16384)):((1,65536),(4294967296,281474976710656))");
    assert!(equal(&big, &p("4611686018427387904:1")));
    assert_eq!(canonical(&big).to_string(), "4611686018427387904:1");
    // one mode's stride off by one: the function differs at index 65536 * 65536
    let off = p("((65536,65536),(65536,16384)):((1,65536),(4294967297,281474976710656))");
    assert!(!equal(&big, &off));
    assert!(!equal(&p("(2,1):(1,0)"), &p("(2,2):(1,0)")));
}
