//! The bodies of the fuzz targets, one function per target.
//!
//! Each takes the fuzzer's bytes and panics only when a property fails: a parser or an
//! operation panicked (overflow included: the fuzz build has overflow checks on), a text that
//! parses does not print back to itself, or an operation's answer fails its post-condition
//! (`tessera_layout::algebra::check`), or a refusal's stated condition does not hold. Hangs
//! are caught by the fuzzer's timeout.
//!
//! This file is compiled twice: by the cargo-fuzz crate around it (nightly, libFuzzer), and by
//! the workspace test `tests/fuzz_replay.rs` (stable), which replays the committed corpus and
//! the regression inputs through the same functions.

use tessera_layout::algebra::check::{self, Verdict};
use tessera_layout::{self as tl, IntTuple, Layout, LayoutError, Tiler};

/// A target: the fuzzer's bytes in, a panic out when a property fails.
pub type Target = fn(&[u8]);

/// The targets by name, as the fuzz crate's binaries and the corpus directories name them.
pub const TARGETS: &[(&str, Target)] = &[
    ("layout_text", layout_text),
    ("eval_expr", eval_expr),
    ("epilogue_text", epilogue_text),
    ("composition", composition),
    ("complement", complement),
    ("divide", divide),
    ("product", product),
    ("inverse", inverse),
    ("unary", unary),
];

/// Layouts up to this size are checked against their post-conditions by brute force; the
/// checkers enumerate them (and, for some, their products).
const CHECKED_SIZE: i64 = 1 << 10;

/// A checker that enumerates two layouts together (the complement's `(filter(L), R)`) runs
/// where the product of their sizes is at most this: a larger product is linear work the
/// sanitizer build cannot finish under the fuzzer's timeout, not a harder case.
const CHECKED_PAIR: i64 = 1 << 16;

fn verdict(what: impl Fn() -> String, v: Verdict) {
    if let Err(why) = v {
        panic!("{}: {why}", what());
    }
}

/// The text parsers of layouts, int tuples, tilers and (swizzled) layouts: what parses prints
/// back to text that parses to the same value.
pub fn layout_text(data: &[u8]) {
    let Ok(s) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(l) = s.parse::<Layout>() {
        let back: Layout = l.to_string().parse().expect("a printed layout parses");
        assert_eq!(back, l, "{s}");
    }
    if let Ok(t) = s.parse::<IntTuple>() {
        let back: IntTuple = t.to_string().parse().expect("a printed int tuple parses");
        assert_eq!(back, t, "{s}");
    }
    if let Ok(t) = s.parse::<Tiler>() {
        let back: Tiler = t.to_string().parse().expect("a printed tiler parses");
        assert_eq!(back, t, "{s}");
    }
    if let Ok(l) = s.parse::<tessera_swizzle::AnyLayout>() {
        let back: tessera_swizzle::AnyLayout =
            l.to_string().parse().expect("a printed layout parses");
        assert_eq!(back.to_string(), l.to_string(), "{s}");
    }
    // Errors print (shortened) without panicking.
    if let Err(e) = s.parse::<Layout>() {
        let _ = e.to_string();
    }
}

/// `tessera eval`'s language: evaluation never panics, and `--explain` agrees with it.
///
/// The input domain leaves out expressions whose `bank_conflicts` calls list more than
/// [`BANK_WORDS`] words ([`bank_work_is_bounded`]): the count enumerates its layout by nature
/// (any layout, swizzled or not, may be asked), so its work grows with the layout up to the
/// library's bound, which takes seconds under the fuzzers' sanitizers.
pub fn eval_expr(data: &[u8]) {
    let Ok(s) = std::str::from_utf8(data) else {
        return;
    };
    if tessera::expr::parse(s).is_ok_and(|e| !bank_work_is_bounded(&e)) {
        return;
    }
    let v = tessera::expr::evaluate(s);
    let shown = match &v {
        Ok(v) => v.to_string(),
        Err(e) => format!("error: {e}"),
    };
    let x = tessera::expr::explain(s);
    let explained = match &x.result {
        Ok(v) => v.to_string(),
        Err(e) => format!("error: {e}"),
    };
    assert_eq!(shown, explained, "evaluate and explain differ on {s:?}");
}

/// The most 4-byte words a `bank_conflicts` call of the `eval_expr` harness lists: `size(L)`
/// elements of `elem_bytes / 4 + 2` words each, the library's own count, whose bound is 2^24.
/// At that bound a call takes a few tenths of a second in a release build, and more than the
/// fuzzers' timeout under their sanitizers; 2^20 keeps each under a second there.
pub const BANK_WORDS: i128 = 1 << 20;

/// Whether every `bank_conflicts(L, elem_bytes)` call in `e` lists at most [`BANK_WORDS`]
/// words. The arguments of such a call are evaluated to find out; a call whose arguments do
/// not evaluate, or whose first is not something with a size, is an error of the evaluator
/// and stays in the domain.
fn bank_work_is_bounded(e: &tessera::expr::Expr) -> bool {
    use tessera::expr::{call_function, Expr, Value};
    let int = |v: Result<Value, tessera::expr::Error>| match v {
        Ok(Value::IntTuple(IntTuple::Int(n))) => Some(n),
        _ => None,
    };
    match e {
        Expr::Call { name, args } => {
            if !args.iter().all(bank_work_is_bounded) {
                return false;
            }
            if *name != "bank_conflicts" || args.len() != 2 {
                return true;
            }
            let size = args[0]
                .eval()
                .ok()
                .and_then(|l| int(call_function("size", vec![l])));
            let bytes = int(args[1].eval());
            match (size, bytes) {
                (Some(n), Some(b)) => {
                    let words = i128::from(b.clamp(0, 1 << 20)) / 4 + 2;
                    i128::from(n) * words <= BANK_WORDS
                }
                _ => true,
            }
        }
        Expr::Tuple(items) => items.iter().all(bank_work_is_bounded),
        Expr::Layout(s, d) => bank_work_is_bounded(s) && bank_work_is_bounded(d),
        Expr::Tiler(items) => items.iter().flatten().all(bank_work_is_bounded),
        Expr::Swizzled {
            swizzle,
            offset,
            layout,
        } => {
            bank_work_is_bounded(swizzle)
                && offset.as_deref().map_or(true, bank_work_is_bounded)
                && bank_work_is_bounded(layout)
        }
        _ => true,
    }
}

/// The epilogue text parser: never panics, and what parses prints back to the same tree.
pub fn epilogue_text(data: &[u8]) {
    let Ok(s) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(t) = tessera_kernels::epilogue::parse_epilogue(s) {
        let printed = t.to_string();
        match tessera_kernels::epilogue::parse_epilogue(&printed) {
            Ok(back) => assert_eq!(back, t, "{s:?} printed as {printed:?}"),
            Err(e) => panic!("{s:?} printed as {printed:?}, which fails: {e}"),
        }
    }
}

/// Bytes read as small numbers; an exhausted input reads zeros.
struct Bytes<'a> {
    data: &'a [u8],
    pos: usize,
}

impl Bytes<'_> {
    fn u8(&mut self) -> u8 {
        let b = self.data.get(self.pos).copied().unwrap_or(0);
        self.pos += 1;
        b
    }

    /// An extent: mostly 1..=8, now and then one in the thousands or near 2^31.
    fn extent(&mut self) -> i64 {
        let b = self.u8();
        match b {
            0..=239 => 1 + i64::from(b % 8),
            240..=249 => 1 + i64::from(self.u8()) * 16,
            250..=253 => (1i64 << 31) - i64::from(b - 250),
            _ => 1i64 << 40,
        }
    }

    /// A stride: mostly -8..=8, now and then a large power of two or a value near the
    /// ends of the i64 range.
    fn stride(&mut self) -> i64 {
        let b = self.u8();
        match b {
            0..=229 => i64::from(b % 17) - 8,
            230..=239 => 1i64 << (10 + (b - 230) * 5),
            240..=243 => -(1i64 << (20 + (b - 240) * 10)),
            244 => i64::MAX,
            245 => i64::MIN,
            246 => i64::MAX / 2,
            247 => i64::MIN / 2,
            248 => i64::MAX / 3,
            _ => i64::from(self.u8()) - 128,
        }
    }

    /// A shape and a congruent stride of depth at most 2 and rank at most 4.
    fn parts(&mut self, depth: u8) -> (IntTuple, IntTuple) {
        let b = self.u8();
        if depth >= 2 || b % 4 == 0 {
            return (IntTuple::Int(self.extent()), IntTuple::Int(self.stride()));
        }
        let rank = usize::from(b / 4 % 4) + 1;
        let (s, d): (Vec<_>, Vec<_>) = (0..rank).map(|_| self.parts(depth + 1)).unzip();
        (IntTuple::Tuple(s), IntTuple::Tuple(d))
    }

    /// A layout, or `None` when the drawn shape and stride are not one (its size or image
    /// leaves the i64 range).
    fn layout(&mut self) -> Option<Layout> {
        let (s, d) = self.parts(0);
        Layout::new(s, d).ok()
    }

    /// A tiler for `l`: a layout, or by mode with items `_`, an extent, or a layout.
    fn tiler(&mut self, l: &Layout) -> Option<Tiler> {
        if self.u8() % 2 == 0 {
            return self.layout().map(Tiler::Layout);
        }
        let n = 1 + usize::from(self.u8()) % l.rank().max(1);
        let mut items = Vec::with_capacity(n);
        for _ in 0..n {
            items.push(match self.u8() % 3 {
                0 => Tiler::Skip,
                1 => Tiler::from_shape(&IntTuple::Int(self.extent())).ok()?,
                _ => Tiler::Layout(self.layout()?),
            });
        }
        Some(Tiler::ByMode(items))
    }

    /// A cotarget: an integer or a shape of rank 1 to 3.
    fn cotarget(&mut self) -> IntTuple {
        match self.u8() % 3 {
            0 => IntTuple::Int(self.extent() * i64::from(1 + self.u8() % 4)),
            n => IntTuple::flat((0..=n).map(|_| self.extent())),
        }
    }
}

fn small(ls: &[&Layout]) -> bool {
    ls.iter().all(|l| l.size() <= CHECKED_SIZE)
}

/// Every layout item of the tiler is small.
fn small_tiler(t: &Tiler) -> bool {
    match t {
        Tiler::Layout(l) => l.size() <= CHECKED_SIZE,
        Tiler::Skip => true,
        Tiler::ByMode(ts) => ts.iter().all(small_tiler),
    }
}

/// Runs the checker on an answer, or the refusal verifier on an error, when `checked`.
fn judge<T>(
    what: impl Fn() -> String,
    checked: bool,
    got: tl::Result<T>,
    post: impl FnOnce(&T) -> Verdict,
    refused: impl FnOnce(&LayoutError) -> Verdict,
) {
    match (&got, checked) {
        (Ok(v), true) => verdict(&what, post(v)),
        (Err(e), true) => verdict(&what, refused(e)),
        (Ok(_), false) => {}
        (Err(e), false) => {
            let _ = e.to_string();
        }
    }
}

/// `composition(A, B)` and `composition(A, tiler)`.
pub fn composition(data: &[u8]) {
    let mut b = Bytes { data, pos: 0 };
    let (Some(x), Some(y)) = (b.layout(), b.layout()) else {
        return;
    };
    let checked = small(&[&y]) && x.size() <= 1 << 20;
    judge(
        || format!("composition({x}, {y})"),
        checked,
        tl::composition(&x, &y),
        |r| check::composition(&x, &y, r),
        |e| check::composition_refused(&x, &y, e),
    );
    if let Some(t) = b.tiler(&x) {
        let r = tl::composition_tiler(&x, &t);
        // The checker enumerates the result, whose size is the tiler's.
        if let (Ok(r), true) = (
            &r,
            small(&[&x]) && r.as_ref().is_ok_and(|r| r.size() <= CHECKED_SIZE),
        ) {
            verdict(
                || format!("composition({x}, {t})"),
                check::composition_tiler(&x, &t, r),
            );
        }
    }
}

/// `complement(L, cotarget)` and `complement(L)`.
pub fn complement(data: &[u8]) {
    let mut b = Bytes { data, pos: 0 };
    let Some(l) = b.layout() else {
        return;
    };
    let cot = b.cotarget();
    let r = tl::complement(&l, &cot);
    // The checker enumerates (filter(L), R) together: both and their product must be small.
    let pair = |r: &Layout| r.size() <= CHECKED_SIZE && l.size() * r.size() <= CHECKED_PAIR;
    let checked = small(&[&l]) && r.as_ref().map_or(true, pair);
    judge(
        || format!("complement({l}, {cot})"),
        checked,
        r,
        |r| check::complement(&l, &cot, r),
        |e| check::complement_refused(&l, &cot, e),
    );
    let r = tl::complement_default(&l);
    if let (Ok(r), true) = (&r, small(&[&l]) && r.as_ref().is_ok_and(pair)) {
        let cot = IntTuple::Int(tl::filter(&l).cosize());
        verdict(
            || format!("complement({l})"),
            check::complement(&l, &cot, r),
        );
    }
}

/// The four divides.
pub fn divide(data: &[u8]) {
    let mut b = Bytes { data, pos: 0 };
    let Some(l) = b.layout() else {
        return;
    };
    let Some(t) = b.tiler(&l) else {
        return;
    };
    let r = tl::logical_divide(&l, &t);
    let checked =
        small(&[&l]) && small_tiler(&t) && r.as_ref().map_or(true, |r| r.size() <= CHECKED_SIZE);
    let what = || format!("logical_divide({l}, {t})");
    judge(
        what,
        checked,
        r,
        |r| check::logical_divide(&l, &t, r),
        |e| check::logical_divide_refused(&l, &t, e),
    );
    for (op, f, c) in [
        (
            "zipped_divide",
            tl::zipped_divide as fn(&Layout, &Tiler) -> tl::Result<Layout>,
            check::zipped_divide as fn(&Layout, &Tiler, &Layout) -> Verdict,
        ),
        ("tiled_divide", tl::tiled_divide, check::tiled_divide),
        ("flat_divide", tl::flat_divide, check::flat_divide),
    ] {
        let r = f(&l, &t);
        if let Err(e) = &r {
            assert_eq!(e.op(), op, "{e}");
        }
        judge(
            || format!("{op}({l}, {t})"),
            checked,
            r,
            |r| c(&l, &t, r),
            |e| check::zipped_refused(&l, &t, false, e),
        );
    }
}

/// The products by a tiler, and blocked and raked products.
pub fn product(data: &[u8]) {
    let mut b = Bytes { data, pos: 0 };
    let Some(a) = b.layout() else {
        return;
    };
    let Some(t) = b.tiler(&a) else {
        return;
    };
    let r = tl::logical_product(&a, &t);
    let checked =
        small(&[&a]) && small_tiler(&t) && r.as_ref().map_or(true, |r| r.size() <= CHECKED_SIZE);
    judge(
        || format!("logical_product({a}, {t})"),
        checked,
        r,
        |r| check::logical_product(&a, &t, r),
        |e| check::logical_product_refused(&a, &t, e),
    );
    for (op, f, c) in [
        (
            "zipped_product",
            tl::zipped_product as fn(&Layout, &Tiler) -> tl::Result<Layout>,
            check::zipped_product as fn(&Layout, &Tiler, &Layout) -> Verdict,
        ),
        ("tiled_product", tl::tiled_product, check::tiled_product),
        ("flat_product", tl::flat_product, check::flat_product),
    ] {
        let r = f(&a, &t);
        if let Err(e) = &r {
            assert_eq!(e.op(), op, "{e}");
        }
        judge(
            || format!("{op}({a}, {t})"),
            checked,
            r,
            |r| c(&a, &t, r),
            |e| check::zipped_refused(&a, &t, true, e),
        );
    }
    if let Tiler::Layout(bl) = &t {
        for (op, f, c) in [
            (
                "blocked_product",
                tl::blocked_product as fn(&Layout, &Layout) -> tl::Result<Layout>,
                check::blocked_product as fn(&Layout, &Layout, &Layout) -> Verdict,
            ),
            ("raked_product", tl::raked_product, check::raked_product),
        ] {
            let r = f(&a, bl);
            let checked = checked && small(&[bl]);
            judge(
                || format!("{op}({a}, {bl})"),
                checked,
                r,
                |r| c(&a, bl, r),
                |e| check::zipped_pairs_refused(&a, bl, e),
            );
        }
    }
}

/// `right_inverse`, `left_inverse`, `generalized_left_inverse`.
pub fn inverse(data: &[u8]) {
    let mut b = Bytes { data, pos: 0 };
    let Some(l) = b.layout() else {
        return;
    };
    let checked = small(&[&l]);
    let r = tl::right_inverse(&l);
    if let (Ok(r), true) = (&r, checked) {
        verdict(
            || format!("right_inverse({l})"),
            check::right_inverse(&l, r),
        );
    }
    judge(
        || format!("left_inverse({l})"),
        checked,
        tl::left_inverse(&l),
        |r| check::left_inverse(&l, r),
        |e| check::left_inverse_refused(&l, e),
    );
    judge(
        || format!("generalized_left_inverse({l})"),
        checked,
        tl::generalized_left_inverse(&l),
        |r| check::generalized_left_inverse(&l, r),
        |e| check::generalized_left_inverse_refused(&l, e),
    );
}

/// The operations of one layout (and a factor, an order, a second layout): coalesce, filter,
/// upcast, downcast, nullspace, make_layout_like, make_ordered_layout, tile_to_shape,
/// max_common_layout.
pub fn unary(data: &[u8]) {
    let mut b = Bytes { data, pos: 0 };
    let Some(l) = b.layout() else {
        return;
    };
    let checked = small(&[&l]);
    let w = || l.to_string();
    if checked {
        verdict(w, check::coalesce(&l, &tl::coalesce(&l)));
        verdict(w, check::filter(&l, &tl::filter(&l)));
        verdict(w, check::filter_zeros(&l, &tl::filter_zeros(&l)));
    } else {
        let _ = (tl::coalesce(&l), tl::filter(&l));
    }
    let n = i64::from(b.u8() % 10) - 1;
    judge(
        || format!("upcast({l}, {n})"),
        checked,
        tl::upcast(&l, n),
        |r| check::upcast(&l, n, r),
        |e| check::upcast_refused(&l, n, e),
    );
    let d = tl::downcast(&l, n);
    let checked_d = checked && d.as_ref().map_or(true, |r| r.size() <= CHECKED_SIZE);
    judge(
        || format!("downcast({l}, {n})"),
        checked_d,
        d,
        |r| check::downcast(&l, n, r),
        |e| check::downcast_refused(&l, n, e),
    );
    if let (Ok(r), true) = (tl::nullspace(&l), checked) {
        verdict(w, check::nullspace(&l, &r));
    }
    if let (Ok(r), true) = (tl::make_layout_like(&l), checked) {
        verdict(w, check::make_layout_like(&l, &r));
    }
    // An order over the modes (values 0..=2, ties frequent).
    let shape = l.shape().as_tuple().clone();
    let order = IntTuple::Tuple(
        shape
            .modes()
            .iter()
            .map(|_| IntTuple::Int(i64::from(b.u8() % 3)))
            .collect(),
    );
    let order = if shape.is_int() {
        IntTuple::Int(0)
    } else {
        order
    };
    if let (Ok(r), true) = (tl::make_ordered_layout(&shape, &order), checked) {
        verdict(
            || format!("make_ordered_layout({shape}, {order})"),
            check::make_ordered_layout(&shape, &order, &r),
        );
    }
    if let Some(m) = b.layout() {
        let r = tl::max_common_layout(&l, &m);
        if let (Ok(r), true) = (&r, checked && small(&[&m])) {
            verdict(
                || format!("max_common_layout({l}, {m})"),
                check::max_common_layout(&l, &m, r),
            );
        }
        // tile_to_shape: the block `l` over a target from m's shape.
        let target = m.shape().as_tuple().clone();
        let o =
            (b.u8() % 2 == 0).then(|| IntTuple::flat((0..target.rank()).map(|i| (i % 2) as i64)));
        let r = tl::tile_to_shape(&l, &target, o.as_ref());
        let checked_t = checked && small(&[&m]);
        judge(
            || format!("tile_to_shape({l}, {target}, {o:?})"),
            checked_t,
            r,
            |r| check::tile_to_shape(&l, &target, r),
            |e| check::tile_to_shape_refused(&l, &target, o.as_ref(), e),
        );
    }
}
