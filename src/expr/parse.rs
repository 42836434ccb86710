//! Parsing expressions into an [`Expr`] tree.
//!
//! Literals whose parts are all literals are built while parsing, so a malformed one
//! (`(2,3):(1)`, `0:1`, a tiler item that is not a layout or shape) is a syntax error; the same
//! forms with computed parts are built when evaluated, and then a failure is an error of the
//! operation that builds them.

use tessera_layout::{Cursor, LayoutError};

use super::eval::FUNCTIONS;
use super::value::{self, Value};
use super::Error;

/// Deepest nesting of parentheses, tilers and calls accepted; deeper input is a syntax error
/// rather than a stack overflow.
const MAX_DEPTH: usize = 128;

/// A parsed expression.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Expr {
    /// A value known at parse time (a literal).
    Lit(Value),
    /// `(e0, e1, ...)` with computed elements, each an int tuple.
    Tuple(Vec<Expr>),
    /// `SHAPE:STRIDE` with a computed shape or stride.
    Layout(Box<Expr>, Box<Expr>),
    /// `<t0, t1, ...>` with computed items; `None` is `_`.
    Tiler(Vec<Option<Expr>>),
    /// `SWIZZLE o [OFFSET o] LAYOUT` with a computed part.
    Swizzled {
        /// The swizzle.
        swizzle: Box<Expr>,
        /// The offset (0 when absent).
        offset: Option<Box<Expr>>,
        /// The inner layout.
        layout: Box<Expr>,
    },
    /// `name(arg, ...)`; the name is one of [`FUNCTIONS`].
    Call {
        /// The function.
        name: &'static str,
        /// The arguments.
        args: Vec<Expr>,
    },
}

/// Parses one expression (the whole input).
///
/// Errors are syntax errors ([`Error::is_syntax`]).
pub fn parse(src: &str) -> Result<Expr, Error> {
    let mut p = Parser {
        src,
        pos: 0,
        depth: 0,
    };
    if p.at_end() {
        return Err(p.error("empty expression"));
    }
    let e = p.expr()?;
    if !p.at_end() {
        let found = p.peek().unwrap_or(' ');
        return Err(p.error(format!("unexpected `{found}`")));
    }
    Ok(e)
}

struct Parser<'a> {
    src: &'a str,
    pos: usize,
    depth: usize,
}

impl Parser<'_> {
    fn rest(&self) -> &str {
        &self.src[self.pos..]
    }

    fn skip_ws(&mut self) {
        let rest = self.rest();
        self.pos += rest.len() - rest.trim_start().len();
    }

    fn at_end(&mut self) -> bool {
        self.skip_ws();
        self.pos == self.src.len()
    }

    fn peek(&mut self) -> Option<char> {
        self.skip_ws();
        self.rest().chars().next()
    }

    fn eat(&mut self, c: char) -> bool {
        if self.peek() == Some(c) {
            self.pos += c.len_utf8();
            true
        } else {
            false
        }
    }

    fn expect(&mut self, c: char) -> Result<(), Error> {
        if self.eat(c) {
            Ok(())
        } else {
            let found = match self.peek() {
                Some(f) => format!("`{f}`"),
                None => "the end".to_string(),
            };
            Err(self.error(format!("expected `{c}`, found {found}")))
        }
    }

    fn error_at(&self, pos: usize, msg: impl Into<String>) -> Error {
        Error::Layout(LayoutError::Parse {
            input: self.src.to_string(),
            pos,
            msg: msg.into(),
        })
    }

    fn error(&self, msg: impl Into<String>) -> Error {
        self.error_at(self.pos, msg)
    }

    /// The identifier at the cursor (`[A-Za-z_][A-Za-z0-9_]*`), not consumed.
    fn peek_ident(&mut self) -> Option<&str> {
        self.skip_ws();
        let rest = self.rest();
        let first = rest.chars().next()?;
        if !(first.is_ascii_alphabetic() || first == '_') {
            return None;
        }
        let len = rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(rest.len());
        Some(&rest[..len])
    }

    /// Consumes the word `o` (the composition in `Sw<...> o OFFSET o LAYOUT`), or the
    /// composition sign `∘` that papers write there, if it is next.
    fn eat_o(&mut self) -> bool {
        if self.peek_ident() == Some("o") {
            self.pos += 1;
            true
        } else {
            self.eat('∘')
        }
    }

    fn integer(&mut self) -> Result<i64, Error> {
        let mut c = Cursor::new(self.src);
        c.set_pos(self.pos);
        let v = c.integer()?;
        self.pos = c.pos();
        Ok(v)
    }

    /// expr := term [`o` term [`o` term]]
    fn expr(&mut self) -> Result<Expr, Error> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(self.error(format!("expression nested deeper than {MAX_DEPTH} levels")));
        }
        let start = self.pos;
        let head = self.term()?;
        let e = if self.eat_o() {
            let first = self.term()?;
            let (offset, layout) = if self.eat_o() {
                (Some(Box::new(first)), self.term()?)
            } else {
                (None, first)
            };
            self.fold(
                start,
                Expr::Swizzled {
                    swizzle: Box::new(head),
                    offset,
                    layout: Box::new(layout),
                },
            )?
        } else {
            head
        };
        self.depth -= 1;
        Ok(e)
    }

    /// term := primary [`:` primary]
    fn term(&mut self) -> Result<Expr, Error> {
        let start = self.pos;
        let first = self.primary()?;
        if self.eat(':') {
            let stride = self.primary()?;
            return self.fold(start, Expr::Layout(Box::new(first), Box::new(stride)));
        }
        Ok(first)
    }

    fn primary(&mut self) -> Result<Expr, Error> {
        self.skip_ws();
        let start = self.pos;
        match self.peek() {
            Some('(') => {
                self.pos += 1;
                let items = self.list(')')?;
                self.fold(start, Expr::Tuple(items))
            }
            Some('<') => {
                self.pos += 1;
                let mut items = Vec::new();
                if !self.eat('>') {
                    loop {
                        if self.peek() == Some('_') && self.peek_ident() == Some("_") {
                            self.pos += 1;
                            items.push(None);
                        } else {
                            items.push(Some(self.expr()?));
                        }
                        if self.eat('>') {
                            break;
                        }
                        if !self.eat(',') {
                            return Err(self.expected_separator('>'));
                        }
                    }
                }
                self.fold(start, Expr::Tiler(items))
            }
            Some(c) if c.is_ascii_digit() || c == '-' || c == '+' => {
                Ok(Expr::Lit(Value::IntTuple(self.integer()?.into())))
            }
            Some(_) => match self.peek_ident().map(str::to_string) {
                Some(name) if name == "Sw" => self.swizzle(),
                Some(name) => {
                    self.pos += name.len();
                    let Some(&(known, _)) = FUNCTIONS.iter().find(|(f, _)| *f == name) else {
                        return Err(self.error_at(start, format!("unknown function `{name}`")));
                    };
                    if self.peek() != Some('(') {
                        return Err(self.error(format!("expected `(` after `{name}`")));
                    }
                    self.pos += 1;
                    let args = self.list(')')?;
                    Ok(Expr::Call { name: known, args })
                }
                None => Err(self.error("expected an expression")),
            },
            None => Err(self.error("expected an expression, found the end")),
        }
    }

    /// `e, e, ...` up to the closing delimiter (already past the opening one).
    fn list(&mut self, close: char) -> Result<Vec<Expr>, Error> {
        let mut items = Vec::new();
        if self.eat(close) {
            return Ok(items);
        }
        loop {
            items.push(self.expr()?);
            if self.eat(close) {
                return Ok(items);
            }
            if !self.eat(',') {
                return Err(self.expected_separator(close));
            }
        }
    }

    fn expected_separator(&mut self, close: char) -> Error {
        let found = match self.peek() {
            Some(f) => format!("`{f}`"),
            None => "the end".to_string(),
        };
        self.error(format!("expected `,` or `{close}`, found {found}"))
    }

    /// `Sw<B,M,S>`.
    fn swizzle(&mut self) -> Result<Expr, Error> {
        let start = self.pos;
        self.pos += 2;
        self.expect('<')?;
        let b = self.integer()?;
        self.expect(',')?;
        let m = self.integer()?;
        self.expect(',')?;
        let s = self.integer()?;
        self.expect('>')?;
        value::make_swizzle_literal(b, m, s)
            .map(Expr::Lit)
            .map_err(|e| self.error_at(start, e.to_string()))
    }

    /// Builds a composite literal now if all its parts are literals; a failure is then a
    /// syntax error at `start`.
    fn fold(&self, start: usize, e: Expr) -> Result<Expr, Error> {
        if !e.parts_are_literals() {
            return Ok(e);
        }
        match e.eval() {
            Ok(v) => Ok(Expr::Lit(v)),
            Err(err) if err.is_syntax() => Err(err),
            Err(err) => Err(self.error_at(start, err.to_string())),
        }
    }
}

impl Expr {
    /// Whether this is a composite literal whose parts are all known.
    fn parts_are_literals(&self) -> bool {
        let lit = |e: &Expr| matches!(e, Expr::Lit(_));
        match self {
            Expr::Lit(_) | Expr::Call { .. } => false,
            Expr::Tuple(items) => items.iter().all(lit),
            Expr::Layout(s, d) => lit(s) && lit(d),
            Expr::Tiler(items) => items.iter().flatten().all(lit),
            Expr::Swizzled {
                swizzle,
                offset,
                layout,
            } => lit(swizzle) && offset.as_deref().map_or(true, lit) && lit(layout),
        }
    }
}
