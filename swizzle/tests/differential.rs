//! Differential test of swizzles against the reference Python implementation.
//!
//! `layout/tests/data/pycute_swizzle.json` (written by `tools/pycute_vectors.py`, which runs
//! pycute from `nvidia-cutlass`) holds `Swizzle(B,M,S)(x)` for many `x`, and the offsets of
//! `ComposedLayout(Swizzle, offset, Layout)` (`Sw<B,M,S> o OFFSET o L` in CuTe's text form;
//! pycute's class takes the same three in this order but calls the outer function
//! `layoutB`). Every value is compared as a function. pycute's `ComposedLayout.cosize()` is
//! `2^(B+M+|S|)` (pitfall 10 of `docs/cute_semantics.md`), which is not the extent of the
//! image: there the test checks tessera's exact `cosize` against the span of pycute's own
//! offsets instead.
//!
//! The crate has no JSON dependency; the data is one flat object per line, read by the small
//! reader at the bottom of this file.

use std::collections::BTreeMap;

use tessera_swizzle::{Swizzle, SwizzledLayout};

const DATA: &str = include_str!("../../layout/tests/data/pycute_swizzle.json");

#[derive(Default)]
struct Tally {
    cases: usize,
    agree: usize,
    known: usize,
    disagree: Vec<String>,
}

#[test]
fn replay_pycute_swizzle_vectors() {
    let data = Json::parse(DATA);
    let cases = data.get("cases").as_array();
    assert!(cases.len() > 100, "the data file lost its cases");
    let mut by_op: BTreeMap<String, Tally> = BTreeMap::new();
    for c in cases {
        let op = c.get("op").as_str().to_string();
        let arg = c.get("args").as_array()[0].as_str().to_string();
        let t = by_op.entry(op.clone()).or_default();
        t.cases += 1;
        let verdict = match op.as_str() {
            "swizzle" => replay_swizzle(&arg, c),
            "composed_eval" => replay_composed(&arg, c),
            other => Err(format!("unknown op {other}")),
        };
        match verdict {
            Ok(false) => t.agree += 1,
            Ok(true) => t.known += 1,
            Err(why) => t.disagree.push(format!("{op}({arg}): {why}")),
        }
    }

    println!(
        "pycute swizzle replay ({})",
        data.get("meta").get("reference").as_str()
    );
    let mut failures = Vec::new();
    for (op, t) in &by_op {
        println!(
            "{op:<14} {:>4} cases: {} agree as functions, {} disagree; of these, {} where \
             pycute's cosize 2^(B+M+|S|) is not the image's extent (tessera's exact cosize \
             checked against pycute's offsets)",
            t.cases,
            t.agree + t.known,
            t.disagree.len(),
            t.known
        );
        failures.extend(t.disagree.iter().cloned());
    }
    assert!(
        failures.is_empty(),
        "{} disagreements with pycute:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// `Sw<B,M,S>(x)` at every recorded `x`. `Ok(false)`: agreement.
fn replay_swizzle(arg: &str, c: &Json) -> Result<bool, String> {
    let sw: Swizzle = arg.parse().map_err(|e| format!("parse: {e}"))?;
    let xs = c.get("indices").as_ints();
    let want = c.get("values").as_ints();
    for (x, w) in xs.iter().zip(&want) {
        let got = sw.apply(*x);
        if got != *w {
            return Err(format!("at {x}: tessera {got}, pycute {w}"));
        }
    }
    Ok(false)
}

/// Size and offsets of `Sw<B,M,S> o OFFSET o L`; then cosize. `Ok(true)`: pycute's cosize is
/// the known-wrong `2^(B+M+|S|)` and tessera's exact one was checked against the span of
/// pycute's offsets.
fn replay_composed(arg: &str, c: &Json) -> Result<bool, String> {
    let l: SwizzledLayout = arg.parse().map_err(|e| format!("parse: {e}"))?;
    let want = c.get("offsets").as_ints();
    let size = c.get("size").as_int();
    if l.size() != size {
        return Err(format!("size: tessera {}, pycute {size}", l.size()));
    }
    let got = l.offsets().map_err(|e| format!("offsets: {e}"))?;
    if got != want {
        let i = got.iter().zip(&want).position(|(a, b)| a != b).unwrap_or(0);
        return Err(format!(
            "offset {i}: tessera {}, pycute {}",
            got[i], want[i]
        ));
    }
    // The extent of the image, from pycute's offsets: what an allocation must hold.
    let (lo, hi) = (*want.iter().min().unwrap(), *want.iter().max().unwrap());
    let ours = l.cosize().map_err(|e| format!("cosize: {e}"))?;
    if ours != hi - lo + 1 {
        return Err(format!(
            "cosize: tessera {ours}, image spans {}",
            hi - lo + 1
        ));
    }
    if l.image_bounds().map_err(|e| e.to_string())? != (lo, hi) {
        return Err(format!("image_bounds: not ({lo}, {hi})"));
    }
    let theirs = c.get("pycute_cosize").as_int();
    let sw = l.swizzle;
    let pycute_formula = 1i64 << (sw.bits() + sw.base() + sw.shift().abs());
    if theirs != pycute_formula {
        return Err(format!(
            "pycute cosize {theirs} is not 2^(B+M+|S|) = {pycute_formula}"
        ));
    }
    Ok(ours != theirs)
}

// ---------------------------------------------------------------------------------------------
// A minimal JSON reader: enough for the generator's output (objects, arrays, strings without
// escapes other than `\"` and `\\`, integers, null).

#[derive(Debug, Clone)]
enum Json {
    Null,
    Int(i64),
    Str(String),
    Arr(Vec<Json>),
    Obj(Vec<(String, Json)>),
}

impl Json {
    fn parse(s: &str) -> Json {
        let mut p = Reader {
            b: s.as_bytes(),
            i: 0,
        };
        let v = p.value();
        p.ws();
        assert_eq!(p.i, p.b.len(), "trailing text in JSON");
        v
    }

    fn get(&self, k: &str) -> &Json {
        match self {
            Json::Obj(kv) => kv
                .iter()
                .find(|(key, _)| key == k)
                .map(|(_, v)| v)
                .unwrap_or(&Json::Null),
            _ => &Json::Null,
        }
    }

    fn as_array(&self) -> &[Json] {
        match self {
            Json::Arr(v) => v,
            other => panic!("expected an array, found {other:?}"),
        }
    }

    fn as_str(&self) -> &str {
        match self {
            Json::Str(s) => s,
            other => panic!("expected a string, found {other:?}"),
        }
    }

    fn as_int(&self) -> i64 {
        match self {
            Json::Int(v) => *v,
            other => panic!("expected an integer, found {other:?}"),
        }
    }

    fn as_ints(&self) -> Vec<i64> {
        self.as_array().iter().map(Json::as_int).collect()
    }
}

struct Reader<'a> {
    b: &'a [u8],
    i: usize,
}

impl Reader<'_> {
    fn ws(&mut self) {
        while self.i < self.b.len() && self.b[self.i].is_ascii_whitespace() {
            self.i += 1;
        }
    }

    fn eat(&mut self, c: u8) -> bool {
        self.ws();
        if self.b.get(self.i) == Some(&c) {
            self.i += 1;
            true
        } else {
            false
        }
    }

    fn expect(&mut self, c: u8) {
        assert!(self.eat(c), "expected `{}` at byte {}", c as char, self.i);
    }

    fn value(&mut self) -> Json {
        self.ws();
        match self.b[self.i] {
            b'{' => {
                self.i += 1;
                let mut kv = Vec::new();
                if !self.eat(b'}') {
                    loop {
                        self.ws();
                        let k = self.string();
                        self.expect(b':');
                        kv.push((k, self.value()));
                        if self.eat(b'}') {
                            break;
                        }
                        self.expect(b',');
                    }
                }
                Json::Obj(kv)
            }
            b'[' => {
                self.i += 1;
                let mut v = Vec::new();
                if !self.eat(b']') {
                    loop {
                        v.push(self.value());
                        if self.eat(b']') {
                            break;
                        }
                        self.expect(b',');
                    }
                }
                Json::Arr(v)
            }
            b'"' => Json::Str(self.string()),
            b'n' => {
                assert_eq!(&self.b[self.i..self.i + 4], b"null");
                self.i += 4;
                Json::Null
            }
            _ => {
                let start = self.i;
                if self.b[self.i] == b'-' {
                    self.i += 1;
                }
                while self.i < self.b.len() && self.b[self.i].is_ascii_digit() {
                    self.i += 1;
                }
                let text = std::str::from_utf8(&self.b[start..self.i]).unwrap();
                Json::Int(
                    text.parse()
                        .unwrap_or_else(|_| panic!("bad number at byte {start}")),
                )
            }
        }
    }

    fn string(&mut self) -> String {
        assert_eq!(self.b[self.i], b'"', "expected a string at byte {}", self.i);
        self.i += 1;
        let mut out = Vec::new();
        while self.b[self.i] != b'"' {
            if self.b[self.i] == b'\\' {
                self.i += 1;
            }
            out.push(self.b[self.i]);
            self.i += 1;
        }
        self.i += 1;
        String::from_utf8(out).unwrap()
    }
}
