//! The structural operations (`get`, `select`, `take`, `group`, `append`, `prepend`,
//! `replace`) on int tuples, mirroring the `Layout` methods of the same names.

use tessera_layout::IntTuple;

use super::Error;

fn out_of_range(op: &'static str, t: &IntTuple, index: impl std::fmt::Display) -> Error {
    Error::call(
        op,
        format!("index {index} out of range for {t} (rank {})", t.rank()),
    )
}

/// Mode `path[0]`, then its mode `path[1]`, ... (an integer's only mode is itself).
pub(crate) fn get(t: &IntTuple, path: &[usize]) -> Result<IntTuple, Error> {
    let mut cur = t;
    for &i in path {
        cur = cur.mode(i).ok_or_else(|| out_of_range("get", cur, i))?;
    }
    Ok(cur.clone())
}

/// The tuple of the selected modes, in the order given.
pub(crate) fn select(t: &IntTuple, idx: &[usize]) -> Result<IntTuple, Error> {
    idx.iter()
        .map(|&i| {
            t.mode(i)
                .cloned()
                .ok_or_else(|| out_of_range("select", t, i))
        })
        .collect::<Result<Vec<_>, _>>()
        .map(IntTuple::Tuple)
}

fn check_range(op: &'static str, t: &IntTuple, begin: usize, end: usize) -> Result<(), Error> {
    if begin <= end && end <= t.rank() {
        Ok(())
    } else {
        Err(out_of_range(op, t, format!("[{begin},{end})")))
    }
}

/// Modes `[begin, end)` as a tuple.
pub(crate) fn take(t: &IntTuple, begin: usize, end: usize) -> Result<IntTuple, Error> {
    check_range("take", t, begin, end)?;
    Ok(IntTuple::Tuple(t.modes()[begin..end].to_vec()))
}

/// Modes `[begin, end)` grouped into one mode.
pub(crate) fn group(t: &IntTuple, begin: usize, end: usize) -> Result<IntTuple, Error> {
    check_range("group", t, begin, end)?;
    let modes = t.modes();
    let mut out = modes[..begin].to_vec();
    out.push(IntTuple::Tuple(modes[begin..end].to_vec()));
    out.extend_from_slice(&modes[end..]);
    Ok(IntTuple::Tuple(out))
}

/// `t` with `m` as a new last mode.
pub(crate) fn append(t: &IntTuple, m: &IntTuple) -> IntTuple {
    let mut out = t.modes().to_vec();
    out.push(m.clone());
    IntTuple::Tuple(out)
}

/// `t` with `m` as a new first mode.
pub(crate) fn prepend(t: &IntTuple, m: &IntTuple) -> IntTuple {
    let mut out = vec![m.clone()];
    out.extend_from_slice(t.modes());
    IntTuple::Tuple(out)
}

/// `t` with mode `i` replaced by `m` (an integer's mode 0 is the whole integer).
pub(crate) fn replace(t: &IntTuple, i: usize, m: &IntTuple) -> Result<IntTuple, Error> {
    check_range("replace", t, i, i + 1)?;
    if t.is_int() {
        return Ok(m.clone());
    }
    let mut out = t.modes().to_vec();
    out[i] = m.clone();
    Ok(IntTuple::Tuple(out))
}
