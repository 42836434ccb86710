//! `Shape`, `Stride` and `Coord`: int tuples with distinct roles.

use std::fmt;
use std::ops::Deref;
use std::str::FromStr;

use crate::error::{LayoutError, Result};
use crate::int_tuple::IntTuple;

macro_rules! tuple_role {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, PartialEq, Eq, Hash, Debug)]
        pub struct $name(pub IntTuple);

        impl $name {
            /// Wraps an int tuple.
            pub fn new(t: impl Into<IntTuple>) -> Self {
                $name(t.into())
            }

            /// The int tuple inside.
            pub fn as_tuple(&self) -> &IntTuple {
                &self.0
            }

            /// Unwraps the int tuple inside.
            pub fn into_inner(self) -> IntTuple {
                self.0
            }
        }

        impl Deref for $name {
            type Target = IntTuple;
            fn deref(&self) -> &IntTuple {
                &self.0
            }
        }

        impl From<IntTuple> for $name {
            fn from(t: IntTuple) -> Self {
                $name(t)
            }
        }

        impl From<i64> for $name {
            fn from(v: i64) -> Self {
                $name(IntTuple::Int(v))
            }
        }

        impl From<$name> for IntTuple {
            fn from(t: $name) -> Self {
                t.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                self.0.fmt(f)
            }
        }

        impl FromStr for $name {
            type Err = LayoutError;
            fn from_str(s: &str) -> Result<Self> {
                s.parse::<IntTuple>().map($name)
            }
        }
    };
}

tuple_role!(
    /// The extents of a layout's modes. Every leaf is at least 1.
    Shape
);
tuple_role!(
    /// The strides of a layout's modes, congruent with its shape. Leaves may be negative or 0.
    Stride
);
tuple_role!(
    /// A coordinate into a shape: an integer (a 1-D index), or a tuple weakly congruent with
    /// the shape whose leaves are integers (each may again stand for a whole sub-mode).
    Coord
);

impl Shape {
    /// Checks that every extent is at least 1.
    pub fn validate(&self, op: &'static str) -> Result<()> {
        if self.leaves().iter().all(|&v| v >= 1) {
            Ok(())
        } else {
            Err(LayoutError::BadShape {
                op,
                shape: self.to_string(),
            })
        }
    }

    /// Number of coordinates: the product of the extents.
    pub fn size(&self) -> Result<i64> {
        self.0.product()
    }
}
