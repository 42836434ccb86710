//! `tessera eval`: the layout calculator.
//!
//! The language is documented in `tessera::expr`; this file is the command-line contract:
//! one expression prints one line; `-` reads one expression per line from standard input and
//! prints exactly one line for each, an error line in place of a failed one.

use std::io::{self, BufRead, IsTerminal, Write};
use std::process::ExitCode;

use tessera::expr::{self, Error};

/// What `tessera eval --help` says after the options: the language in brief.
const AFTER_HELP: &str = "\
Literals: integers 12; int tuples (1,(2,3)); layouts SHAPE:STRIDE such as ((2,4),3):((1,8),2);
by-mode tilers <3:3,(2,4):(1,8),_,4> (items: layouts, shapes, `_`); swizzles Sw<3,4,3>;
swizzled layouts Sw<3,4,3> o 0 o (8,64):(64,1) (the offset is optional).
Calls: name(arg, ...) with CuTe's names and argument order, e.g. size(L), get(L,i,j),
composition(A,B), complement(L,24), logical_divide(L,<4,8>), eval(L,5), offsets(L).
Spaces are allowed between tokens.

Output: one line; layouts in CuTe notation without spaces, integers in decimal, tuples
(1,(1,2)), lists [0,1,2], booleans true/false, F2 maps as their bit matrix [ROW;ROW;...]
(rows from the top offset bit, digits from the top index bit; `^ BITS`: a translation).

Errors: a line `error: OPERATION: MESSAGE`. With one expression it is printed on standard
output (so the output is always one line) and also on standard error, unless both are the
same terminal; the exit status is 2 for a syntax error (malformed literal, unknown function),
1 for an error of an operation (inadmissible composition, wrong arguments, ...).
With `-`, every input line gets exactly one output line, errors included, and the exit
status is 0.";

/// The help text after the options: [`AFTER_HELP`] and the list of functions.
fn after_help() -> String {
    let mut text = String::from(AFTER_HELP);
    text.push_str("\n\nFunctions (L a layout, T a tiler, S a shape, i an integer):");
    for (_, usage) in expr::FUNCTIONS {
        text.push_str("\n  ");
        text.push_str(usage);
    }
    text
}

/// Arguments of `tessera eval`.
#[derive(clap::Args)]
#[command(after_help = after_help())]
pub struct EvalArgs {
    /// Print the intermediate layouts of a divide or a product (the complement, the
    /// composition, mode by mode), one per line, then `= RESULT`; a failing step prints its
    /// error and the last line is the `error: ...` line. Other expressions print `= VALUE`.
    #[arg(long)]
    pub explain: bool,
    /// The expression, or `-` to read one expression per line from standard input. Several
    /// words are joined with spaces, so the expression need not be quoted as one argument.
    #[arg(required = true, num_args = 1.., allow_hyphen_values = true)]
    pub expr: Vec<String>,
}

/// Runs `tessera eval`.
pub fn run(args: EvalArgs) -> ExitCode {
    if args.expr.len() == 1 && args.expr[0] == "-" {
        if args.explain {
            let _ = writeln!(
                io::stderr(),
                "error: eval: --explain takes one expression, not `-`"
            );
            return ExitCode::from(2);
        }
        return run_stdin();
    }
    let src = args.expr.join(" ");
    if args.explain {
        return run_explain(&src);
    }
    match expr::evaluate(&src) {
        Ok(v) => {
            // A closed pipe is not worth a panic; nothing useful is left to do then.
            let _ = writeln!(io::stdout(), "{v}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            let line = error_line(&e);
            let _ = writeln!(io::stdout(), "{line}");
            if !(io::stdout().is_terminal() && io::stderr().is_terminal()) {
                let _ = writeln!(io::stderr(), "{line}");
            }
            ExitCode::from(exit_status(&e))
        }
    }
}

/// `tessera eval --explain EXPR`: the steps, then `= VALUE` or the error line.
fn run_explain(src: &str) -> ExitCode {
    let x = expr::explain(src);
    let mut out = io::stdout().lock();
    for line in &x.steps {
        let _ = writeln!(out, "{line}");
    }
    match x.result {
        Ok(v) => {
            let _ = writeln!(out, "= {v}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            let line = error_line(&e);
            let _ = writeln!(out, "{line}");
            if !(io::stdout().is_terminal() && io::stderr().is_terminal()) {
                let _ = writeln!(io::stderr(), "{line}");
            }
            ExitCode::from(exit_status(&e))
        }
    }
}

/// The longest error line printed, in bytes (before `error: `).
const MAX_ERROR_LINE: usize = 1000;

/// The line printed for an error: `error: ` and the error, which starts with the operation.
/// A message quotes its operands; the line stays one line whatever they held, and one of
/// at most [`MAX_ERROR_LINE`] bytes (the middle of a longer one gives way to an ellipsis).
fn error_line(e: &Error) -> String {
    let msg = e.to_string().replace(['\n', '\r'], " ");
    if msg.len() <= MAX_ERROR_LINE {
        return format!("error: {msg}");
    }
    let mut head = MAX_ERROR_LINE * 2 / 3;
    while !msg.is_char_boundary(head) {
        head -= 1;
    }
    let mut tail = msg.len() - MAX_ERROR_LINE / 3;
    while !msg.is_char_boundary(tail) {
        tail += 1;
    }
    format!("error: {}…{}", &msg[..head], &msg[tail..])
}

fn exit_status(e: &Error) -> u8 {
    if e.is_syntax() {
        2
    } else {
        1
    }
}

/// `tessera eval -`: one output line per input line, in order.
fn run_stdin() -> ExitCode {
    let stdin = io::stdin();
    let mut input = stdin.lock();
    let stdout = io::stdout();
    let mut out = stdout.lock();
    let mut buf = Vec::new();
    loop {
        buf.clear();
        match input.read_until(b'\n', &mut buf) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) => {
                let _ = writeln!(io::stderr(), "error: eval: reading standard input: {e}");
                return ExitCode::from(1);
            }
        }
        let line = String::from_utf8_lossy(&buf);
        let text = match expr::evaluate(line.trim_end_matches(['\n', '\r'])) {
            Ok(v) => v.to_string(),
            Err(e) => error_line(&e),
        };
        // Flush per line so a caller that writes one expression and waits gets its answer.
        if writeln!(out, "{text}").and_then(|_| out.flush()).is_err() {
            break;
        }
    }
    ExitCode::SUCCESS
}
