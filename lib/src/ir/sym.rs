//! Symbolic expressions: the sympy `srepr` strings of the archive
//! (`Mul(Integer(2), Symbol('s77', positive=True, integer=True))`), parsed
//! into a small tree that keeps every call, argument and keyword, so the
//! srepr text can be written back unchanged.

use std::collections::BTreeMap;

use serde::{Serialize, Serializer};

#[derive(Clone, Debug, PartialEq)]
pub enum SymExpr {
    Int(i64),
    Float(f64),
    Str(String),
    Bool(bool),
    /// A bare identifier (`oo`, or an integer too large for i64).
    Name(String),
    Call {
        func: String,
        args: Vec<SymExpr>,
        kwargs: Vec<(String, SymExpr)>,
    },
}

impl Serialize for SymExpr {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

impl SymExpr {
    /// Parses sympy `srepr` text.
    pub fn parse(text: &str) -> Result<SymExpr, String> {
        let mut p = Parser {
            s: text.as_bytes(),
            pos: 0,
        };
        let e = p.expr()?;
        p.ws();
        if p.pos != p.s.len() {
            return Err(format!(
                "unexpected text at offset {} in symbolic expression {:?}",
                p.pos, text
            ));
        }
        Ok(e)
    }

    /// A plain symbol (`Symbol('s77', positive=True, integer=True)`).
    pub fn symbol(name: &str) -> SymExpr {
        SymExpr::Call {
            func: "Symbol".into(),
            args: vec![SymExpr::Str(name.into())],
            kwargs: vec![
                ("positive".into(), SymExpr::Bool(true)),
                ("integer".into(), SymExpr::Bool(true)),
            ],
        }
    }

    /// The symbol's name when this is a bare `Symbol(...)`.
    pub fn as_symbol(&self) -> Option<&str> {
        match self {
            SymExpr::Call { func, args, .. } if func == "Symbol" => match args.first() {
                Some(SymExpr::Str(name)) => Some(name),
                _ => None,
            },
            _ => None,
        }
    }

    /// Every symbol name in the expression.
    pub fn symbols(&self, out: &mut Vec<String>) {
        if let Some(name) = self.as_symbol() {
            if !out.iter().any(|n| n == name) {
                out.push(name.to_string());
            }
            return;
        }
        if let SymExpr::Call { args, .. } = self {
            args.iter().for_each(|a| a.symbols(out));
        }
    }

    /// Evaluates the expression with symbols bound to integers.
    pub fn eval_int(&self, bindings: &BTreeMap<String, i64>) -> Result<i64, String> {
        let ints = |args: &[SymExpr]| -> Result<Vec<i64>, String> {
            args.iter().map(|a| a.eval_int(bindings)).collect()
        };
        match self {
            SymExpr::Int(v) => Ok(*v),
            SymExpr::Bool(b) => Ok(*b as i64),
            SymExpr::Call { func, args, .. } => {
                if let Some(name) = self.as_symbol() {
                    return bindings
                        .get(name)
                        .copied()
                        .ok_or_else(|| format!("symbol {name} is not bound"));
                }
                let v = ints(args)?;
                let two = || -> Result<(i64, i64), String> {
                    match v.as_slice() {
                        [a, b] => Ok((*a, *b)),
                        _ => Err(format!("{func} takes two arguments")),
                    }
                };
                match func.as_str() {
                    "Integer" => v.first().copied().ok_or_else(|| "empty Integer".into()),
                    "Add" => Ok(v.iter().sum()),
                    "Mul" => Ok(v.iter().product()),
                    "Max" => v.iter().copied().max().ok_or_else(|| "empty Max".into()),
                    "Min" => v.iter().copied().min().ok_or_else(|| "empty Min".into()),
                    "FloorDiv" => {
                        let (a, b) = two()?;
                        if b == 0 {
                            return Err("division by zero".into());
                        }
                        Ok(a.div_euclid(b) - if a.rem_euclid(b) != 0 && b < 0 { 1 } else { 0 })
                    }
                    "CeilDiv" => {
                        let (a, b) = two()?;
                        if b == 0 {
                            return Err("division by zero".into());
                        }
                        Ok(-((-a).div_euclid(b)))
                    }
                    "Mod" | "PythonMod" => {
                        let (a, b) = two()?;
                        if b == 0 {
                            return Err("modulo by zero".into());
                        }
                        Ok(a.rem_euclid(b))
                    }
                    "Pow" | "PowByNatural" => {
                        let (a, b) = two()?;
                        u32::try_from(b)
                            .ok()
                            .and_then(|e| a.checked_pow(e))
                            .ok_or_else(|| format!("cannot evaluate {a}**{b}"))
                    }
                    other => Err(format!("cannot evaluate sympy function {other}")),
                }
            }
            other => Err(format!("cannot evaluate {other} as an integer")),
        }
    }

    /// The expression as `a*s + b` in the one symbol `bindings` leaves
    /// unknown (`None` when every symbol is bound): how a derived dim
    /// (`2*s`, `s + 1`, `2*s - 1`) that torch writes is solved for its
    /// symbol. An error when it is not linear in one unknown symbol.
    pub fn linear(
        &self,
        bindings: &BTreeMap<String, i64>,
    ) -> Result<(i64, i64, Option<String>), String> {
        if let Some(name) = self.as_symbol() {
            return Ok(match bindings.get(name) {
                Some(v) => (0, *v, None),
                None => (1, 0, Some(name.to_string())),
            });
        }
        let join = |a: Option<String>, b: Option<String>| match (a, b) {
            (Some(x), Some(y)) if x != y => {
                Err(format!("{self} has two unknown symbols, {x} and {y}"))
            }
            (x, y) => Ok(x.or(y)),
        };
        match self {
            SymExpr::Call { func, args, .. } if func == "Add" => {
                let (mut a, mut b, mut s) = (0i64, 0i64, None);
                for t in args {
                    let (ta, tb, ts) = t.linear(bindings)?;
                    a = a.checked_add(ta).ok_or("overflow")?;
                    b = b.checked_add(tb).ok_or("overflow")?;
                    s = join(s, ts)?;
                }
                Ok((a, b, s))
            }
            SymExpr::Call { func, args, .. } if func == "Mul" => {
                let (mut a, mut b, mut s) = (0i64, 1i64, None::<String>);
                for t in args {
                    let (ta, tb, ts) = t.linear(bindings)?;
                    match (&s, &ts) {
                        (Some(_), Some(_)) => return Err(format!("{self} is not linear")),
                        (None, Some(_)) => {
                            // (b) * (ta*x + tb): a constant times a linear form
                            a = b.checked_mul(ta).ok_or("overflow")?;
                            b = b.checked_mul(tb).ok_or("overflow")?;
                            s = ts;
                        }
                        (_, None) => {
                            a = a.checked_mul(tb).ok_or("overflow")?;
                            b = b.checked_mul(tb).ok_or("overflow")?;
                        }
                    }
                }
                Ok((a, b, s))
            }
            _ => {
                let mut symbols = Vec::new();
                self.symbols(&mut symbols);
                if symbols.iter().all(|n| bindings.contains_key(n)) {
                    Ok((0, self.eval_int(bindings)?, None))
                } else {
                    Err(format!("{self} is not of the form a*s + b"))
                }
            }
        }
    }

    /// The sympy `srepr` text, as the archive writes it.
    pub fn srepr(&self) -> String {
        let mut out = String::new();
        self.write_srepr(&mut out);
        out
    }

    fn write_srepr(&self, out: &mut String) {
        match self {
            SymExpr::Int(v) => out.push_str(&v.to_string()),
            SymExpr::Float(v) => out.push_str(&format_float(*v)),
            SymExpr::Str(s) => {
                out.push('\'');
                for c in s.chars() {
                    if c == '\'' || c == '\\' {
                        out.push('\\');
                    }
                    out.push(c);
                }
                out.push('\'');
            }
            SymExpr::Bool(b) => out.push_str(if *b { "True" } else { "False" }),
            SymExpr::Name(n) => out.push_str(n),
            SymExpr::Call { func, args, kwargs } => {
                out.push_str(func);
                out.push('(');
                let mut first = true;
                for a in args {
                    if !first {
                        out.push_str(", ");
                    }
                    first = false;
                    a.write_srepr(out);
                }
                for (k, v) in kwargs {
                    if !first {
                        out.push_str(", ");
                    }
                    first = false;
                    out.push_str(k);
                    out.push('=');
                    v.write_srepr(out);
                }
                out.push(')');
            }
        }
    }

    fn precedence(&self) -> u8 {
        match self {
            SymExpr::Call { func, .. } if func == "Add" => 1,
            SymExpr::Call { func, .. } if func == "Mul" => 2,
            SymExpr::Call { func, .. } if func == "Pow" => 3,
            SymExpr::Int(v) if *v < 0 => 1,
            _ => 4,
        }
    }
}

/// Python-like float text: always a decimal point or exponent.
pub fn format_float(v: f64) -> String {
    if v.is_nan() {
        "nan".into()
    } else if v.is_infinite() {
        if v > 0.0 { "inf" } else { "-inf" }.into()
    } else if v == v.trunc() && v.abs() < 1e16 {
        format!("{v:.1}")
    } else {
        format!("{v:?}")
    }
}

impl std::fmt::Display for super::Sym {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            super::Sym::Int(i) => write!(f, "{i}"),
            super::Sym::Float(v) => write!(f, "{}", format_float(*v)),
            super::Sym::Bool(b) => write!(f, "{}", if *b { "True" } else { "False" }),
            super::Sym::Expr { expr, .. } => write!(f, "{expr}"),
        }
    }
}

impl std::fmt::Display for SymExpr {
    /// Plain sympy-like text (`2*s77`, `s27 + 1`), as range-constraint keys
    /// and listings show it.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if let Some(name) = self.as_symbol() {
            return f.write_str(name);
        }
        let child = |e: &SymExpr, min_prec: u8, f: &mut std::fmt::Formatter<'_>| {
            if e.precedence() < min_prec {
                write!(f, "({e})")
            } else {
                write!(f, "{e}")
            }
        };
        match self {
            SymExpr::Int(v) => write!(f, "{v}"),
            SymExpr::Float(v) => f.write_str(&format_float(*v)),
            SymExpr::Str(s) => write!(f, "{s:?}"),
            SymExpr::Bool(b) => f.write_str(if *b { "True" } else { "False" }),
            SymExpr::Name(n) => f.write_str(n),
            SymExpr::Call { func, args, .. } => match (func.as_str(), args.as_slice()) {
                ("Integer", [v]) => write!(f, "{v}"),
                ("Add", terms) if !terms.is_empty() => {
                    for (i, t) in terms.iter().enumerate() {
                        let negative = match t {
                            SymExpr::Call { func, args, .. } if func == "Integer" => {
                                matches!(args.first(), Some(SymExpr::Int(v)) if *v < 0)
                            }
                            SymExpr::Int(v) => *v < 0,
                            _ => false,
                        };
                        if i == 0 {
                            child(t, 1, f)?;
                        } else if negative {
                            let text = t.to_string();
                            write!(f, " - {}", text.trim_start_matches('-'))?;
                        } else {
                            f.write_str(" + ")?;
                            child(t, 1, f)?;
                        }
                    }
                    Ok(())
                }
                ("Mul", factors) if !factors.is_empty() => {
                    for (i, t) in factors.iter().enumerate() {
                        if i > 0 {
                            f.write_str("*")?;
                        }
                        child(t, 2, f)?;
                    }
                    Ok(())
                }
                ("Pow", [base, exp]) => {
                    child(base, 4, f)?;
                    f.write_str("**")?;
                    child(exp, 4, f)
                }
                (func, args) => {
                    write!(f, "{func}(")?;
                    for (i, a) in args.iter().enumerate() {
                        if i > 0 {
                            f.write_str(", ")?;
                        }
                        write!(f, "{a}")?;
                    }
                    f.write_str(")")
                }
            },
        }
    }
}

struct Parser<'a> {
    s: &'a [u8],
    pos: usize,
}

impl Parser<'_> {
    fn ws(&mut self) {
        while self.pos < self.s.len() && self.s[self.pos].is_ascii_whitespace() {
            self.pos += 1;
        }
    }

    fn peek(&self) -> Option<u8> {
        self.s.get(self.pos).copied()
    }

    fn err(&self, what: &str) -> String {
        format!(
            "symbolic expression {:?}: {what} at offset {}",
            String::from_utf8_lossy(self.s),
            self.pos
        )
    }

    fn ident(&mut self) -> String {
        let start = self.pos;
        while let Some(c) = self.peek() {
            if c.is_ascii_alphanumeric() || c == b'_' || c == b'.' {
                self.pos += 1;
            } else {
                break;
            }
        }
        String::from_utf8_lossy(&self.s[start..self.pos]).into_owned()
    }

    fn expr(&mut self) -> Result<SymExpr, String> {
        self.ws();
        match self.peek() {
            None => Err(self.err("unexpected end")),
            Some(b'\'') | Some(b'"') => self.string(),
            Some(c) if c == b'-' || c.is_ascii_digit() => self.number(),
            Some(c) if c.is_ascii_alphabetic() || c == b'_' => {
                let name = self.ident();
                self.ws();
                if self.peek() != Some(b'(') {
                    return Ok(match name.as_str() {
                        "True" => SymExpr::Bool(true),
                        "False" => SymExpr::Bool(false),
                        _ => SymExpr::Name(name),
                    });
                }
                self.pos += 1;
                let mut args = Vec::new();
                let mut kwargs = Vec::new();
                loop {
                    self.ws();
                    if self.peek() == Some(b')') {
                        self.pos += 1;
                        break;
                    }
                    // keyword argument?
                    let save = self.pos;
                    let key = self.ident();
                    self.ws();
                    if !key.is_empty() && self.peek() == Some(b'=') {
                        self.pos += 1;
                        kwargs.push((key, self.expr()?));
                    } else {
                        self.pos = save;
                        if !kwargs.is_empty() {
                            return Err(self.err("positional argument after keyword"));
                        }
                        args.push(self.expr()?);
                    }
                    self.ws();
                    match self.peek() {
                        Some(b',') => self.pos += 1,
                        Some(b')') => {}
                        _ => return Err(self.err("expected ',' or ')'")),
                    }
                }
                Ok(SymExpr::Call {
                    func: name,
                    args,
                    kwargs,
                })
            }
            Some(_) => Err(self.err("unexpected character")),
        }
    }

    fn string(&mut self) -> Result<SymExpr, String> {
        let quote = self.s[self.pos];
        self.pos += 1;
        let mut out = Vec::new();
        loop {
            match self.peek() {
                None => return Err(self.err("unterminated string")),
                Some(b'\\') => {
                    self.pos += 1;
                    if let Some(c) = self.peek() {
                        out.push(c);
                        self.pos += 1;
                    }
                }
                Some(c) if c == quote => {
                    self.pos += 1;
                    break;
                }
                Some(c) => {
                    out.push(c);
                    self.pos += 1;
                }
            }
        }
        Ok(SymExpr::Str(String::from_utf8_lossy(&out).into_owned()))
    }

    fn number(&mut self) -> Result<SymExpr, String> {
        let start = self.pos;
        if self.peek() == Some(b'-') {
            self.pos += 1;
        }
        let mut is_float = false;
        while let Some(c) = self.peek() {
            match c {
                b'0'..=b'9' => {}
                b'.' | b'e' | b'E' => is_float = true,
                b'+' | b'-' if matches!(self.s[self.pos - 1], b'e' | b'E') => {}
                _ => break,
            }
            self.pos += 1;
        }
        let text = std::str::from_utf8(&self.s[start..self.pos]).unwrap_or("");
        if is_float {
            text.parse()
                .map(SymExpr::Float)
                .map_err(|_| self.err("bad number"))
        } else {
            Ok(text
                .parse()
                .map(SymExpr::Int)
                .unwrap_or_else(|_| SymExpr::Name(text.to_string())))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_prints() {
        let cases = [
            ("Symbol('s77', positive=True, integer=True)", "s77"),
            (
                "Mul(Integer(2), Symbol('s77', positive=True, integer=True))",
                "2*s77",
            ),
            (
                "Add(Symbol('s27', positive=True, integer=True), Integer(1))",
                "s27 + 1",
            ),
            (
                "Add(Symbol('s27', positive=True, integer=True), Integer(-1))",
                "s27 - 1",
            ),
            (
                "Mul(Integer(4), Add(Symbol('s0', integer=True), Integer(1)))",
                "4*(s0 + 1)",
            ),
            ("Symbol('u0', integer=True)", "u0"),
            (
                "GreaterThan(Symbol('u0', integer=True), Integer(0))",
                "GreaterThan(u0, 0)",
            ),
        ];
        for (srepr, plain) in cases {
            let e = SymExpr::parse(srepr).unwrap();
            assert_eq!(e.to_string(), plain);
            assert_eq!(e.srepr(), srepr);
        }
    }

    #[test]
    fn evaluates() {
        let e = SymExpr::parse("Add(Mul(Integer(2), Symbol('s0', integer=True)), Integer(-1))")
            .unwrap();
        let mut b = BTreeMap::new();
        b.insert("s0".to_string(), 5);
        assert_eq!(e.eval_int(&b), Ok(9));
        let e = SymExpr::parse("FloorDiv(Symbol('s0', integer=True), Integer(2))").unwrap();
        assert_eq!(e.eval_int(&b), Ok(2));
        assert!(SymExpr::parse("Symbol('x'").is_err());
        assert!(SymExpr::parse("Foo(1) trailing").is_err());
    }

    #[test]
    fn solves_linear_forms() {
        let mut b = BTreeMap::new();
        let e = SymExpr::parse("Mul(Integer(2), Symbol('s0', integer=True))").unwrap();
        assert_eq!(e.linear(&b), Ok((2, 0, Some("s0".into()))));
        let e = SymExpr::parse("Add(Mul(Symbol('s0', integer=True), Integer(3)), Integer(-1))")
            .unwrap();
        assert_eq!(e.linear(&b), Ok((3, -1, Some("s0".into()))));
        let e = SymExpr::parse(
            "Add(Symbol('s1', integer=True), Mul(Integer(2), Symbol('s0', integer=True)))",
        )
        .unwrap();
        assert!(e.linear(&b).is_err());
        b.insert("s1".to_string(), 4);
        assert_eq!(e.linear(&b), Ok((2, 4, Some("s0".into()))));
        let e = SymExpr::parse("FloorDiv(Symbol('s0', integer=True), Integer(2))").unwrap();
        assert!(e.linear(&b).is_err());
    }
}
