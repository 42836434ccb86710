//! Parsing CuTe notation: int tuples `(1,(2,3))` and layouts `((2,4),3):((1,8),2)`.
//!
//! Spaces are allowed between tokens. `(3)` is a rank-1 tuple, not the integer 3.

use std::str::FromStr;

use crate::error::{LayoutError, Result};
use crate::int_tuple::IntTuple;
use crate::layout::Layout;

/// A cursor over CuTe text, for parsers that embed int tuples and layouts in a larger
/// grammar (the `tessera eval` expression language does).
#[derive(Debug, Clone)]
pub struct Cursor<'a> {
    input: &'a str,
    pos: usize,
}

impl<'a> Cursor<'a> {
    /// A cursor at the start of `input`.
    pub fn new(input: &'a str) -> Self {
        Cursor { input, pos: 0 }
    }

    /// Byte offset of the cursor.
    pub fn pos(&self) -> usize {
        self.pos
    }

    /// Moves the cursor to byte offset `pos`.
    pub fn set_pos(&mut self, pos: usize) {
        self.pos = pos.min(self.input.len());
    }

    /// The text not consumed yet.
    pub fn rest(&self) -> &'a str {
        &self.input[self.pos..]
    }

    /// Skips white space.
    pub fn skip_ws(&mut self) {
        let rest = self.rest();
        self.pos += rest.len() - rest.trim_start().len();
    }

    /// Whether only white space is left.
    pub fn at_end(&mut self) -> bool {
        self.skip_ws();
        self.pos == self.input.len()
    }

    /// The next non-space character, without consuming it.
    pub fn peek(&mut self) -> Option<char> {
        self.skip_ws();
        self.rest().chars().next()
    }

    /// Consumes `c` if it is the next non-space character.
    pub fn eat(&mut self, c: char) -> bool {
        if self.peek() == Some(c) {
            self.pos += c.len_utf8();
            true
        } else {
            false
        }
    }

    /// Consumes `c` or fails.
    pub fn expect(&mut self, c: char) -> Result<()> {
        if self.eat(c) {
            Ok(())
        } else {
            Err(self.error(format!("expected `{c}`")))
        }
    }

    /// A parse error at the cursor.
    pub fn error(&self, msg: impl Into<String>) -> LayoutError {
        LayoutError::Parse {
            input: self.input.to_string(),
            pos: self.pos,
            msg: msg.into(),
        }
    }

    /// Parses a (possibly negative) decimal integer.
    pub fn integer(&mut self) -> Result<i64> {
        self.skip_ws();
        let start = self.pos;
        let rest = self.rest();
        let mut len = 0;
        if rest.starts_with('-') || rest.starts_with('+') {
            len = 1;
        }
        let digits = rest[len..].bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return Err(self.error("expected an integer"));
        }
        len += digits;
        let text = &rest[..len];
        let v = text.parse::<i64>().map_err(|_| LayoutError::Parse {
            input: self.input.to_string(),
            pos: start,
            msg: format!("integer `{text}` does not fit in 64 bits"),
        })?;
        self.pos += len;
        Ok(v)
    }

    /// Parses an int tuple: an integer or `(t, t, ...)` (`()` is the empty tuple).
    pub fn int_tuple(&mut self) -> Result<IntTuple> {
        if self.eat('(') {
            let mut modes = Vec::new();
            if self.eat(')') {
                return Ok(IntTuple::Tuple(modes));
            }
            loop {
                modes.push(self.int_tuple()?);
                if self.eat(')') {
                    return Ok(IntTuple::Tuple(modes));
                }
                self.expect(',')?;
            }
        }
        self.integer().map(IntTuple::Int)
    }

    /// Parses a layout `SHAPE:STRIDE`.
    pub fn layout(&mut self) -> Result<Layout> {
        let start = self.pos;
        let shape = self.int_tuple()?;
        self.expect(':')?;
        let stride = self.int_tuple()?;
        Layout::new(shape, stride).map_err(|e| LayoutError::Parse {
            input: self.input.to_string(),
            pos: start,
            msg: e.to_string(),
        })
    }
}

fn parse_all<T>(s: &str, f: impl FnOnce(&mut Cursor<'_>) -> Result<T>) -> Result<T> {
    let mut c = Cursor::new(s);
    let v = f(&mut c)?;
    if !c.at_end() {
        return Err(c.error("unexpected trailing text"));
    }
    Ok(v)
}

impl FromStr for IntTuple {
    type Err = LayoutError;
    fn from_str(s: &str) -> Result<Self> {
        parse_all(s, |c| c.int_tuple())
    }
}

impl FromStr for Layout {
    type Err = LayoutError;
    /// Parses `SHAPE:STRIDE`; a shape alone gets the column-major strides.
    fn from_str(s: &str) -> Result<Self> {
        parse_all(s, |c| {
            let start = c.pos();
            let shape = c.int_tuple()?;
            if c.eat(':') {
                c.set_pos(start);
                c.layout()
            } else {
                Layout::col_major(shape).map_err(|e| c.error(e.to_string()))
            }
        })
    }
}
