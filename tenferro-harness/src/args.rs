//! The programs' command line, parsed by lexopt: every value checked once, a bad one
//! refused in one line in the Python CLI's words (src/trgad/cli.py and the checks of
//! src/trgad/runtime/validate.py), an option given twice refused, `-h`/`--help` answered.

use std::ffi::OsString;
use std::io::Write;

use lexopt::Arg::{Long, Short, Value};

use crate::trg;

/// The book's range of beta (trgad.runtime.validate.BETA_MIN, BETA_MAX): where the TRG
/// resolves u and c, and e^(-2 beta) is still a normal float.
pub const BETA_MIN: f64 = 1e-10;
pub const BETA_MAX: f64 = 350.0;
/// The exit statuses, as every help ends.
pub const STATUSES: &str = "exit status: 0 ok, 1 tenferro-rs failed, 2 bad input, 5 the result could not be \
written to stdout (a full disk, a closed pipe), 101 a panic inside tenferro-rs.";

/// How `whole` differentiates the traced graph.
pub enum How {
    /// `ad.grad`; `keep`: the gradient graph is not dropped (the exit frees it).
    Grad { keep: bool },
    /// The same graph in an eager session, `backward()`.
    Eager,
    /// Forward mode: `ad.jvp` with tangent 1.
    Forward,
}

pub enum Command {
    Whole { schedule: Vec<usize>, beta: f64, how: How },
    Chain { depth: usize, fanout: usize, x0: f64 },
    Staged { schedule: Vec<usize>, beta: f64, repeats: usize },
    /// Print this on stdout, exit 0.
    Help(String),
}

struct Spec {
    name: &'static str,
    about: &'static str,
    /// (option, takes a value, help)
    options: &'static [(&'static str, bool, &'static str)],
}

const SCHEDULE: &str = "kept singular values per TRG step, comma-separated (e.g. 2,4,4,16): 1 to 64 steps, \
step i keeps 1 to min(D*D, 64) (D: 2, then the k kept before)";
const BETA: &str = "inverse temperature in [1e-10, 350] (default 0.3)";

const SPECS: [Spec; 3] = [
    Spec {
        name: "whole",
        about: "ad.grad of the whole TRG graph, timed (--eager: backward() of an eager graph; --forward: ad.jvp)",
        options: &[
            ("schedule", true, SCHEDULE),
            ("beta", true, BETA),
            ("eager", false, "the same graph in an eager session, differentiated by backward()"),
            ("forward", false, "forward mode: ad.jvp of the whole graph with tangent 1, timed as ad.grad is"),
            ("keep", false, "do not drop the gradient graph (the exit frees it); ad.grad only"),
        ],
    },
    Spec {
        name: "chain",
        about: "ad.grad of the mul chain y <- y**K / K",
        options: &[
            ("depth", true, "layers in [1, 64] (required)"),
            ("fanout", true, "uses of each value per layer, in [1, 8] (default 2)"),
            ("x0", true, "point: 0 or a finite number with |x0| in [2.2250738585072014e-308, 1e6] (default 2)"),
        ],
    },
    Spec {
        name: "staged",
        about: "one VJP per TRG step (the staged crate), lnZ/N and u",
        options: &[
            ("schedule", true, SCHEDULE),
            ("beta", true, BETA),
            ("repeats", true, "timed passes after the first, in [1, 100] (default 3)"),
        ],
    },
];

fn program() -> String {
    let arg0 = std::env::args_os().next().unwrap_or_default();
    let name = std::path::Path::new(&arg0).file_name().unwrap_or_default().to_string_lossy().into_owned();
    if name.is_empty() { "trgad-tenferro".into() } else { name }
}

fn help(spec: Option<&Spec>) -> String {
    let prog = program();
    let Some(spec) = spec else {
        let cmds: Vec<String> = SPECS.iter().map(|s| format!("  {:<8}{}", s.name, s.about)).collect();
        return format!(
            "usage: {prog} {{whole,chain,staged}} [options]\n\nThe book's measurements of tenferro-rs, one JSON \
             object per run on stdout, on CpuEngine::serial() (one thread).\n\ncommands:\n{}\n\n{prog} COMMAND \
             --help lists a command's options.\n{STATUSES}\n",
            cmds.join("\n")
        );
    };
    let opts: Vec<String> = spec
        .options
        .iter()
        .map(|(o, takes, h)| format!("  --{o}{}\n        {h}", if *takes { " VALUE" } else { "" }))
        .collect();
    format!("usage: {prog} {} [options]\n\n{}\n\noptions:\n  -h, --help\n        this help\n{}\n\n{STATUSES}\n",
            spec.name, spec.about, opts.join("\n"))
}

/// The text as typed, quoted as Python's repr quotes it, cut past 60 characters.
pub fn typed(s: &str) -> String {
    let n = s.chars().count();
    let cut: String = if n > 60 { s.chars().take(40).collect::<String>() + "..." } else { s.to_string() };
    let q = if cut.contains('\'') && !cut.contains('"') { '"' } else { '\'' };
    let body = cut.replace('\\', "\\\\").replace(q, &format!("\\{q}"));
    if n > 60 { format!("{q}{body}{q} ({n} characters)") } else { format!("{q}{body}{q}") }
}

/// The words of the command line, checked: the command to run, or the help to print.
pub fn parse(words: impl IntoIterator<Item = OsString>) -> Result<Command, String> {
    let mut p = lexopt::Parser::from_args(words);
    let name = match p.next().map_err(lex_error)? {
        Some(Short('h')) | Some(Long("help")) => return Ok(Command::Help(help(None))),
        Some(Value(v)) => v.to_string_lossy().into_owned(),
        Some(other) => return Err(format!("unrecognized arguments: {}", shown(&other))),
        None => return Err(format!("the following arguments are required: command (whole, chain, staged; {} -h)", program())),
    };
    let Some(spec) = SPECS.iter().find(|s| s.name == name) else {
        return Err(format!("argument command: invalid choice: {} (choose from 'whole', 'chain', 'staged')", typed(&name)));
    };
    let mut given: Vec<(&'static str, Option<String>)> = vec![];
    while let Some(arg) = p.next().map_err(lex_error)? {
        let option = match &arg {
            Short('h') | Long("help") => return Ok(Command::Help(help(Some(spec)))),
            Long(o) => spec.options.iter().find(|(n, _, _)| n == o),
            _ => None,
        };
        let Some(&(o, takes, _)) = option else {
            return Err(format!("unrecognized arguments: {}", shown(&arg)));
        };
        if given.iter().any(|(g, _)| *g == o) {
            return Err(format!("argument --{o}: given more than once (once is allowed)"));
        }
        let value = if takes {
            let v = p.value().map_err(|_| format!("argument --{o}: expected one argument"))?;
            Some(v.into_string().map_err(|v| format!("argument --{o}: {} is not valid text", typed(&v.to_string_lossy())))?)
        } else {
            None
        };
        given.push((o, value));
    }
    let a = Given(given);
    match spec.name {
        "whole" => {
            let flags: Vec<&str> = ["eager", "forward", "keep"].into_iter().filter(|f| a.has(f)).collect();
            if flags.len() > 1 {
                return Err(format!("argument --{}: not allowed with argument --{} (--keep applies to ad.grad's \
                                    graph only; --eager and --forward are other modes)", flags[1], flags[0]));
            }
            let how = match flags.first() {
                Some(&"eager") => How::Eager,
                Some(&"forward") => How::Forward,
                _ => How::Grad { keep: a.has("keep") },
            };
            Ok(Command::Whole { schedule: a.schedule()?, beta: a.beta()?, how })
        }
        "chain" => {
            let depth = a.int("depth", None, 1, 64)?;
            let fanout = a.int("fanout", Some(2), 1, 8)?;
            Ok(Command::Chain { depth, fanout, x0: a.x0()? })
        }
        _ => Ok(Command::Staged { schedule: a.schedule()?, beta: a.beta()?, repeats: a.int("repeats", Some(3), 1, 100)? }),
    }
}

/// lexopt's error in argparse's words where argparse has some.
fn lex_error(e: lexopt::Error) -> String {
    match e {
        lexopt::Error::UnexpectedValue { option, value } => {
            format!("argument {option}: ignored explicit argument {}", typed(&value.to_string_lossy()))
        }
        other => other.to_string(),
    }
}

fn shown(arg: &lexopt::Arg) -> String {
    match arg {
        Short(c) => format!("-{c}"),
        Long(o) => format!("--{o}"),
        Value(v) => typed(&v.to_string_lossy()),
    }
}

struct Given(Vec<(&'static str, Option<String>)>);

impl Given {
    fn has(&self, name: &str) -> bool {
        self.0.iter().any(|(g, _)| *g == name)
    }
    fn text(&self, name: &str) -> Option<&str> {
        self.0.iter().find(|(g, _)| *g == name).and_then(|(_, v)| v.as_deref())
    }
    fn int(&self, name: &str, default: Option<usize>, lo: usize, hi: usize) -> Result<usize, String> {
        let Some(s) = self.text(name) else {
            return default.ok_or(format!("the following arguments are required: --{name}"));
        };
        let t = s.trim();
        let digits = t.strip_prefix(['+', '-']).unwrap_or(t);
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return Err(format!("{name}={} is not an integer", typed(s)));
        }
        match t.parse::<usize>() {
            Ok(v) if (lo..=hi).contains(&v) => Ok(v),
            _ => Err(format!("{name}={} is out of range: {name} must be an integer in [{lo}, {hi}]", typed(s))),
        }
    }
    fn number(&self, name: &str, default: f64) -> Result<(f64, String), String> {
        let Some(s) = self.text(name) else { return Ok((default, typed(&default.to_string()))) };
        let v = s.trim().parse::<f64>().map_err(|_| format!("{name}={} is not a number", typed(s)))?;
        Ok((v, typed(s)))
    }
    fn beta(&self) -> Result<f64, String> {
        let (v, t) = self.number("beta", 0.3)?;
        if !(v.is_finite() && (BETA_MIN..=BETA_MAX).contains(&v)) {
            return Err(format!("beta={t} is out of range: beta must be in [1e-10, 350] (where the TRG resolves u and c)"));
        }
        Ok(v)
    }
    /// A point: 0 exactly (a text whose digits are not all zero is refused when it rounds
    /// to 0: 1e-400), else a normal float of magnitude <= 1e6.
    fn x0(&self) -> Result<f64, String> {
        let (v, t) = self.number("x0", 2.0)?;
        let mantissa = self.text("x0").unwrap_or("2").split(['e', 'E']).next().unwrap_or("");
        let rounded_to_zero = v == 0.0 && mantissa.bytes().any(|b| (b'1'..=b'9').contains(&b));
        if !v.is_finite() || v.abs() > 1e6 || (v != 0.0 && v.abs() < f64::MIN_POSITIVE) || rounded_to_zero {
            return Err(format!("x0={t} is out of range: x0 must be 0 or a finite number with |x0| in \
                                [{:?}, 1e6] (smaller, subnormal floats are flushed to zero)", f64::MIN_POSITIVE));
        }
        Ok(v)
    }
    /// The truncation schedule: comma-separated kept values, k <= min(D*D, 64) at every step.
    fn schedule(&self) -> Result<Vec<usize>, String> {
        let s = self.text("schedule").ok_or("the following arguments are required: --schedule (e.g. 2,4,4,16)")?;
        let ks: Vec<usize> = s
            .split(',')
            .map(|w| w.trim().parse::<usize>())
            .collect::<Result<_, _>>()
            .map_err(|_| format!("schedule={} is not a comma-separated list of whole numbers", typed(s)))?;
        if ks.len() > 64 {
            return Err(format!("schedule has {} steps: allowed 1 to 64", ks.len()));
        }
        for (i, &k) in ks.iter().enumerate() {
            let d = trg::bond(&ks, i);
            if k < 1 || k > (d * d).min(64) {
                return Err(format!("schedule step {i} keeps {k}: allowed 1 to {} (D = {d})", (d * d).min(64)));
            }
        }
        Ok(ks)
    }
}

/// One line on stderr; a failure to write it is ignored (there is nowhere left to say it).
pub fn say(line: &str) {
    let _ = writeln!(std::io::stderr(), "{line}");
}
